"""The Explore tab's sweep: run a k x temperature grid live, or load one, and draw it.

The sweep is stepped inside the `sweep` generator, one run per `next()`; Stop sets
the session's signal, read after every run, and the finished cells stay. Every
problem a user can cause is a gr.Error with one clear sentence.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import gradio as gr

from engine.config import MODEL_DRAFTER, ConfigError, SpecConfig
from engine.formats.sweep_format import MAX_SWEEP_BYTES, SweepFormatError
from engine.device_costs import DeviceCosts
from engine.formats.sweep_reader import SweepTable
from specviz import updates
from specviz.controls import choose_models
from specviz.explore.server_sweep import server_k_note, server_sweep
from specviz.explore.views import ExploreViews, pick_temperature, progress_line, render_sweep, temperature_views
from specviz.serving.policy import Policy
from specviz.run.export import fresh_export_dir
from specviz.serving.runner import Runner, RunnerError, SweepRequest
from specviz.serving.notices import duration
from specviz.serving.stop import STOPPED_IN_QUEUE, Stoppable
from specviz.style import FigureStyle
from specviz.serving.uploads import parse_upload

LOG = logging.getLogger(__name__)
Outputs = tuple[Any, ...]
KS = tuple(range(1, 9))
TEMPERATURES = (0.0, 0.3, 0.7, 1.0)
MAX_SWEEP_RUNS = 240
MAX_SEEDS = 8
MAX_NEW_TOKENS = 256


@dataclass(frozen=True)
class SweepControls:
    """The sweep widgets' values, in the order the layout passes them."""

    preset: str
    draft: str
    target: str
    drafter: str
    ks: Sequence[Any]
    temperatures: Sequence[Any]
    prompts: Sequence[str]
    seeds: str
    max_new_tokens: Any
    server: Any = ""                     # a vLLM server's address, read when `preset` is VLLM_SERVER

    def to_request(self, policy: Policy = Policy()) -> SweepRequest:
        """Check every value; ConfigError with one readable sentence on bad input or what `policy` refuses."""
        ks = tuple(sorted({int(k) for k in self.ks or ()}))
        temperatures = tuple(sorted({float(t) for t in self.temperatures or ()}))
        prompts = tuple(p for p in (self.prompts or ()) if p and p.strip())
        if not ks:
            raise ConfigError("Tick at least one k to sweep.")
        if not temperatures:
            raise ConfigError("Tick at least one temperature to sweep.")
        if not prompts:
            raise ConfigError("Tick at least one prompt to sweep.")
        seeds = parse_seeds(self.seeds)
        if self.max_new_tokens is None or float(self.max_new_tokens) != int(self.max_new_tokens):
            raise ConfigError("max new tokens must be a whole number.")
        max_new_tokens = int(self.max_new_tokens)
        if not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
            raise ConfigError(f"max new tokens must be from 1 to {MAX_NEW_TOKENS} in a sweep, got {max_new_tokens}.")
        config = SpecConfig(max_new_tokens=max_new_tokens, drafter=self.drafter or MODEL_DRAFTER)
        for k in ks:                                     # every cell's config is valid before any model loads
            for temperature in temperatures:
                policy.check_config(config.replace(k=k, temperature=temperature))
        models = choose_models(self.preset, self.draft, self.target, config.drafter, server=self.server or "")
        if models.server:            # one run per (temperature, prompt, seed) at the server's own k
            ks = ks[:1]
        request = SweepRequest(models, prompts, ks, temperatures, seeds, config)
        policy.check_models(request.models)
        if request.num_runs > MAX_SWEEP_RUNS:
            raise ConfigError(f"That is {request.num_runs} runs ({len(ks)} k × {len(temperatures)} temperatures × "
                              f"{len(prompts)} prompts × {len(seeds)} seeds); the limit is {MAX_SWEEP_RUNS}.")
        return request


def parse_seeds(text: str | None) -> tuple[int, ...]:
    """'0, 1, 2' -> (0, 1, 2); ConfigError for anything else."""
    parts = [part.strip() for part in (text or "").replace(";", ",").split(",") if part.strip()]
    if not parts:
        raise ConfigError("Enter at least one seed, e.g. 0 or 0, 1, 2.")
    if not all(part.isdigit() for part in parts):
        raise ConfigError(f"Seeds must be whole numbers >= 0 separated by commas, got {text!r}.")
    seeds = tuple(dict.fromkeys(int(part) for part in parts))
    if len(seeds) > MAX_SEEDS:
        raise ConfigError(f"At most {MAX_SEEDS} seeds per sweep, got {len(seeds)}.")
    return seeds


class ExploreHandlers(Stoppable):
    """Sweep behaviour bound to a Runner; `min_interval` (seconds) throttles how often figures redraw,
    `policy` is what this server accepts; `shown_first` is the sweep a page shows before its session
    has one (the session's state starts as None, as the Run tab's does: specviz/run/tab.py)."""

    def __init__(self, runner: Runner, min_interval: float = 0.5, policy: Policy = Policy(),
                 shown_first: SweepTable | None = None):
        super().__init__()
        self.runner = runner
        self.min_interval = min_interval
        self.policy = policy
        self.shown_first = shown_first

    def _session_table(self, table: SweepTable | None) -> SweepTable | None:
        """The session's sweep; before it has one, the sweep its page opened on."""
        return table if table is not None else self.shown_first

    def sweep(self, table: SweepTable | None, temperature: float | None, large: bool, width: float | None,
              preset: str, draft: str, target: str, drafter: str, ks: list, temperatures: list, prompts: list,
              seeds: str, max_new_tokens: float, server: str = "", request: gr.Request = None,
              progress: gr.Progress = gr.Progress()) -> Iterator[Outputs]:
        """Run the grid, yielding the growing table after every run; Stop keeps the finished runs. On a vLLM
        server (`server`) the grid is its temperatures at the server's own k (specviz/explore/server_sweep.py)."""
        try:
            sweep_request = SweepControls(preset, draft, target, drafter, ks, temperatures, prompts, seeds,
                                          max_new_tokens, server).to_request(self.policy)
        except (ConfigError, ValueError, TypeError) as error:
            raise gr.Error(str(error)) from None
        style = FigureStyle.for_screen(large, width)
        table = self._session_table(table)
        with self.stop_signal(request) as stop:
            if stop.is_set():
                yield status_only(table, STOPPED_IN_QUEUE)
                return
            yield from self._sweep(sweep_request, table, temperature, style, stop, progress)

    def _sweep(self, sweep_request: SweepRequest, table: SweepTable | None, temperature: float | None,
               style: FigureStyle, stop: threading.Event, progress: gr.Progress) -> Iterator[Outputs]:
        report = lambda fraction, message: progress(fraction, desc=message)      # noqa: E731
        updates = (server_sweep(sweep_request, report) if sweep_request.models.server
                   else self.runner.sweep(sweep_request, progress=report))
        shown, update, last_draw, draw_s = None, None, 0.0, 0.0
        try:
            progress(0.0, desc=f"Loading {sweep_request.models.label}…")
            yield status_only(table, f"Loading {sweep_request.models.label} for {sweep_request.num_runs} runs…")
            while not stop.is_set():
                try:
                    latest = next(updates, None)
                except Exception as error:     # keep the finished runs on screen, then say what went wrong
                    if shown is not None:
                        yield render_sweep(shown, f"Stopped by an error after {shown.num_runs} runs.",
                                           temperature, style, self.device_costs()).outputs()
                    raise _sweep_error(error, started=shown is not None) from None
                if latest is None:
                    break
                update, shown = latest, SweepTable.from_dict(latest.document)
                status = progress_line(update.done, update.total, update.elapsed_s, update.eta_s)
                if time.monotonic() - last_draw >= max(self.min_interval, 2 * draw_s):
                    started = time.monotonic()
                    views = render_sweep(shown, status, temperature, style, self.device_costs()).outputs()
                    last_draw, draw_s = time.monotonic(), time.monotonic() - started
                    yield views
                else:
                    yield status_only(shown, status)
            if shown is None:                    # stopped while the models loaded
                yield status_only(table, "Stopped before the first run finished: the sweep shown is unchanged.")
                return
            status = (f"Stopped: the {shown.num_runs} finished runs of {sweep_request.num_runs} are kept."
                      if stop.is_set() and update.done < update.total
                      else f"Done: {shown.num_runs} runs in {duration(update.elapsed_s)}. "
                           "The speedup's starred cells are the fastest k at each temperature.")
            if sweep_request.models.server:
                status += " " + server_k_note(update.document["meta"]["ks"][0])
            yield render_sweep(shown, status, temperature, style, self.device_costs()).outputs()
        finally:
            updates.close()

    def device_costs(self) -> DeviceCosts | None:
        """This server's device costs, measured when its default pair loaded on a GPU (else None)."""
        status = self.runner.load_status()
        return status.device_costs if status is not None else None

    def select_temperature(self, table: SweepTable | None, temperature: float | None, large: bool,
                           width: float | None) -> tuple[Any, Any, Any, Any]:
        """The theory overlay, the gap's shares and the per-position lines at another temperature (the heatmaps,
        which show every temperature, stay as drawn)."""
        table = self._session_table(table)
        return temperature_views(table, pick_temperature(table, temperature), FigureStyle.for_screen(large, width),
                                 self.device_costs())

    def restyle(self, table: SweepTable | None, temperature: float | None, large: bool, width: float | None,
                status: str) -> Outputs:
        return render_sweep(self._session_table(table), status, temperature,
                            FigureStyle.for_screen(large, width), self.device_costs()).outputs()

    def upload(self, data: bytes | None, large: bool, width: float | None) -> Outputs:
        """Show an uploaded sweep JSON; a bad file is a gr.Error and the current sweep stays."""
        table = parse_upload(data, MAX_SWEEP_BYTES, "sweep", SweepTable.from_json, SweepFormatError)
        if not table.cells:
            raise gr.Error("The sweep holds no cells: nothing to draw.")
        status = f"Showing an uploaded sweep: {len(table.cells)} cells, {table.num_runs} runs."
        return render_sweep(table, status, None, FigureStyle.for_screen(large, width), self.device_costs()).outputs()

    def download(self, table: SweepTable | None) -> list[str]:
        """The sweep as JSON (every run) and CSV (one row per cell), in a fresh folder."""
        table = self._session_table(table)
        if table is None or not table.cells:
            raise gr.Error("There is no sweep to download yet: run one or upload one first.")
        directory = fresh_export_dir()
        json_path, csv_path = directory / "specviz-sweep.json", directory / "specviz-sweep.csv"
        json_path.write_text(table.to_json(), encoding="utf-8")
        csv_path.write_text(table.to_csv(), encoding="utf-8")
        return [str(json_path), str(csv_path)]


def status_only(table: SweepTable | None, status: str) -> Outputs:
    """Outputs that change the progress line only (the session keeps `table`)."""
    return updates.status_only(ExploreViews.names(), status, {"table": table})


def _sweep_error(error: Exception, started: bool) -> gr.Error:
    """One line for the user; unexpected engine failures are logged with their traceback."""
    what = "The sweep stopped" if started else "Could not start the sweep"
    if isinstance(error, (RunnerError, ValueError)):
        return gr.Error(f"{what}: {error}")
    LOG.exception("a sweep run failed")
    return gr.Error(f"{what}: {type(error).__name__}: {error}")
