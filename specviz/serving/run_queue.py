"""The Run tab's queue (docs/architecture.md §9): one in-process run at a time, in order of arrival, up
to `server_runs` at once on each vLLM server (it batches them itself), and one run for every identical request.

A request *joins* the queue and gets a `Seat` on a `SharedRun`. A request identical to a run that
is waiting, running or recorded on this server (the same models, prompt, settings, seed and
baseline choice: `run_key`) sits on that run instead of queueing its own: it sees the same steps
as they arrive, or the recorded trace at once. Runs are deterministic for those values, except with
adaptive k (its k follows measured times), which is never shared. Finished runs stay in memory,
the oldest dropped first beyond `kept`; a failed or stopped one is dropped at once, so the next
identical request runs again. Nothing is shared across servers.

Runs wait in one line of arrival and are admitted by *lane* (`lane`): the in-process engine is one
lane of one slot, each vLLM server address a lane of `server_runs` slots, since the server batches
concurrent requests itself (continuous batching). A run is admitted as soon as its lane has a free
slot (when it joins, or when a run of its lane ends: then the first waiting run of the lane) and is
stepped on a thread of its own, so the order within a lane is the queue's whatever Gradio's worker
threads do, a run with a free slot is never shown a place in line, and a server run never waits
behind an in-process one.
Each waiting request is told its place and the estimated wait (`wait`), from the runs ahead of it in
its lane and this server's measured speed (specviz/serving/wait_estimate.py). A stopped server run
closes its stream, which aborts the request on the vLLM server. On a ZeroGPU Space (`gpu`:
spaces.GPU) a run's device work is one GPU call that starts when the run leaves the queue
(specviz/serving/device_call.py). Every finished server run is kept in `class_log`: Explore's load view draws
the latest class of them as a point of a load sweep (engine/load/class_point.py).
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from typing import Callable, Hashable

from engine.formats.trace import Trace
from engine.load.class_point import ClassLog, served_run
from engine.vllm.source import VllmGeneration
from engine.vllm.transport import VllmError, parse_address
from specviz.serving.device_call import DeviceCall, DeviceCallGeneration, GpuDecorator
from specviz.serving.runner import Generation, RunRequest, Runner, RunnerError
from specviz.serving.shared_run import DONE, FAILED, STOPPED, SharedRun
from specviz.serving.wait_estimate import SpeedLog, run_seconds

LOG = logging.getLogger(__name__)
CAPACITY = 32              # distinct runs waiting at once; one more is told the server is busy
VIEWERS = 64               # pages watching runs at once (each holds a server thread); more wait in Gradio's queue
KEPT = 32                  # finished runs kept for identical requests (a trace of 256 tokens: about 1 MB)
SERVER_RUNS = 16           # runs streaming at once from one vLLM server (it batches them); more wait their turn
IN_PROCESS = ""            # the lane of runs on this process's own engine: one at a time


class QueueFull(Exception):
    """The queue holds `capacity` distinct runs already: one sentence for the user."""


def run_key(request: RunRequest) -> Hashable | None:
    """What makes two requests the same run; None for a run that is never shared (adaptive k)."""
    if request.config.adaptive_k:
        return None
    return request.models.key, request.prompt, request.config, request.with_baseline


def lane(request: RunRequest) -> str:
    """Which runs share slots: IN_PROCESS for this process's engine, else the vLLM server's address
    (written as the server's base URL, so two spellings of one address are one lane)."""
    server = request.models.server
    if not server:
        return IN_PROCESS
    try:
        return parse_address(server).base_url
    except VllmError:       # refused when the run starts, in its own sentence; a lane of its own meanwhile
        return server


def speed_kind(request: RunRequest) -> Hashable:
    """Runs timed together for the wait estimate: the same pair, with or without a baseline after."""
    return request.models.key, request.with_baseline


@dataclass(frozen=True)
class Place:
    """Where a waiting run stands: `ahead` runs of its lane come before it, the running ones included,
    so its `place` in the line is ahead + 1 (place 2: next after the run in progress); `wait_s` is the
    estimated wait (None until this server has timed a run or a running one has made steps)."""

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
    """The server's runs of the Run tab: a FIFO of distinct runs admitted by lane (one in-process run
    at a time, `server_runs` per vLLM server), the runs in progress and recently finished by key, and
    the measured speed for wait estimates."""

    def __init__(self, runner: Runner, capacity: int = CAPACITY, kept: int = KEPT,
                 clock: Callable[[], float] = time.monotonic, publish_interval: float = 0.0,
                 gpu: GpuDecorator | None = None, server_runs: int = SERVER_RUNS, class_log: ClassLog | None = None):
        if server_runs < 1:
            raise ValueError(f"server_runs must be at least 1, not {server_runs}")
        self.runner = runner
        self._device = DeviceCall(runner, gpu) if gpu is not None else None   # ZeroGPU: one GPU call per run
        self.capacity = capacity
        self.server_runs = server_runs
        self.kept = kept
        self.clock = clock
        self.publish_interval = publish_interval    # seconds between the traces a running run publishes
        self.speed = SpeedLog()
        self.class_log = class_log if class_log is not None else ClassLog()   # the vLLM runs: a class's load
        self._lock = threading.Condition()
        self._waiting: deque[SharedRun] = deque()
        self._running: list[SharedRun] = []        # in order of admission
        self._by_key: dict[Hashable, SharedRun] = {}
        self._finished: OrderedDict[Hashable, SharedRun] = OrderedDict()

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
            self._admit()
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
        """The run's place in its lane and the estimated wait; None once it has left the queue."""
        with self._lock:
            if run not in self._waiting:
                return None
            mine = lane(run.request)
            index = self._waiting.index(run)
            running = [r for r in self._running if lane(r.request) == mine]
            waiting = [r for r in list(self._waiting)[:index] if lane(r.request) == mine]
            return Place(len(running) + len(waiting) + 1, len(running) + len(waiting),
                         self._wait_s(running, waiting, self._slots(mine)))

    def _slots(self, name: str) -> int:
        return 1 if name == IN_PROCESS else self.server_runs

    def _wait_s(self, running: list[SharedRun], waiting: list[SharedRun], slots: int) -> float | None:
        """When a slot frees for the run behind `waiting`: each of the lane's `slots` frees when its
        running run ends (what is left of it), then takes the next waiting run whole; one slot is the
        sum of the runs ahead."""
        now = self.clock()
        free: list[float] = [0.0] * max(0, slots - len(running))
        for run in running:
            expected = run_seconds(self._per_token(run), run.request.config.max_new_tokens)
            if expected is None:
                return None
            elapsed = now - run.running_since if run.running_since is not None else 0.0
            free.append(max(0.0, expected - elapsed))
        heapq.heapify(free)
        for run in waiting:
            expected = run_seconds(self._per_token(run), run.request.config.max_new_tokens)
            if expected is None:
                return None
            heapq.heappush(free, heapq.heappop(free) + expected)
        return free[0] if free else 0.0

    def _per_token(self, run: SharedRun) -> float | None:
        """This server's measured seconds per requested token for the run's kind; before any run has
        finished, the pace so far of the first running run of its lane."""
        measured = self.speed.per_token(speed_kind(run.request))
        if measured is not None:
            return measured
        mine = lane(run.request)
        running = next((r for r in self._running if lane(r.request) == mine and r.running_since is not None), None)
        if running is None:
            return None
        trace = running.snapshot().trace
        tokens = trace.summary.new_tokens if trace is not None else 0
        return (self.clock() - running.running_since) / tokens if tokens else None

    # --- admission and the runs' threads ---------------------------------------------------------------------------------
    def _admissible(self) -> SharedRun | None:
        """The first waiting run whose lane has a free slot (the lock held)."""
        busy: dict[str, int] = {}
        for run in self._running:
            busy[lane(run.request)] = busy.get(lane(run.request), 0) + 1
        return next((run for run in self._waiting
                     if busy.get(lane(run.request), 0) < self._slots(lane(run.request))), None)

    def _admit(self) -> None:
        """Start every waiting run whose lane has a free slot, each on a thread of its own (the lock held)."""
        while (run := self._admissible()) is not None:
            self._waiting.remove(run)
            if not run.wanted:               # every viewer pressed Stop while it waited: it never starts
                self._forget(run)
                run.end(STOPPED, self.clock())
                continue
            self._running.append(run)
            threading.Thread(target=self._run, args=(run,), name="specviz-run", daemon=True).start()

    def _run(self, run: SharedRun) -> None:
        try:
            self._execute(run)
        except Exception as error:  # never let a failure escape: the run fails, the queue goes on
            LOG.exception("the run queue's worker failed")
            run.end(FAILED, self.clock(), error=f"{type(error).__name__}: {error}")
        with self._lock:
            self._running.remove(run)
            if run.snapshot().phase == DONE and run.key is not None:
                self._keep(run)
            else:
                self._forget(run)
            self._admit()                       # a slot is free

    def _execute(self, run: SharedRun) -> None:
        request = run.request
        run.starting()
        try:
            on_device = self._device is not None and lane(request) == IN_PROCESS   # a server run does no GPU work here
            generation = (run.requester.run(self._device.start, request, run.report) if on_device
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
            if isinstance(generation, (DeviceCallGeneration, VllmGeneration)):
                generation.close()          # a stopped or failed run ends its GPU call, or its request on the vLLM server

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
        if isinstance(generation, VllmGeneration) and (served := served_run(generation)) is not None:
            self.class_log.record(served)
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
