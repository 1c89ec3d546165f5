"""Event handlers: plain methods bound to a Runner, each returning values for the layout's outputs.

Generation is stepped inside the `run` generator, so Gradio's Stop cancels it
between yields and the last yielded (partial) trace stays in the session state.
Every problem a user can cause becomes a gr.Error with one clear sentence.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import gradio as gr

from engine.trace import MAX_TRACE_BYTES, Trace, TraceFormatError
from specviz.controls import Controls
from specviz.exactness import exactness_note
from specviz.export import export_files
from specviz.runner import CUSTOM, Generation, RunnerError, RunRequest, Runner
from specviz.step_detail import find_step, step_detail_html
from specviz.figures.kv_cache import kv_cache_figure
from specviz.figures.timeline import timeline_figure
from specviz.style import FigureStyle
from specviz.views import Views, render

Outputs = tuple[Any, ...]


class Handlers:
    """The UI's behaviour; `min_interval` (seconds) throttles how often a fast run redraws."""

    def __init__(self, runner: Runner, min_interval: float = 0.15):
        self.runner = runner
        self.min_interval = min_interval

    # --- run / stop -----------------------------------------------------------------------
    def run(self, progress: gr.Progress = gr.Progress(), *inputs: Any) -> Iterator[Outputs]:
        """inputs: the current trace, the large-text flag, then the Controls fields in order."""
        _previous, large, *values = inputs
        request = _request(values)
        progress(0.0, desc=f"Loading {request.models.label}…")
        try:
            generation = self.runner.start(request, progress=lambda fraction, message: progress(fraction, desc=message))
        except (RunnerError, ValueError) as error:
            raise gr.Error(f"Could not start: {error}") from None
        yield from self._stream(generation, large)
        trace = generation.trace()
        yield outputs(render(trace, finished_status(trace), large=large))
        if request.with_baseline:
            yield from self._baseline(request, trace, large)

    def _stream(self, generation: Generation, large: bool) -> Iterator[Outputs]:
        last_yield, render_s = 0.0, 0.0
        while not generation.is_done:
            try:
                generation.step()
            except Exception as error:  # the engine failed mid-run: keep what it recorded, then say why
                trace = _partial(generation)
                if trace is not None:
                    yield outputs(render(trace, f"Stopped by an error after {len(trace.steps)} steps.", large=large))
                raise gr.Error(f"Generation failed: {error}. The steps recorded before it are kept.") from None
            # Redraw at most every min_interval, and never spend more than a third of the time drawing.
            if time.monotonic() - last_yield >= max(self.min_interval, 2 * render_s):
                started = time.monotonic()
                trace = generation.trace()
                status = (f"Running… step {trace.steps[-1].index} · {trace.summary.new_tokens} tokens"
                          if trace.steps else "Running…")
                views = outputs(render(trace, status, live=True, large=large))
                last_yield = time.monotonic()
                render_s = last_yield - started
                yield views

    def _baseline(self, request: RunRequest, trace: Trace, large: bool) -> Iterator[Outputs]:
        yield outputs(render(trace, "Running target-only decoding for comparison…", large=large))
        try:
            compared = self.runner.with_baseline(request, trace)
        except (RunnerError, ValueError) as error:
            raise gr.Error(f"The target-only comparison failed: {error}. The speculative run is kept.") from None
        yield outputs(render(compared, finished_status(compared), large=large))

    def stopped(self, trace: Trace | None, large: bool) -> Outputs:
        """After Stop: redraw the kept partial trace, not following the end any more."""
        if trace is None:
            return outputs(render(None, "Stopped before the first step.", large=large))
        return outputs(render(trace, f"Stopped: the {len(trace.steps)} steps recorded so far are kept.", large=large))

    # --- step scrubber ----------------------------------------------------------------------
    def select_step(self, trace: Trace | None, index: float | None, large: bool) -> tuple[Any, Any, str]:
        """Timeline and cache figure scrolled to the step and outlining it, and the step's detail."""
        step_index = None if index is None else int(round(index))
        style = FigureStyle.for_screen(large)
        return (timeline_figure(trace, selected_step=step_index, style=style),
                kv_cache_figure(trace, selected_step=step_index, style=style),
                step_detail_html(trace, step_index))

    def previous_step(self, trace: Trace | None, index: float | None, large: bool) -> tuple[Any, ...]:
        return self._move(trace, index, -1, large)

    def next_step(self, trace: Trace | None, index: float | None, large: bool) -> tuple[Any, ...]:
        return self._move(trace, index, +1, large)

    def _move(self, trace: Trace | None, index: float | None, delta: int, large: bool) -> tuple[Any, ...]:
        if trace is None or not trace.steps:
            return gr.update(), *self.select_step(trace, None, large)
        current = find_step(trace, None if index is None else int(round(index)))
        position = trace.steps.index(current) + delta
        target = trace.steps[min(max(position, 0), len(trace.steps) - 1)].index
        return gr.update(value=target), *self.select_step(trace, target, large)

    # --- display --------------------------------------------------------------------------
    def restyle(self, trace: Trace | None, index: float | None, large: bool, status: str) -> Outputs:
        """Redraw everything, e.g. after the large-text toggle."""
        selected = None if index is None else int(round(index))
        return outputs(render(trace, status, selected=selected, large=large))

    def preset_changed(self, preset: str) -> tuple[Any, Any, Any, str]:
        """Show the custom model boxes for 'custom'; pick the preset's drafter; describe it."""
        info = next((p for p in self.runner.presets() if p.name == preset), None)
        custom = preset == CUSTOM
        description = ("Type a draft and a target: hub id, local folder, or .gguf path. They must share a vocabulary."
                       if custom else (info.description if info else ""))
        drafter = gr.update(value=info.default_drafter) if info else gr.update()
        return gr.update(visible=custom), gr.update(visible=custom), drafter, description

    @staticmethod
    def exactness(target_dtype: str, temperature: float | None) -> str:
        return exactness_note(target_dtype, float(temperature or 0.0))

    # --- import / export ------------------------------------------------------------------
    def upload(self, data: bytes | None, large: bool) -> Outputs:
        """Replay an uploaded trace; a bad file is a gr.Error and the current trace stays."""
        if not data:
            raise gr.Error("The uploaded file is empty.")
        if len(data) > MAX_TRACE_BYTES:
            raise gr.Error(f"The file is over the {MAX_TRACE_BYTES // 1024 // 1024} MiB trace size limit.")
        try:
            trace = Trace.from_json(data)
        except TraceFormatError as error:
            raise gr.Error(f"Not a SpecViz trace: {error}") from None
        status = f"Replaying an uploaded trace: {len(trace.steps)} steps, no model needed."
        return outputs(render(trace, status, selected=trace.steps[0].index if trace.steps else None, large=large))

    def export(self, trace: Trace | None, large: bool) -> list[str]:
        if trace is None:
            raise gr.Error("Nothing to export yet: run a generation or load a trace first.")
        views = render(trace, "", large=large)
        figures = {"timeline": views.timeline, "kv-cache": views.kv_cache, "per-step": views.per_step,
                   "positions": views.positions, "histogram": views.histogram}
        directory = Path(tempfile.mkdtemp(prefix="specviz-export-"))
        return [str(path) for path in export_files(trace, figures, directory)]


def outputs(views: Views) -> Outputs:
    """Views as the tuple the layout's outputs expect (the scrubber becomes a slider update)."""
    scrubber = views.scrubber
    values = {name: getattr(views, name) for name in Views.names()}
    values["scrubber"] = gr.update(minimum=scrubber.minimum, maximum=scrubber.maximum, value=scrubber.value,
                                   interactive=scrubber.interactive)
    return tuple(values[name] for name in Views.names())


def finished_status(trace: Trace) -> str:
    summary = trace.summary
    why = "stopped at EOS" if trace.steps and trace.steps[-1].eos else f"reached {summary.new_tokens} new tokens"
    return f"Done: {summary.steps} steps, {why}. Scrub through the steps below."


def _request(values: list[Any]) -> RunRequest:
    try:
        return Controls(*values).to_request()
    except ValueError as error:
        raise gr.Error(str(error)) from None


def _partial(generation: Generation) -> Trace | None:
    try:
        return generation.trace()
    except Exception:  # a broken generation may not even give its partial trace
        return None
