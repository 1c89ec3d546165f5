"""A fake Runner for handler and server tests: replays hand-built steps, no model, no torch."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from engine.config import ConfigError
from engine.metrics import BaselineStats
from engine.records import StepRecord
from engine.formats.trace import Trace
from race_factory import make_race
from specviz.serving.runner import (LoadStatus, PresetInfo, ProgressFn, RaceProgress, RunnerError, RunRequest, SweepRequest,
                            SweepUpdate)
from sweep_factory import make_cell, make_sweep
from trace_factory import make_steps, trace_from_steps

PRESETS = (PresetInfo("tiny-random", "Seeded random tiny Llama pair: instant, for demos and tests."),
           PresetInfo("smollm2-ngram", "SmolLM2-135M target with n-gram prompt lookup.", default_drafter="ngram"))


class FakeGeneration:
    """Hands out pre-built steps one by one, like engine generations do. With `hold_after` set, the
    step after that many waits until `release` is set (a test's way to pause a run at a known step)."""

    def __init__(self, steps: Sequence[StepRecord], request: RunRequest, fail_at: int | None, delay: float,
                 hold_after: int | None = None, release: threading.Event | None = None):
        self._steps, self._request, self._fail_at, self._delay = list(steps), request, fail_at, delay
        self._hold_after, self._release = hold_after, release
        self._done = 0

    @property
    def is_done(self) -> bool:
        return self._done >= len(self._steps)

    def step(self) -> StepRecord:
        if self._fail_at is not None and self._done == self._fail_at:
            raise RuntimeError("simulated engine failure")
        if self._hold_after is not None and self._done == self._hold_after and self._release is not None:
            self._release.wait()
        time.sleep(self._delay)
        self._done += 1
        return self._steps[self._done - 1]

    def trace(self) -> Trace:
        config = self._request.config
        trace = trace_from_steps(self._steps[: self._done], sampling=not config.is_greedy,
                                 ngram=config.drafter == "ngram", complete=self.is_done, prompt=self._request.prompt,
                                 target_dtype=self._request.models.target_dtype)
        return dataclasses.replace(trace, config=trace.config.replace(k=config.k))


@dataclass
class FakeRunner:
    """Runner protocol implementation; records what it was asked to do."""

    accepted: Sequence[int] = (4, 2, 0, 4, 3, 1, 4, 4)
    fail_load: str = ""
    fail_at: int | None = None
    delay: float = 0.0
    requests: list[RunRequest] = field(default_factory=list)
    progress_messages: list[str] = field(default_factory=list)
    sweep_fail_at: int | None = None         # the sweep raises instead of yielding this run
    sweep_requests: list[SweepRequest] = field(default_factory=list)
    hold_after: int | None = None            # each run holds the step after this many until `release` is set
    release: threading.Event | None = None
    status: LoadStatus | None = None         # what load_status() reports (no background load by default)
    race_requests: list[RunRequest] = field(default_factory=list)

    def presets(self) -> Sequence[PresetInfo]:
        return PRESETS

    @property
    def default_preset(self) -> str:
        return "tiny-random"

    def start(self, request: RunRequest, progress: ProgressFn) -> FakeGeneration:
        self.requests.append(request)
        progress(0.5, "loading fake pair")
        self.progress_messages.append("loading fake pair")
        if self.fail_load:
            raise RunnerError(self.fail_load)
        if request.prompt == "too long":
            raise ConfigError("the prompt is longer than the model's context")
        k = request.config.k
        steps = make_steps([min(a, k) for a in self.accepted], k=k, sampling=not request.config.is_greedy,
                           ngram=request.config.drafter == "ngram")
        return FakeGeneration(steps, request, self.fail_at, self.delay, self.hold_after, self.release)

    def with_baseline(self, request: RunRequest, trace: Trace) -> Trace:
        return trace.with_baseline(BaselineStats(tokens_per_s=(trace.summary.tokens_per_s or 1.0) / 2, identical=True,
                                                 wall_s=trace.wall_s * 2,
                                                 exact_expected=trace.config.exactness.token_for_token))

    def load_status(self) -> LoadStatus | None:
        return self.status

    def race(self, request: RunRequest, progress: ProgressFn,
             should_stop: Callable[[], bool]) -> Iterator[RaceProgress]:
        """A hand-built race of `accepted` (capped at k), one progress update per lane and step."""
        self.race_requests.append(request)
        progress(0.5, "loading fake pair")
        if self.fail_load:
            raise RunnerError(self.fail_load)
        k = request.config.k
        race = make_race([min(a, k) for a in self.accepted], k=k, prompt=request.prompt,
                         config=request.config.replace(max_new_tokens=max(request.config.max_new_tokens, 64)))
        for lane in ("warm-up", "target-only"):
            yield RaceProgress(lane)
            if should_stop():
                return
        for count in range(1, len(race.speculative.steps) + 1):
            time.sleep(self.delay)
            if should_stop():
                return
            yield RaceProgress("speculative", sum(len(step.tokens) for step in race.speculative.steps[:count]))
        yield RaceProgress("done", len(race.speculative.token_ids), race)

    def sweep(self, request: SweepRequest, progress: ProgressFn) -> Iterator[SweepUpdate]:
        """Runs in engine.decode.run_sweep's order; each finished run adds to its (k, T) cell (made-up values)."""
        self.sweep_requests.append(request)
        progress(0.5, "loading fake pair")
        if self.fail_load:
            raise RunnerError(self.fail_load)
        order = [(k, t) for t in request.temperatures for _ in request.prompts for _ in request.seeds
                 for k in request.ks]
        runs: Counter = Counter()
        for done, (k, temperature) in enumerate(order, start=1):
            if self.sweep_fail_at is not None and done - 1 == self.sweep_fail_at:
                raise RuntimeError("simulated engine failure")
            time.sleep(self.delay)
            runs[(k, temperature)] += 1
            document = make_sweep(request.ks, request.temperatures, prompts=request.prompts)
            document["cells"] = [make_cell(k, t, 0.8 - 0.2 * t, 0.2, 1.5 - 0.1 * k, runs=runs[(k, t)])
                                 for t in request.temperatures for k in request.ks if runs[(k, t)]]
            yield SweepUpdate(done, len(order), 0.1 * done, 0.1 * (len(order) - done), document)
