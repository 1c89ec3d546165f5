"""One run of the Run tab and every browser session watching it (docs/architecture.md §9).

The queue's worker (specviz/serving/run_queue.py) moves a run through its phases and publishes
each new trace; every session watching it (a *viewer*) waits for the next change and draws it.
The drawing of one change is shared too (`cached`): thirty sessions with the same screen size
render each new trace once. A run is wanted while one of its viewers has not asked it to stop
(each viewer joins with its session's stop signal, so the worker sees a Stop at once) nor left
(a closed page): otherwise the worker stops it after the step in progress, or never starts it.
"""

from __future__ import annotations

import contextvars
import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, Callable, Hashable

from engine.formats.trace import Trace
from specviz.serving.runner import RunRequest

QUEUED, STARTING, RUNNING, BASELINE = "queued", "starting", "running", "baseline"
DONE, FAILED, STOPPED = "done", "failed", "stopped"
ENDED = frozenset({DONE, FAILED, STOPPED})
MAX_CACHED_VIEWS = 8       # drawings kept of the newest trace: one per screen size in use


@dataclass(frozen=True)
class Snapshot:
    """What a viewer draws: the run's phase and newest trace; `version` grows with every change."""

    phase: str
    version: int = 0
    trace: Trace | None = None
    progress: tuple[float, str] | None = None      # the model load's latest report (fraction, message)
    error: str | None = None                       # FAILED: one sentence for the user

    @property
    def ended(self) -> bool:
        return self.phase in ENDED


class SharedRun:
    """A run's state, shared read-only by its viewers and written by the queue's worker alone.
    `key` is None for a run that is never shared (adaptive k: its k follows measured times)."""

    def __init__(self, key: Hashable | None, request: RunRequest, now: float):
        self.key = key
        self.request = request
        # The context of the call that made the run (Gradio's request among its variables): a ZeroGPU
        # call opened in it charges the run's GPU time to that visitor (specviz/serving/device_call.py).
        self.requester = contextvars.copy_context()
        self.requested_at = now                     # monotonic seconds, as the queue's clock gives them
        self.running_since: float | None = None     # the models ready, the first step about to start
        self.finished_at: float | None = None
        self._changed = threading.Condition()
        self._snapshot = Snapshot(QUEUED)
        self._viewers: list[threading.Event] = []      # each viewer's stop signal
        self._cache: dict[Hashable, Any] = {}
        self._cache_version = -1
        self._cache_lock = threading.Lock()

    # --- viewers ---------------------------------------------------------------------------------
    def join(self, stop: threading.Event) -> None:
        """A viewer whose session's Stop sets `stop`."""
        with self._changed:
            self._viewers.append(stop)

    def leave(self, stop: threading.Event) -> int:
        """The viewer of `stop` is gone; the number of viewers left that still want the run."""
        with self._changed:
            self._viewers.remove(stop)
            self._changed.notify_all()
            return sum(not viewer.is_set() for viewer in self._viewers)

    @property
    def viewers(self) -> int:
        with self._changed:
            return len(self._viewers)

    @property
    def wanted(self) -> bool:
        """Some viewer has neither left nor pressed Stop."""
        with self._changed:
            return any(not viewer.is_set() for viewer in self._viewers)

    def snapshot(self) -> Snapshot:
        with self._changed:
            return self._snapshot

    def wait(self, version: int, timeout: float) -> Snapshot:
        """The snapshot once it is newer than `version`, or after `timeout` seconds, whichever comes first."""
        with self._changed:
            self._changed.wait_for(lambda: self._snapshot.version != version, timeout=timeout)
            return self._snapshot

    def wait_until_ended(self, timeout: float) -> Snapshot:
        with self._changed:
            self._changed.wait_for(lambda: self._snapshot.ended, timeout=timeout)
            return self._snapshot

    def cached(self, version: int, key: Hashable, compute: Callable[[], Any]) -> Any:
        """compute(), done once per `key` for the snapshot `version` (a newer version clears the cache)."""
        with self._cache_lock:
            if version != self._cache_version:
                self._cache, self._cache_version = {}, version
            if key not in self._cache:
                if len(self._cache) >= MAX_CACHED_VIEWS:
                    self._cache.clear()
                self._cache[key] = compute()
            return self._cache[key]

    # --- the worker ------------------------------------------------------------------------------
    def starting(self) -> None:
        self._set(phase=STARTING)

    def report(self, fraction: float, message: str) -> None:
        """The model load's progress, for every viewer's progress bar."""
        self._set(progress=(fraction, message))

    def running(self, now: float) -> None:
        self.running_since = now
        self._set(phase=RUNNING)

    def publish(self, trace: Trace) -> None:
        self._set(trace=trace)

    def baseline(self, trace: Trace) -> None:
        self._set(phase=BASELINE, trace=trace)

    def end(self, phase: str, now: float, trace: Trace | None = None, error: str | None = None) -> None:
        """DONE with the whole trace, STOPPED with what was recorded (or none), FAILED with a sentence."""
        assert phase in ENDED, phase
        self.finished_at = now
        self._set(phase=phase, trace=trace if trace is not None else self._snapshot.trace, error=error)

    def _set(self, **changes: Any) -> None:
        with self._changed:
            self._snapshot = dataclasses.replace(self._snapshot, version=self._snapshot.version + 1, **changes)
            self._changed.notify_all()
