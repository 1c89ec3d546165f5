"""A class is load (issue #39 item 4): the runs a page streamed from one vLLM server, reduced to the point a load
sweep would draw for them. The students of a class press Run within seconds of each other, not all at the same
instant as a sweep's level sends its N requests, so the class's N is how many of its runs were streaming on average
(Little's law: the runs' summed time from sent to done over the class's wall, first send to last token), with the
peak beside it; its aggregate and per-request tokens/s are the sweep's own definitions (engine/load/stats.py).

A class is the latest group of runs whose times overlap: a run sent after every earlier run of the server was done
starts a new class. Torch-free.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass
from typing import Sequence

from engine.load.stats import RequestTimes, acceptance, level_summary, median_request_speed
from engine.vllm.source import VllmGeneration

KEPT_RUNS = 256                 # runs remembered per page (the latest class is what is drawn)


@dataclass(frozen=True)
class ServedRun:
    """One run a page streamed from a vLLM server: which server and model, the times (time.perf_counter seconds),
    and its per-step counts (accepted, drafted)."""

    server: str                  # the server's base URL
    model: str                   # the served model name
    root: str                    # what the server loaded (a folder or a hub id)
    k: int | None
    times: RequestTimes
    accepted: tuple[int, ...]
    drafted: tuple[int, ...]


@dataclass(frozen=True)
class ClassPoint:
    """The latest class on one server as a sweep's level would be summarised."""

    server: str
    model: str
    root: str
    k: int | None
    runs: int
    mean_concurrency: float      # the runs' summed latency / the class's wall
    peak_concurrency: int        # the most runs streaming at one instant
    wall_s: float
    output_tokens: int
    aggregate_tokens_per_s: float
    per_request_tokens_per_s: float     # the median run's tokens / its time from sent to done
    acceptance_rate: float | None


def peak_concurrency(times: Sequence[RequestTimes]) -> int:
    """The most intervals [sent, done] open at one instant (a run done as another is sent does not overlap it)."""
    events = sorted([(t.sent_s, 1) for t in times] + [(t.done_s, -1) for t in times], key=lambda e: (e[0], e[1]))
    open_now = peak = 0
    for _, change in events:
        open_now += change
        peak = max(peak, open_now)
    return peak


def latest_class(runs: Sequence[ServedRun]) -> list[ServedRun]:
    """The last group of overlapping runs (by sent time): each run of it was sent before an earlier one was done (a
    run sent as the last one finishes starts a new group, as peak_concurrency counts it)."""
    group: list[ServedRun] = []
    done_by = float("-inf")
    for run in sorted(runs, key=lambda run: run.times.sent_s):
        if run.times.sent_s >= done_by:
            group = []
        group.append(run)
        done_by = max(done_by, run.times.done_s)
    return group


def class_point(runs: Sequence[ServedRun]) -> ClassPoint | None:
    """The latest class of the latest server a run went to (None: no run)."""
    if not runs:
        return None
    server = max(runs, key=lambda run: run.times.done_s).server
    group = latest_class([run for run in runs if run.server == server])
    times = [run.times for run in group]
    summary = level_summary(times)
    wall = float(summary["wall_s"])
    rate = acceptance([(run.accepted, run.drafted) for run in group])["rate"]
    last = group[-1]
    return ClassPoint(server, last.model, last.root, last.k, len(group),
                      statistics.fsum(t.latency_s for t in times) / wall if wall > 0 else float(len(group)),
                      peak_concurrency(times), wall, int(summary["output_tokens"]),
                      float(summary["aggregate_tokens_per_s"]), median_request_speed(times),
                      float(rate) if rate is not None else None)


class ClassLog:
    """The runs this page streamed from vLLM servers (the Run tab's queue records each finished one); thread-safe."""

    def __init__(self, kept: int = KEPT_RUNS):
        self._runs: deque[ServedRun] = deque(maxlen=kept)
        self._lock = threading.Lock()

    def record(self, run: ServedRun) -> None:
        with self._lock:
            self._runs.append(run)

    def runs(self) -> list[ServedRun]:
        """Every run kept, oldest first."""
        with self._lock:
            return list(self._runs)

    def point(self) -> ClassPoint | None:
        """The latest class, as a point of a load sweep."""
        return class_point(self.runs())


def served_run(generation: VllmGeneration) -> ServedRun | None:
    """A finished run of the page's vLLM source as a class's load counts it; None when it brought no token."""
    chunks = generation.chunks
    if not generation.is_done or not chunks:
        return None
    metrics = generation.metrics
    info = generation.info
    times = RequestTimes(0, generation.sent_s, chunks[0].time_s, chunks[-1].time_s,
                         sum(len(chunk.token_ids) for chunk in chunks), len(chunks[0].token_ids))
    return ServedRun(info.address.base_url, info.model, info.root, info.k, times,
                     metrics.per_step_accepted if metrics else (), metrics.per_step_drafted if metrics else ())
