"""The page's model status line: the default pair loading in the background since the server
started (app.py `EngineRunner.preload`), with its progress, then ready or failed.

Each page asks once when it opens and then every TICK_S seconds while the load runs (a
gr.Timer that switches itself off when the load ends), outside the run queue, so it never
waits behind a run. A server without a background load shows no line.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from specviz.runner import LoadStatus, Runner

TICK_S = 1.0


def load_status_text(status: LoadStatus | None) -> str:
    """One or two sentences for the status line ("" when there is no background load)."""
    if status is None:
        return ""
    if status.loading:
        once = (" The first start converts the GGUF weights into a cache once (a minute or two on a 2-core CPU); "
                "later starts read the cache in seconds." if status.converted else "")
        return (f"**Loading {status.label} in the background** so that Run starts at once: {status.message} "
                f"({status.fraction:.0%}, {status.elapsed_s:.0f} s so far).{once} A Run pressed now waits for this "
                "load, and the recorded examples need no model.")
    if status.state == "failed":
        return (f"**Loading {status.label} in the background failed**: {status.message}. Press Run to try again "
                "(it shows the load's progress).")
    once = ", including the one-time conversion of its weights into the cache" if status.converted else ""
    return f"**{status.label} is loaded** ({status.elapsed_s:.0f} s{once}): Run starts at once."


def load_status_line(demo: gr.Blocks, runner: Runner) -> gr.Markdown:
    """The status line and its refresh (on page load, then by timer while loading); build inside `demo`."""
    line = gr.Markdown("", visible=False, elem_id="sv-load-status")
    timer = gr.Timer(TICK_S, active=False)

    def refresh() -> tuple[Any, Any]:
        status = runner.load_status()
        return (gr.update(value=load_status_text(status), visible=status is not None),
                gr.Timer(active=status is not None and status.loading))

    demo.load(refresh, inputs=None, outputs=[line, timer], show_progress="hidden", concurrency_limit=None,
              api_visibility="private")
    timer.tick(refresh, inputs=None, outputs=[line, timer], show_progress="hidden", concurrency_limit=None,
               api_visibility="private")
    return line
