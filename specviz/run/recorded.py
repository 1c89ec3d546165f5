"""The recorded runs the Run tab offers before any model loads (the default pair greedy and
sampled, assets/traces; a run recorded from a vLLM server is labelled as the server's), and what choosing
one shows: every view, and the controls set to the run's settings so that Run re-records what the page shows."""

from __future__ import annotations

from typing import Any

import gradio as gr

from engine.formats.trace import Trace
from engine.vllm.server_info import FIX_NAME
from specviz.assets import DemoTrace
from specviz.other_engine import audit_summary, engine_name, server_name
from specviz.serving.policy import Policy
from specviz.run.views import render
from specviz.style import FigureStyle

# The controls a recorded run sets: the prompt, then SpecConfig fields of the same names.
CONTROL_FIELDS = ("prompt", "drafter", "k", "adaptive_k", "tree_nodes", "tree_branch", "temperature", "top_p", "top_k",
                  "max_new_tokens", "seed")


def choice_label(trace: Trace) -> str:
    """'greedy (T = 0) · k = 5 · 17 steps', 'sampled (T = 0.8) · k = 5 · 14 steps', or for a tree run
    'greedy (T = 0) · tree of 16 nodes, 5 deep · 9 steps'; an audited run ends with how many tokens its audit marked."""
    config = trace.config
    rule = "greedy (T = 0)" if config.is_greedy else f"sampled (T = {config.temperature:g})"
    shape = f"tree of {config.tree_nodes} nodes, {config.k} deep" if config.is_tree else f"k = {config.k}"
    server = f"{server_name(config)} · " if config.is_external else ""
    audit = "" if trace.audit is None else f" · {len(trace.audit.marked)} tokens marked by the audit"
    return f"{server}{rule} · {shape} · {len(trace.steps)} steps{audit}"


def status_for(name: str, trace: Trace | None) -> str:
    if trace is None:
        return "No recorded trace found: choose a preset and press **Run** to record one."
    config = trace.config
    rule = "greedy" if config.is_greedy else f"sampling at temperature {config.temperature:g}"
    if config.is_external:
        audit = audit_summary(trace)
        fixed = " with SpecViz's CPU sampler fix" if FIX_NAME in config.engine else ""
        return (f"Showing the recorded trace `{name}`: a run of a {engine_name(config)} server{fixed} ({rule}, "
                f"{len(trace.steps)} steps), drawn from what the server reported; shown without a server. Scrub "
                "through it, or press **Run** to record the same request with SpecViz's own engine."
                + (f" {audit}" if audit else ""))
    return (f"Showing the recorded trace `{name}` ({config.target or 'target'}, {rule}, "
            f"{len(trace.steps)} steps): a recording, shown without running a model. Scrub through it, or press "
            "**Run**.")


class RecordedRuns:
    """The recorded traces by file name, and the handler that shows one."""

    def __init__(self, demo: DemoTrace, policy: Policy = Policy()):
        self.traces = dict(demo.offered())
        self.policy = policy

    def choices(self) -> list[tuple[str, str]]:
        """(label, file name) per recorded trace, for a radio."""
        return [(choice_label(trace), name) for name, trace in self.traces.items()]

    def show(self, name: str, large: bool, width: float | None) -> tuple[Any, ...]:
        """Every view of the recorded trace `name` at its first step, then the control values that re-record it."""
        trace = self.traces.get(name)
        if trace is None:
            raise gr.Error(f"There is no recorded trace named {name!r}: choose one of the listed runs.")
        first = trace.steps[0].index if trace.steps else None
        views = render(trace, status_for(name, trace), selected=first, style=FigureStyle.for_screen(large, width))
        config = self.policy.within(trace.config)
        values = {"prompt": trace.prompt.text, **{field: getattr(config, field) for field in CONTROL_FIELDS[1:]}}
        return (*views.outputs(), *(gr.update(value=values[field]) for field in CONTROL_FIELDS))
