"""One device call per run (docs/architecture.md §9, "ZeroGPU"): on a ZeroGPU Space every run of
the Run tab does all its device work (loading or moving the pair onto the GPU, capturing its
graphs, the steps with their readouts, the target-only baseline) inside one `spaces.GPU` call,
and nothing else touches the GPU.

`spaces.GPU` runs the decorated function in a forked worker process that holds a GPU for the
call: its arguments and everything it yields are pickled across, exceptions other than
`gr.Error` come back as a bare "ZeroGPU worker error", and closing the generator in the server
stops the worker. So the call is a generator of plain events (the run's start, then one per
step with the trace so far), a user's mistake travels as an event that becomes RunnerError
again here, and `DeviceCallGeneration` turns the events back into a `Generation` the run queue
steps as usual. The queue's wait happens before the call starts, so a waiting page holds no
GPU time; the GPU time asked for is `gpu_seconds` of the request (spaces' dynamic duration).
The queue's worker opens the call in the context of the request that made the run
(`SharedRun.requester`): spaces reads Gradio's request there to charge the visitor's quota.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Generator, Iterator

from engine.formats.trace import Trace
from engine.records import StepRecord
from specviz.serving.runner import Generation, ProgressFn, RunRequest, Runner, RunnerError
from specviz.serving.space import gpu_seconds

GpuDecorator = Callable[..., Callable]    # spaces.GPU: decorator(fn, duration=...) -> fn run in one GPU call
def no_gpu(fn: Callable, **options: Any) -> Callable:
    """spaces.GPU's stand-in off ZeroGPU: `fn` unchanged (spaces' own decorator is effect-free there too)."""
    return fn


# A trace crosses the call's edge with the first step, then at most this often (and always at the end): the
# first step is on the page at once, whatever the next one costs. Each crossing pickles the
# whole trace (73 kB after 34 steps of a 128-token tiny run; about 13 ms to pickle on a loaded 2-core
# CPU), which, sent every step, could cost more than the step itself on a GPU; a page redraws at most
# every 0.1 s anyway (docs/architecture.md §9).
TRACE_EVERY_S = 0.1
LOADING = "loading the models onto the GPU (inside this run's GPU time)"


@dataclass(frozen=True)
class Loading:
    """The load's progress inside the call, as the runner reports it."""

    message: str
    fraction: float = 0.0


@dataclass(frozen=True)
class Started:
    trace: Trace


@dataclass(frozen=True)
class Stepped:
    """One step: its record, and the trace so far on the first step and when TRACE_EVERY_S has passed since
    the last one sent (else None); `done` on the last, whose trace is always sent, with the target-only baseline when the
    request asked for it."""

    record: StepRecord
    trace: Trace | None
    done: bool


@dataclass(frozen=True)
class Refused:
    """The runner refused the request (RunnerError, ValueError): its one sentence."""

    message: str


@dataclass(frozen=True)
class Broke:
    """The start or a step failed unexpectedly: what failed, and the trace recorded before it (None at the start)."""

    message: str
    trace: Trace | None = None


Event = Loading | Started | Stepped | Refused | Broke


class DeviceCall:
    """The run queue's device work for one run as one decorated call (`gpu`, spaces.GPU) of `events`."""

    def __init__(self, runner: Runner, gpu: GpuDecorator):
        self.runner = runner
        self._call = gpu(self.events, duration=request_seconds)

    def start(self, request: RunRequest, progress: ProgressFn) -> "DeviceCallGeneration":
        """Open the call for `request` and wait until its run has started; RunnerError for a refused request."""
        return DeviceCallGeneration(self._call(request), progress)

    def events(self, request: RunRequest) -> Iterator[Event]:
        """The call's body, run where the GPU is: start the run, step it to its end (the baseline
        after the last step), yielding each step. Only `request` and the events cross the call's edge."""
        yield Loading(LOADING)
        started: dict[str, Any] = {}
        reports: queue.SimpleQueue[Loading | None] = queue.SimpleQueue()

        def start() -> None:                # on a thread of the call's own, so the load's progress crosses as it comes
            try:
                started["generation"] = self.runner.start(
                    request, progress=lambda fraction, message: reports.put(Loading(message, fraction)))
            except Exception as error:  # raised below, on the call's thread
                started["error"] = error
            finally:
                reports.put(None)

        threading.Thread(target=start, name="specviz-gpu-start", daemon=True).start()
        while (report := reports.get()) is not None:
            yield report
        error = started.get("error")
        if isinstance(error, (RunnerError, ValueError)):
            yield Refused(str(error))
            return
        if error is not None:               # spaces would pass on only its class: say what failed
            yield Broke(f"{type(error).__name__}: {error}")
            return
        generation = started["generation"]
        yield Started(generation.trace())
        sent: float | None = None           # no step has crossed yet: the first one does at once
        while not generation.is_done:
            try:
                record = generation.step()
                trace = None
                if generation.is_done or sent is None or time.monotonic() - sent >= TRACE_EVERY_S:
                    trace, sent = generation.trace(), time.monotonic()
                if generation.is_done and request.with_baseline:
                    trace = self.runner.with_baseline(request, trace)
            except Exception as error:  # becomes the run's failure in the server, with what was recorded
                yield Broke(f"{type(error).__name__}: {error}", _recorded(generation))
                return
            yield Stepped(record, trace, generation.is_done)


def request_seconds(request: RunRequest) -> int:
    """spaces.GPU's dynamic duration: called with the decorated function's arguments."""
    return gpu_seconds(request.config, request.with_baseline)


class DeviceCallGeneration:
    """The run inside an open device call, seen from the server: `step()` takes the call's next step;
    `trace()` is the newest trace the call has sent (the same object until it sends another)."""

    def __init__(self, events: Generator[Event, None, None], progress: ProgressFn):
        self._events = events
        self._trace: Trace | None = None
        self._done = False
        for event in events:
            if isinstance(event, Loading):
                progress(event.fraction, event.message)
                continue
            if isinstance(event, Started):
                self._trace = event.trace
                return
            self._failed(event)
        raise RuntimeError("the GPU call ended before its run started")

    @property
    def is_done(self) -> bool:
        return self._done

    def step(self) -> StepRecord:
        if self._done:
            raise RuntimeError("the run has ended")
        event = next(self._events)
        if not isinstance(event, Stepped):
            self._failed(event)
        self._trace = event.trace if event.trace is not None else self._trace
        self._done = event.done
        if self._done:
            for late in self._events:       # the call returns now, so its GPU is released with the run's end
                self._failed(late)
        return event.record

    def trace(self) -> Trace:
        assert self._trace is not None
        return self._trace

    def close(self) -> None:
        """End the call (a stopped run, a failure, or its end): the worker stops and the GPU is released."""
        self._events.close()

    def _failed(self, event: Any) -> None:
        self.close()
        if isinstance(event, Refused):
            raise RunnerError(event.message)
        if isinstance(event, Broke):
            self._trace = event.trace if event.trace is not None else self._trace
            raise RuntimeError(event.message)
        raise RuntimeError(f"the GPU call sent {type(event).__name__} out of turn")



def _recorded(generation: Generation) -> Trace | None:
    """The steps recorded before a failure, which may not have crossed yet (TRACE_EVERY_S)."""
    try:
        return generation.trace()
    except Exception:  # a broken generation may not even give its partial trace
        return None
