"""What a Run tab handler receives besides the page's views, for tests that call the handlers directly: the
control values, a stand-in for gr.Progress and one for gr.Request."""

from __future__ import annotations

from specviz.controls import Controls


def controls(**changes) -> list:
    """Every Controls field in order: a tiny-random greedy run of 64 tokens at k = 4, with `changes`."""
    values = dict(preset="tiny-random", draft="", target="", drafter="model", prompt="def add(a, b):", k=4,
                  adaptive_k=False, tree_nodes=0, tree_branch=3, temperature=0.0, top_p=1.0, top_k=0,
                  max_new_tokens=64, seed=0, draft_dtype="float32", target_dtype="float32", with_baseline=False, server="")
    values.update(changes)
    return [values[name] for name in Controls.names()]


def progress(fraction, desc=None):
    """Stands in for gr.Progress outside a Gradio request."""


class Session:
    """Stands in for gr.Request: only the session id matters to Stop and the run queue."""

    def __init__(self, session_hash: str):
        self.session_hash = session_hash
