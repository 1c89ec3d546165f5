"""The page's model status line: the default pair loading in the background since the server
started (app.py `EngineRunner.preload`), with its progress, then ready or failed.

Each page asks once when it opens and then every TICK_S seconds while the load runs (a
gr.Timer that switches itself off when the load ends), outside the run queue, so it never
waits behind a run. A server without a background load shows no line.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from engine.device_costs import NGRAM_COST_RATIO, DeviceCosts
from engine.formats.trace import Trace
from engine.machine_facts import MachineFacts
from specviz.serving.fastest_here import choice_text
from specviz.serving.runner import LoadStatus, Runner

TICK_S = 1.0
LATENCY_BOUND_C = 0.5        # above this, say why a small draft costs nearly what the target does
BUSY_SHARE = 0.2             # other programs used at least this share of the CPUs while the costs were measured


def load_status_text(status: LoadStatus | None, recorded: Trace | None = None) -> str:
    """One or two sentences for the status line ("" when there is no background load); `recorded`, the page's
    recorded run, lends its acceptance to the cost model where it ran the pair that loaded."""
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
    ready = f"**{status.label} is loaded** ({status.elapsed_s:.0f} s{once}): Run starts at once."
    if status.device_costs is None:
        return ready
    choice = "" if status.machine is None else choice_text(status.device_costs, status.machine, recorded)
    busy = "" if status.machine is None else busy_text(status.machine)
    return (f"{ready}\n\n{device_costs_text(status.device_costs)}" + (f" {busy}" if busy else "")
            + (f"\n\n{choice}" if choice else ""))


def busy_text(machine: MachineFacts) -> str:
    """A warning when other programs used BUSY_SHARE or more of the CPUs while the costs were measured ("" else)."""
    if machine.others_busy is None or machine.others_busy < BUSY_SHARE:
        return ""
    return (f"**Other programs used {machine.others_busy:.0%} of this machine's CPUs while these costs were "
            "measured**, so they are likely higher than a quiet machine's and the fastest k below may be too small; "
            "restart the app when the machine is quiet to measure them again.")


def device_costs_text(costs: DeviceCosts) -> str:
    """Before any Run: what a forward costs on this machine and whether speculation can pay here, with
    the numbers (engine/device_costs.py): the break-even acceptance of the draft model and of n-gram lookup."""
    graphs = f"CUDA graphs captured in {costs.capture_s:.1f} s" if costs.graphs else f"{costs.cache} cache, no graphs"
    k = 5 if 5 in costs.ks else costs.ks[-1]
    device = "CPU" if costs.device == "cpu" else costs.device
    measured = (f"**Measured on this {device} when the pair loaded** ({graphs}): a target token "
                f"{costs.target_token_ms:.1f} ms")
    if costs.draft_token_ms is not None:
        measured += f", a draft token {costs.draft_token_ms:.1f} ms (c = {costs.cost_ratio:.2f} of a target token)"
    measured += (f", a verify of k + 1 = {k + 1} tokens {costs.verify_cost(k) * costs.target_token_ms:.1f} ms "
                 f"(v = {costs.verify_cost(k):.2f}).")
    ngram = costs.break_even(NGRAM_COST_RATIO)
    lookup = ("The n-gram drafter runs no model to draft (c ≈ 0): it pays "
              + (f"once more than {ngram:.0%} of its guesses are accepted, as on prompts that quote the text they "
                 "edit (choose it under Drafter)." if ngram is not None else "at no acceptance either here."))
    if costs.draft_token_ms is None:
        return f"{measured} {lookup}"
    model = costs.break_even()
    if model is None:
        verdict = ("**Speculation with this draft model cannot pay here**: even with every draft accepted, k drafts "
                   "and a verify cost more than the k + 1 tokens they bring.")
    else:
        verdict = (f"At these costs **the draft model pays only when more than {model:.0%} of its drafts are "
                   f"accepted** (the i.i.d. model E / (k c + v) at its best k); below that target-only decoding is "
                   "faster.")
    if costs.cost_ratio > LATENCY_BOUND_C and costs.device != "cpu":
        verdict += (" A draft token costs most of a target token here because both models are too small to keep "
                    "the GPU busy (each forward waits on kernel latency, not on its weights); a draft pays on a GPU "
                    "when it is much cheaper per token than the target, such as a small draft for a large target.")
    return f"{measured} {verdict} {lookup}"


def load_status_line(demo: gr.Blocks, runner: Runner, recorded: Trace | None = None) -> gr.Markdown:
    """The status line and its refresh (on page load, then by timer while loading); build inside `demo`;
    `recorded` as load_status_text's."""
    line = gr.Markdown("", visible=False, elem_id="sv-load-status")
    timer = gr.Timer(TICK_S, active=False)

    def refresh() -> tuple[Any, Any]:
        status = runner.load_status()
        return (gr.update(value=load_status_text(status, recorded), visible=status is not None),
                gr.Timer(active=status is not None and status.loading))

    demo.load(refresh, inputs=None, outputs=[line, timer], show_progress="hidden", concurrency_limit=None,
              api_visibility="private")
    timer.tick(refresh, inputs=None, outputs=[line, timer], show_progress="hidden", concurrency_limit=None,
               api_visibility="private")
    return line
