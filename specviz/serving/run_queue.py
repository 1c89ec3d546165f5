"""The Run tab's queue (docs/architecture.md §9): one run at a time, in order of arrival, and one run
for every identical request.

A request *joins* the queue and gets a `Seat` on a `SharedRun`. A request identical to a run that
is waiting, running or recorded on this server (the same models, prompt, settings, seed and
baseline choice: `run_key`) sits on that run instead of queueing its own: it sees the same steps
as they arrive, or the recorded trace at once. Runs are deterministic for those values, except with
adaptive k (its k follows measured times), which is never shared. Finished runs stay in memory,
the oldest dropped first beyond `kept`; a failed or stopped one is dropped at once, so the next
identical request runs again. Nothing is shared across servers.

One worker thread steps the runs, so the order is the queue's whatever Gradio's worker threads
do; each waiting request is told its place and the estimated wait (`wait`), from the runs ahead
and this server's measured speed (specviz/serving/wait_estimate.py). On a ZeroGPU Space (`gpu`:
spaces.GPU) a run's device work is one GPU call that starts when the run leaves the queue
(specviz/serving/device_call.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Hashable

from engine.formats.trace import Trace
from engine.vllm.transport import VllmError
from specviz.serving.device_call import DeviceCall, DeviceCallGeneration, GpuDecorator
from specviz.serving.runner import Generation, RunRequest, Runner, RunnerError
from specviz.serving.shared_run import DONE, FAILED, STOPPED, SharedRun
from specviz.serving.wait_estimate import SpeedLog, run_seconds

LOG = logging.getLogger(__name__)
CAPACITY = 32              # distinct runs waiting at once; one more is told the server is busy
VIEWERS = 64               # pages watching runs at once (each holds a server thread); more wait in Gradio's queue
KEPT = 32                  # finished runs kept for identical requests (a trace of 256 tokens: about 1 MB)


class QueueFull(Exception):
    """The queue holds `capacity` distinct runs already: one sentence for the user."""


def run_key(request: RunRequest) -> Hashable | None:
    """What makes two requests the same run; None for a run that is never shared (adaptive k)."""
    if request.config.adaptive_k:
        return None
    return request.models.key, request.prompt, request.config, request.with_baseline


def speed_kind(request: RunRequest) -> Hashable:
    """Runs timed together for the wait estimate: the same pair, with or without a baseline after."""
    return request.models.key, request.with_baseline


@dataclass(frozen=True)
class Place:
    """Where a waiting run stands: `ahead` runs come before it, the running one included, so its
    `place` in the line is ahead + 1 (place 2: next after the run in progress); `wait_s` is the
    estimated wait (None until this server has timed a run or the running one has made steps)."""

    place: int
    ahead: int
    wait_s: float | None


@dataclass(frozen=True)
class Seat:
    """One request's view of a run: `shared` when another request made the run (then `age_s` is how
    long before this one it was requested, or started if it had); `stop` is its session's Stop."""

    run: SharedRun
    shared: bool
    age_s: float
    stop: threading.Event


class RunQueue:
    """The server's runs of the Run tab: a FIFO of distinct runs stepped by one worker thread, the
    runs in progress and recently finished by key, and the measured speed for wait estimates."""

    def __init__(self, runner: Runner, capacity: int = CAPACITY, kept: int = KEPT,
                 clock: Callable[[], float] = time.monotonic, publish_interval: float = 0.0,
                 gpu: GpuDecorator | None = None):
        self.runner = runner
        self._device = DeviceCall(runner, gpu) if gpu is not None else None   # ZeroGPU: one GPU call per run
        self.capacity = capacity
        self.kept = kept
        self.clock = clock
        self.publish_interval = publish_interval    # seconds between the traces a running run publishes
        self.speed = SpeedLog()
        self._lock = threading.Condition()
        self._waiting: deque[SharedRun] = deque()
        self._running: SharedRun | None = None
        self._by_key: dict[Hashable, SharedRun] = {}
        self._finished: OrderedDict[Hashable, SharedRun] = OrderedDict()
        self._worker: threading.Thread | None = None

    def join(self, request: RunRequest, stop: threading.Event) -> Seat:
        """A seat on the run for `request`: an identical one already here, or a new run at the back
        of the queue; `stop` is the session's Stop signal. QueueFull when `capacity` distinct runs wait already."""
        key = run_key(request)
        with self._lock:
            now = self.clock()
            existing = self._by_key.get(key) if key is not None else None
            if existing is not None and existing.snapshot().phase not in (FAILED, STOPPED):
                existing.join(stop)
                since = existing.running_since if existing.running_since is not None else existing.requested_at
                return Seat(existing, shared=True, age_s=max(0.0, now - since), stop=stop)
            if len(self._waiting) >= self.capacity:
                raise QueueFull(f"The server is busy: {len(self._waiting)} runs are waiting already. "
                                "Please try again in a minute.")
            run = SharedRun(key, request, now)
            run.join(stop)
            if key is not None:
                self._by_key[key] = run
            self._waiting.append(run)
            self._start_worker()
            self._lock.notify_all()
            return Seat(run, shared=False, age_s=0.0, stop=stop)

    def leave(self, seat: Seat) -> int:
        """The seat's request is gone (Stop, a closed page, the run shown to its end); the viewers left
        that still want the run. A waiting run nobody wants leaves the queue; a running one stops
        after its step (the worker)."""
        with self._lock:
            left = seat.run.leave(seat.stop)
            if left == 0 and seat.run in self._waiting:
                self._waiting.remove(seat.run)
                self._forget(seat.run)
                seat.run.end(STOPPED, self.clock())
            return left

    def place(self, run: SharedRun) -> Place | None:
        """The run's place in the queue and the estimated wait; None once it has left the queue."""
        with self._lock:
            if run not in self._waiting:
                return None
            index = self._waiting.index(run)
            ahead = [*([self._running] if self._running is not None else []), *list(self._waiting)[:index]]
            return Place(len(ahead) + 1, len(ahead), self._wait_s(ahead))

    def _wait_s(self, ahead: list[SharedRun]) -> float | None:
        """The runs ahead: what is left of the running one, then each waiting one whole."""
        now, total = self.clock(), 0.0
        for run in ahead:
            expected = run_seconds(self._per_token(run), run.request.config.max_new_tokens)
            if expected is None:
                return None
            elapsed = now - run.running_since if run is self._running and run.running_since is not None else 0.0
            total += max(0.0, expected - elapsed)
        return total

    def _per_token(self, run: SharedRun) -> float | None:
        """This server's measured seconds per requested token for the run's kind; before any run has
        finished, the running run's own pace so far."""
        measured = self.speed.per_token(speed_kind(run.request))
        if measured is not None:
            return measured
        running = self._running
        if running is None or running.running_since is None:
            return None
        trace = running.snapshot().trace
        tokens = trace.summary.new_tokens if trace is not None else 0
        return (self.clock() - running.running_since) / tokens if tokens else None

    # --- the worker ---------------------------------------------------------------------------------
    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="specviz-run-queue", daemon=True)
            self._worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: bool(self._waiting))
                run = self._waiting.popleft()
                if not run.wanted:               # every viewer pressed Stop while it waited: it never starts
                    self._forget(run)
                    run.end(STOPPED, self.clock())
                    continue
                self._running = run
            try:
                self._execute(run)
            except Exception as error:  # never let the worker die: the run fails, the queue goes on
                LOG.exception("the run queue's worker failed")
                run.end(FAILED, self.clock(), error=f"{type(error).__name__}: {error}")
            with self._lock:
                self._running = None
                if run.snapshot().phase == DONE and run.key is not None:
                    self._keep(run)
                else:
                    self._forget(run)

    def _execute(self, run: SharedRun) -> None:
        request = run.request
        run.starting()
        try:
            generation = (run.requester.run(self._device.start, request, run.report) if self._device is not None
                          else self.runner.start(request, progress=run.report))
        except (RunnerError, ValueError) as error:
            run.end(FAILED, self.clock(), error=f"Could not start: {error}")
            return
        except Exception as error:  # an unexpected engine failure: log it, tell the viewers in one line
            LOG.exception("starting a run failed")
            run.end(FAILED, self.clock(), error=f"Could not start: {type(error).__name__}: {error}")
            return
        try:
            self._steps(run, generation)
        finally:
            if isinstance(generation, DeviceCallGeneration):
                generation.close()          # a stopped or failed run ends its GPU call too

    def _steps(self, run: SharedRun, generation: Generation) -> None:
        request = run.request
        run.running(self.clock())
        published = self.clock()
        while not generation.is_done:
            if not run.wanted and self._stopped(run, generation):
                return
            try:
                generation.step()
            except VllmError as error:  # a vLLM server's fault (docs/architecture.md §10): its own sentence
                run.end(FAILED, self.clock(), _partial(generation), kept_sentence(str(error)))
                return
            except Exception as error:  # keep what it recorded, then say why
                LOG.exception("a generation step failed")
                run.end(FAILED, self.clock(), _partial(generation),
                        f"Generation failed: {error}. The steps recorded before it are kept.")
                return
            if self.clock() - published >= self.publish_interval or generation.is_done:
                if (trace := generation.trace()) is not run.snapshot().trace:   # a GPU call sends traces less often
                    run.publish(trace)
                published = self.clock()
        trace = generation.trace()
        if request.with_baseline and self._device is None:       # a GPU call brings its baseline with the last step
            run.baseline(trace)
            try:
                trace = self.runner.with_baseline(request, trace)
            except Exception as error:  # the speculative run is kept: say what failed
                LOG.exception("the target-only baseline failed")
                run.end(FAILED, self.clock(), trace,
                        f"The target-only comparison failed: {error}. The speculative run is kept.")
                return
        run.end(DONE, self.clock(), trace)
        self.speed.record(speed_kind(request), run.finished_at - run.running_since, request.config.max_new_tokens)

    def _stopped(self, run: SharedRun, generation: Generation) -> bool:
        """Stop a run nobody watches, unless an identical request has just joined it."""
        partial = _partial(generation)
        with self._lock:
            if run.wanted:
                return False
            self._forget(run)
            run.end(STOPPED, self.clock(), partial)
            return True

    def _keep(self, run: SharedRun) -> None:
        """Keep a finished run for identical requests; beyond `kept`, the oldest goes."""
        self._finished[run.key] = run
        while len(self._finished) > self.kept:
            old_key, old = self._finished.popitem(last=False)
            if self._by_key.get(old_key) is old:
                del self._by_key[old_key]

    def _forget(self, run: SharedRun) -> None:
        if run.key is not None and self._by_key.get(run.key) is run:
            del self._by_key[run.key]


def kept_sentence(message: str) -> str:
    """A run's fault in its own one sentence, saying that the steps so far are kept (once)."""
    if "kept" in message:
        return message
    return f"{message.rstrip('.')}; the steps recorded before it are kept."


def _partial(generation: Generation) -> Trace | None:
    """The trace recorded so far; None when a broken generation cannot even give that."""
    try:
        return generation.trace()
    except Exception:  # a broken generation may not even give its partial trace
        return None
