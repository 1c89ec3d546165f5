"""The Lab tab's behaviour: show a recorded or live lab set, and record one for a prompt.

`run` records stage D (the correct engine) first and checks it against target-only
decoding, then A, B, C, the "what if" run and the tree stage T, greedy, stepping each inside the
generator so Stop ends it between steps (finished stages stay).
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import gradio as gr

from engine.config import MODEL_DRAFTER, ConfigError, SpecConfig
from engine.formats.trace import Trace
from specviz import updates
from specviz.controls import checked_prompt, choose_models
from specviz.lab.views import REFERENCE, RUN_ORDER, LabSet, LabViews, choice, render_lab, render_step
from specviz.serving.policy import Policy
from specviz.recording import record_run
from specviz.run.step_detail import step_after
from specviz.run.views import shown_tree
from specviz.serving.runner import RunRequest, Runner
from specviz.serving.stop import STOPPED_IN_QUEUE, Stoppable
from specviz.style import FigureStyle

LOG = logging.getLogger(__name__)
Outputs = tuple[Any, ...]
MAX_LAB_TOKENS = 256


class LabHandlers(Stoppable):
    """The Lab tab's behaviour: show a stage, record every stage of a prompt (Stop keeps what finished).
    `shown_first` is the lab a page shows before its session records one (the session's state starts
    as None, as the Run tab's does: specviz/run/tab.py)."""

    def __init__(self, runner: Runner, policy: Policy = Policy(), shown_first: LabSet | None = None):
        super().__init__()
        self.runner = runner
        self.policy = policy
        self.shown_first = shown_first

    def _session_lab(self, lab: LabSet | None) -> LabSet | None:
        """The session's lab; before it has one, the lab its page opened on."""
        return lab if lab is not None else self.shown_first

    def show(self, lab: LabSet | None, key: str, status: str, large: bool, width: float | None) -> Outputs:
        """Switch the stage shown (no model runs); its first divergence is the step selected."""
        return render_lab(self._session_lab(lab), key, status, FigureStyle.for_screen(large, width)).outputs()

    def restyle(self, lab: LabSet | None, key: str, status: str, large: bool, width: float | None,
                index: float | None) -> Outputs:
        """Redraw for a new text size or screen width, keeping the selected step."""
        return render_lab(self._session_lab(lab), key, status, FigureStyle.for_screen(large, width), _step(index)).outputs()

    def select_step(self, lab: LabSet | None, key: str, index: float | None, large: bool,
                    width: float | None) -> Outputs:
        """The scrubber moved: the timeline, the step's detail, the cache figure, the step's tree and (the
        tree stage) the chain on the same step axis follow it."""
        views = render_step(self._session_lab(lab), key, _step(index), FigureStyle.for_screen(large, width))
        return views.timeline, views.detail, views.drift, shown_tree(views.tree), shown_tree(views.chain)

    def previous_step(self, lab: LabSet | None, key: str, index: float | None, large: bool,
                      width: float | None) -> Outputs:
        return self._move(lab, key, index, -1, large, width)

    def next_step(self, lab: LabSet | None, key: str, index: float | None, large: bool,
                  width: float | None) -> Outputs:
        return self._move(lab, key, index, 1, large, width)

    def _move(self, lab: LabSet | None, key: str, index: float | None, delta: int, large: bool,
              width: float | None) -> Outputs:
        lab = self._session_lab(lab)
        trace = lab.traces.get(choice(key).key) if lab else None
        if trace is None or not trace.steps:
            return (gr.update(), *self.select_step(lab, key, index, large, width))
        target = step_after(trace, _step(index), delta)
        return (target, *self.select_step(lab, key, target, large, width))

    def run(self, lab: LabSet | None, key: str, large: bool, width: float | None, preset: str, draft: str,
            target: str, prompt: str, k: float, max_new_tokens: float, request: gr.Request = None,
            progress: gr.Progress = gr.Progress()) -> Iterator[Outputs]:
        """Record every stage for `prompt` (D first, checked against target-only), showing stage `key`."""
        base_request = _request(preset, draft, target, prompt, k, max_new_tokens, self.policy)
        style = FigureStyle.for_screen(large, width)
        live = LabSet({}, base_request.models.label)
        lab = self._session_lab(lab)
        with self.stop_signal(request) as stop:
            if stop.is_set():
                yield status_only(lab, STOPPED_IN_QUEUE)
                return
            for number, stage in enumerate(RUN_ORDER, start=1):
                if stop.is_set():
                    break
                title = choice(stage).title
                yield status_only(lab if not live.traces else live,
                                  f"Recording {number} of {len(RUN_ORDER)}: {title}…")
                stage_request = RunRequest(base_request.models, base_request.prompt,
                                           choice(stage).apply(base_request.config))
                trace = record_run(self.runner, stage_request, stop,
                                   lambda fraction, message: progress(fraction, desc=message),
                                   "Could not run the lab", "The lab run failed")
                checked = live.checked
                if stage == REFERENCE and not stop.is_set():
                    yield render_lab(LabSet({stage: trace}, live.source), key,
                                     "Checking stage D against target-only decoding…", style).outputs()
                    baseline = self._baseline(stage_request, trace).summary.baseline
                    checked = bool(baseline and baseline.identical)
                live = LabSet({**live.traces, stage: trace}, live.source, checked)
                if stage == REFERENCE and not checked and not stop.is_set():
                    LOG.warning("stage D differs from target-only decoding for %r", base_request.prompt)
            status = (f"Stopped: {len(live.traces)} of {len(RUN_ORDER)} stages recorded." if stop.is_set()
                      else f"Recorded all {len(RUN_ORDER)} runs on {live.source}. Pick a stage to compare.")
            if live.checked is False:
                status += (" Stage D differed from target-only decoding: only a float-rounding near tie allows "
                           "that, so please report it.")
            yield render_lab(live, key, status, style).outputs()

    def _baseline(self, request: RunRequest, trace: Trace) -> Trace:
        try:
            return self.runner.with_baseline(request, trace)
        except Exception as error:  # the stage runs are what matter: say why the check is missing
            LOG.exception("the lab's target-only check failed")
            raise gr.Error(f"The target-only check failed: {error}") from None


def _step(index: Any) -> int | None:
    """The scrubber's value as a step index (None when the page sends none)."""
    return int(index) if isinstance(index, (int, float)) else None


def status_only(lab: LabSet | None, status: str) -> Outputs:
    """Outputs that change the status line only (the session keeps `lab`)."""
    return updates.status_only(LabViews.names(), status, {"lab": lab})


def _request(preset: str, draft: str, target: str, prompt: str, k: Any, max_new_tokens: Any,
             policy: Policy) -> RunRequest:
    """Greedy, float32, the draft model drafting: the setting in which D must equal target-only."""
    try:
        text = checked_prompt(prompt)
        tokens = int(max_new_tokens)
        if not 1 <= tokens <= MAX_LAB_TOKENS:
            raise ConfigError(f"max new tokens must be from 1 to {MAX_LAB_TOKENS} in the lab, got {tokens}.")
        config = SpecConfig(k=int(k), temperature=0.0, max_new_tokens=tokens, drafter=MODEL_DRAFTER)
        request = RunRequest(choose_models(preset, draft, target, MODEL_DRAFTER), text, config)
        policy.check(request)
        return request
    except (ConfigError, TypeError, ValueError) as error:
        raise gr.Error(str(error)) from None
