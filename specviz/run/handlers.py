"""Event handlers: plain methods bound to a Runner, each returning values for the layout's outputs.

A run goes through the server's run queue (specviz/serving/run_queue.py), whose worker steps
it; the `run` generator watches it (specviz/run/watch.py): its place in the queue while it
waits, then every step, or an identical run of another session's, shared. Stop sets the
session's stop signal, which the watcher reads before it yields the final, stopped view (the
partial trace stays in the session state). A run gets its signal as it joins Gradio's queue
(`queued`), so Stop also cancels a run still waiting: it never starts.
Every problem a user can cause becomes a gr.Error with one clear sentence.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import Any, Iterator

import gradio as gr

from engine.config import ConfigError, SpecConfig, resolve_target_dtype
from engine.formats.trace import MAX_TRACE_BYTES, Trace, TraceFormatError, first_steps
from specviz.controls import Controls
from specviz.figures.acceptance import position_figure
from specviz.figures.kv_cache import kv_cache_figure
from specviz.figures.timeline import timeline_figure
from specviz.figures.tree import is_tree_trace, tree_figure
from specviz.model_picker import picker_changed, source_controls
from specviz.serving.policy import Policy
from specviz.run.export import export_files, fresh_export_dir
from specviz.run.output_view import output_html
from specviz.run.step_detail import find_step, step_after, step_detail_html
from specviz.run.views import HELD_WHILE_LIVE, Views, render, shown_tree
from specviz.run.watch import Watch, status_only, with_eager_reason
from specviz.serving.runner import VLLM_SERVER, RunRequest, Runner
from specviz.serving.run_queue import QueueFull, RunQueue
from specviz.serving.server_interval import ServerShare, read_before, share_since
from specviz.serving.stop import STOPPED_IN_QUEUE, Stoppable, session_key
from specviz.style import FigureStyle
from specviz.serving.uploads import parse_upload

Outputs = tuple[Any, ...]
REPLAY_DELAY_S = 0.6      # between replayed steps: slow enough to follow on a projector


# Under the controls when the source is a vLLM server: the server's own dtype and sampler decide its output.
SERVER_EXACTNESS = ("A vLLM server runs at the dtype it was started with, with its own sampler: the precision "
                    "setting and SpecViz's guarantees do not apply to it (the cards name the server's engine after "
                    "the run; vLLM does not publish its dtype, so they say \"dtype not reported\").")


class Handlers(Stoppable):
    """The UI's behaviour; `min_interval` (seconds) throttles how often a fast run redraws,
    `replay_delay` paces the replay of a recorded trace, `policy` is what this server accepts;
    runs go through `queue` (specviz/serving/run_queue.py; a fresh one of `runner` by default).
    `shown_first` is the trace a page shows before its session has one of its own (the session's
    state starts as None: see specviz/run/tab.py), so every handler reads a session's trace through
    `_session_trace`."""

    def __init__(self, runner: Runner, min_interval: float = 0.15, replay_delay: float = REPLAY_DELAY_S,
                 policy: Policy = Policy(), queue: RunQueue | None = None, shown_first: Trace | None = None):
        self.runner = runner
        self.shown_first = shown_first
        self.min_interval = min_interval
        self.replay_delay = replay_delay
        self.policy = policy
        self.queue = queue if queue is not None else RunQueue(runner)
        self._shares: dict[int, tuple[weakref.ref, ServerShare]] = {}   # a server run's /metrics interval, by trace
        super().__init__()

    # --- run / stop -----------------------------------------------------------------------
    def run(self, trace: Trace | None, large: bool, width: float | None, preset: str, draft: str, target: str,
            drafter: str, prompt: str, k: float, adaptive_k: bool, tree_nodes: float, tree_branch: float,
            temperature: float, top_p: float, top_k: float,
            max_new_tokens: float, seed: float, draft_dtype: str, target_dtype: str, with_baseline: bool,
            server: str = "", request: gr.Request = None,
            progress: gr.Progress = gr.Progress()) -> Iterator[Outputs]:
        """Join the run queue (or an identical run already here) and show the run as it grows.

        `large` and `width` (viewport pixels) size the figures; the parameters after them are the
        Controls fields, in order (named for API users).
        """
        trace = self._session_trace(trace)
        with self.stop_signal(request) as stop:
            if stop.is_set():
                yield status_only(trace, STOPPED_IN_QUEUE)
                return
            run_request = _request(Controls(preset, draft, target, drafter, prompt, k, adaptive_k, tree_nodes,
                                            tree_branch, temperature, top_p, top_k, max_new_tokens, seed,
                                            draft_dtype, target_dtype, with_baseline, server), self.policy)
            style = FigureStyle.for_screen(large, width)
            before = read_before(run_request.models)       # a vLLM server's counters (None for SpecViz's engine)
            try:
                seat = self.queue.join(run_request, stop)
            except QueueFull as error:
                raise gr.Error(str(error)) from None
            watch = Watch(self.queue, seat, trace, style, stop, progress, self.min_interval)
            last = None
            try:
                for last in watch.updates():
                    yield last
            finally:
                watch.leave()
            if before is not None and last is not None:
                yield self._server_interval(dict(zip(Views.names(), last)), run_request, before, style)

    def _server_interval(self, shown: dict[str, Any], request: RunRequest, before: Any, style: FigureStyle) -> Outputs:
        """After a run on a vLLM server: the run's last update again, its by-position chart with the whole
        server's counters over the run beside the run's own (specviz/serving/server_interval.py), or its
        status with a sentence why they are missing. Whole, not a partial update: Gradio may skip a
        generator's earlier update when a later one follows at once, and this one must not lose the run."""
        server = share_since(request.models, before)
        trace, changed = shown["trace"], dict(shown)
        if isinstance(server, str):
            changed["status"] = f"{shown['status']} {server}"
        elif server is not None and isinstance(trace, Trace):
            changed["positions"] = position_figure(trace, style=style, server=server)
            self._remember(trace, server)
        return tuple(changed[name] for name in Views.names())

    def _remember(self, trace: Trace, server: ServerShare) -> None:
        """Keep a run's server interval while its trace lives (a redraw for large text draws it again)."""
        self._shares = {key: entry for key, entry in self._shares.items() if entry[0]() is not None}
        self._shares[id(trace)] = (weakref.ref(trace), server)

    def _render(self, trace: Trace | None, status: str, selected: int | None, style: FigureStyle) -> Views:
        """render(), with the server interval this trace's run was drawn with, if any."""
        views = render(trace, status, selected=selected, style=style)
        entry = self._shares.get(id(trace)) if trace is not None else None
        if entry is None or entry[0]() is not trace:
            return views
        return dataclasses.replace(views, positions=position_figure(trace, style=style, server=entry[1]))

    def replay(self, trace: Trace | None, large: bool, width: float | None,
               request: gr.Request = None) -> Iterator[Outputs]:
        """Play a recorded trace back step by step, no model needed (Stop ends it, keeping the whole trace)."""
        trace = self._session_trace(trace)
        if trace is None or not trace.steps:
            raise gr.Error("There is no recorded trace to replay: run a generation or load a trace first.")
        style = FigureStyle.for_screen(large, width)
        session = session_key(request)
        stop = self.stops.open(session)
        try:
            for count in range(1, len(trace.steps) + 1):
                if stop.is_set():
                    break
                shown = first_steps(trace, count)
                status = f"Replaying… step {shown.steps[-1].index} of {trace.steps[-1].index}"
                unchanged = HELD_WHILE_LIVE if count > 1 else ()       # their stand-ins are on the page
                views = dict(zip(Views.names(), render(shown, status, live=True, style=style).outputs(unchanged)))
                views["trace"] = trace                 # the session keeps the whole trace all along
                yield tuple(views.values())
                time.sleep(self.replay_delay)
            yield render(trace, f"Replayed {len(trace.steps)} recorded steps. Scrub through them below.",
                                 style=style).outputs()
        finally:
            self.stops.close(session, stop)

    # --- step scrubber ----------------------------------------------------------------------
    def select_step(self, trace: Trace | None, index: float | None, large: bool,
                    width: float | None) -> tuple[Any, Any, str, Any, str]:
        """Timeline and cache figure scrolled to the step and outlining it, the step's detail, its
        draft tree (the tree plot hidden in a chain run), and the output with the step's tokens outlined."""
        trace = self._session_trace(trace)
        step_index = None if index is None else int(round(index))
        if trace is not None and trace.steps and step_index is not None:
            step_index = find_step(trace, step_index).index
        style = FigureStyle.for_screen(large, width)
        tree = tree_figure(trace, selected_step=step_index, style=style) if is_tree_trace(trace) else None
        return (timeline_figure(trace, selected_step=step_index, style=style),
                kv_cache_figure(trace, selected_step=step_index, style=style),
                step_detail_html(trace, step_index), shown_tree(tree), output_html(trace, step_index))

    def previous_step(self, trace: Trace | None, index: float | None, large: bool,
                      width: float | None) -> tuple[Any, ...]:
        return self._move(trace, index, -1, large, width)

    def next_step(self, trace: Trace | None, index: float | None, large: bool, width: float | None) -> tuple[Any, ...]:
        return self._move(trace, index, +1, large, width)

    def _move(self, trace: Trace | None, index: float | None, delta: int, large: bool,
              width: float | None) -> tuple[Any, ...]:
        trace = self._session_trace(trace)
        if trace is None or not trace.steps:
            return gr.update(), *self.select_step(trace, None, large, width)
        target = step_after(trace, None if index is None else int(round(index)), delta)
        return gr.update(value=target), *self.select_step(trace, target, large, width)

    def _session_trace(self, trace: Trace | None) -> Trace | None:
        """The session's trace; before it has one, the trace its page opened on."""
        return trace if trace is not None else self.shown_first

    # --- display --------------------------------------------------------------------------
    def restyle(self, trace: Trace | None, index: float | None, large: bool, width: float | None,
                status: str) -> Outputs:
        """Redraw everything, e.g. after the large-text toggle or once the page knows its width."""
        trace = self._session_trace(trace)
        selected = None if index is None else int(round(index))
        return self._render(trace, status, selected, FigureStyle.for_screen(large, width)).outputs()

    def preset_changed(self, preset: str) -> tuple[Any, ...]:
        """Show the custom model boxes for 'custom' (the URL box for a vLLM server); pick the preset's
        drafter; describe it; turn k, adaptive k, tree nodes and branch off for a vLLM server, which ignores
        them, with the reason (on again for any other choice)."""
        draft, target, description, server, drafter = picker_changed(self.runner, self.policy, preset,
                                                                     with_drafter=True, with_server=True)
        return draft, target, drafter, description, server, *source_controls(preset == VLLM_SERVER)

    @staticmethod
    def exactness(target_dtype: str, temperature: float | None, preset: str = "") -> str:
        """The note under the controls: what these settings guarantee (engine.config.Exactness); for a
        vLLM server, that they do not decide what it runs."""
        if preset == VLLM_SERVER:
            return SERVER_EXACTNESS
        chosen = str(target_dtype or "auto")
        try:
            config = SpecConfig(temperature=float(temperature or 0.0),
                                target_dtype=resolve_target_dtype(chosen, "cpu"))    # a GPU's auto: said below
        except (ConfigError, TypeError, ValueError):      # an out-of-range value is reported when Run is pressed
            return ""
        if chosen == "auto" and config.is_greedy:         # the device decides: float32 on a CPU, bfloat16 on CUDA
            return (f"{config.exactness.note} On a GPU, auto picks a bfloat16 target instead: near ties may flip "
                    "there (choose float32 for token-for-token output).")
        return config.exactness.note

    # --- import / export ------------------------------------------------------------------
    def upload(self, data: bytes | None, large: bool, width: float | None) -> Outputs:
        """Replay an uploaded trace; a bad file is a gr.Error and the current trace stays."""
        trace = parse_upload(data, MAX_TRACE_BYTES, "trace", Trace.from_json, TraceFormatError)
        status = with_eager_reason(f"Replaying an uploaded trace: {len(trace.steps)} steps, no model needed.", trace)
        first = trace.steps[0].index if trace.steps else None
        return render(trace, status, selected=first, style=FigureStyle.for_screen(large, width)).outputs()

    def export(self, trace: Trace | None, index: float | None = None) -> list[str]:
        """The trace as JSON and its figures as HTML pages framed on the selected step (desktop sizes),
        sharing one plotly.min.js, and all of it zipped, in a fresh folder."""
        trace = self._session_trace(trace)
        if trace is None:
            raise gr.Error("Nothing to export yet: run a generation or load a trace first.")
        step = int(index) if isinstance(index, (int, float)) else None
        views = render(trace, "", selected=step)
        figures = {"timeline": views.timeline, "kv-cache": views.kv_cache, "per-step": views.per_step,
                   "positions": views.positions, "histogram": views.histogram}
        if views.tree is not None:
            figures["tree"] = views.tree          # the selected step's draft tree
        directory = fresh_export_dir()
        return [str(path) for path in export_files(trace, figures, directory, views.scrubber.value)]


def _request(controls: Controls, policy: Policy) -> RunRequest:
    try:
        return controls.to_request(policy)
    except ValueError as error:
        raise gr.Error(str(error)) from None
