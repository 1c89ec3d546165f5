"""ZeroGPU (specviz/serving/device_call.py, docs/usage.md "ZeroGPU"): on a ZeroGPU Space nothing
touches a device at boot, and each Run does all its device work inside one spaces.GPU call that
opens when the run leaves the queue and asks for the seconds its k and token budget need.

The `spaces` package here is a stand-in written to a temporary folder put first on sys.path, with
SPACES_ZERO_GPU=1, so app.py takes it for ZeroGPU's. Like the real one it pickles the call's
arguments and every value the call yields (its worker is a forked process), and it records each
call: the duration asked for, its arguments, what it yielded, whether it is open, and the Gradio
request it was opened under (ZeroGPU charges that visitor's quota). The device work
is watched where it starts: `engine.load_pair`, `torch.nn.Module.to`, and every module's forward
(torch's global forward pre-hook); each records whether a call was open. The real tiny-random pair
does the work, so the run is also checked against target-only decoding.

What this does not see: the stand-in runs the call in this process (a forked one, as ZeroGPU's,
would hang here: this process's OpenMP threads have started, see engine/background_load.py), so
device work on another thread while a call is open would count as inside; and no CUDA is involved.
"""

from __future__ import annotations

import contextvars
import sys
import textwrap
import threading
import time

import pytest
import torch
from gradio.context import LocalContext

import app
import engine
from engine.config import SpecConfig
from specviz.run.handlers import Handlers
from specviz.serving import device_call
from specviz.serving.runner import ModelChoice, RunRequest
from specviz.serving.shared_run import DONE, FAILED
from specviz.serving.space import ZERO_GPU_ENV, gpu_seconds, on_zero_gpu

TINY = ModelChoice(preset="tiny-random")
ENDED_WITHIN_S = 300          # a generous bound for a few tiny runs on a loaded machine; states are awaited, not times

FAKE_SPACES = '''
"""A stand-in for Hugging Face's `spaces` on ZeroGPU (tests/test_zerogpu.py)."""
import inspect
import pickle
import threading

calls = []                        # one dict per GPU call, in order
_lock = threading.Lock()
_open = [0]


def open_calls():
    with _lock:
        return _open[0]


def GPU(task=None, *, duration=None, size=None):
    if task is None:
        return lambda fn: GPU(fn, duration=duration, size=size)
    if inspect.isgeneratorfunction(task):
        def generator_call(*args, **kwargs):
            call = _enter(task, duration, args, kwargs)
            args, kwargs = pickle.loads(pickle.dumps((args, kwargs)))
            try:
                for value in task(*args, **kwargs):
                    call["yielded"].append(value)
                    yield pickle.loads(pickle.dumps(value))
            finally:
                _leave(call)
        return generator_call

    def call_once(*args, **kwargs):
        call = _enter(task, duration, args, kwargs)
        try:
            return task(*args, **kwargs)
        finally:
            _leave(call)
    return call_once


def _enter(task, duration, args, kwargs):
    from gradio.context import LocalContext       # where ZeroGPU finds the visitor whose quota pays
    asked = duration(*args, **kwargs) if callable(duration) else duration
    call = {"task": task, "duration": asked, "args": args, "yielded": [], "open": True, "overlapped": False,
            "request": LocalContext.request.get(None)}
    with _lock:
        call["overlapped"] = _open[0] > 0
        _open[0] += 1
        calls.append(call)
    return call


def _leave(call):
    with _lock:
        _open[0] -= 1
        call["open"] = False
'''


@pytest.fixture
def spaces(tmp_path, monkeypatch):
    """The stand-in `spaces`, importable, with this process on a ZeroGPU Space."""
    folder = tmp_path / "site"
    (folder / "spaces").mkdir(parents=True)
    (folder / "spaces" / "__init__.py").write_text(textwrap.dedent(FAKE_SPACES))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv(ZERO_GPU_ENV, "true")
    monkeypatch.delitem(sys.modules, "spaces", raising=False)
    import spaces as fake
    yield fake
    sys.modules.pop("spaces", None)


class DeviceWork:
    """Every start of device work: (what, whether a GPU call was open)."""

    def __init__(self, spaces):
        self.spaces, self.seen, self._lock = spaces, [], threading.Lock()

    def record(self, what: str) -> None:
        with self._lock:
            self.seen.append((what, self.spaces.open_calls() > 0))

    @property
    def outside(self) -> list[str]:
        with self._lock:
            return [what for what, inside in self.seen if not inside]

    @property
    def inside(self) -> list[str]:
        with self._lock:
            return [what for what, inside in self.seen if inside]


@pytest.fixture
def device_work(spaces, monkeypatch):
    work = DeviceWork(spaces)
    real_load, real_to = engine.load_pair, torch.nn.Module.to

    def load_pair(*args, **kwargs):
        work.record("load_pair")
        return real_load(*args, **kwargs)

    def to(module, *args, **kwargs):
        work.record(f"{type(module).__name__}.to")
        return real_to(module, *args, **kwargs)

    monkeypatch.setattr(engine, "load_pair", load_pair)
    monkeypatch.setattr(torch.nn.Module, "to", to)
    hook = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, inputs: work.record(f"{type(module).__name__}.forward"))
    yield work
    hook.remove()


def booted(argv: list[str]) -> tuple:
    """app.py's boot as a ZeroGPU Space runs it; waits for a start-up load, if boot began one, to end."""
    args, demo, runner = app.boot(argv)
    deadline = time.monotonic() + ENDED_WITHIN_S
    while (status := runner.load_status()) is not None and status.loading and time.monotonic() < deadline:
        time.sleep(0.05)
    return args, demo, runner


def run_handlers(demo) -> Handlers:
    """The Run tab's handlers, from the event the page's Run button calls (api_name "run")."""
    run = next(fn for fn in demo.fns.values() if fn.api_name == "run")
    handlers = getattr(run.fn, "__self__", None)
    assert isinstance(handlers, Handlers), "the Run button's handler is wrapped: its GPU call would span the queue's wait"
    return handlers


def joined(queue, request: RunRequest, visitor: str):
    """queue.join as the Run handler calls it: in the context of a visitor's Gradio request."""
    def join():
        LocalContext.request.set(visitor)
        return queue.join(request, threading.Event())
    return contextvars.copy_context().run(join)


def wait_ended(seat):
    snapshot = seat.run.wait_until_ended(timeout=ENDED_WITHIN_S)
    assert snapshot.ended, snapshot.phase
    return snapshot


def test_zero_gpu_is_detected_as_spaces_detects_it(spaces):
    assert on_zero_gpu({ZERO_GPU_ENV: "true"}) and on_zero_gpu({ZERO_GPU_ENV: "1"})
    assert not on_zero_gpu({ZERO_GPU_ENV: "false"}) and not on_zero_gpu({})
    assert app.gpu_decorator() is spaces.GPU
    assert app.gpu_decorator({}) is None              # elsewhere nothing is wrapped


def test_gpu_seconds_follow_k_and_the_token_budget():
    # 30 s of setup, then 25 ms a forward: k + 1 forwards a token at worst, one more with the baseline
    assert gpu_seconds(SpecConfig(k=4, max_new_tokens=64), with_baseline=False) == 30 + 8
    assert gpu_seconds(SpecConfig(k=4, max_new_tokens=64), with_baseline=True) == 30 + 10       # 39.6 s, rounded up
    assert gpu_seconds(SpecConfig(k=8, max_new_tokens=128), with_baseline=True) == 30 + 32
    assert gpu_seconds(SpecConfig(k=1, max_new_tokens=8), with_baseline=False) == 31


def test_boot_on_zero_gpu_touches_no_device(spaces, device_work):
    _, demo, runner = booted(["--preset", "tiny-random"])       # start-up loading left on, as a Space boots
    assert device_work.seen == [], f"device work at boot: {device_work.seen[:5]}"
    assert runner.load_status() is None                         # no start-up load began
    assert spaces.calls == []
    run_handlers(demo)


def test_boot_on_zero_gpu_converts_the_default_weights_without_loading_them(spaces, device_work, monkeypatch):
    import engine.background_load
    from engine.presets import DEFAULT_PRESET, PRESETS
    asked = []
    monkeypatch.setattr(engine.background_load, "start_conversion", asked.append)
    _, _, runner = booted([])
    assert asked == [[PRESETS[DEFAULT_PRESET].target, PRESETS[DEFAULT_PRESET].draft]]
    assert device_work.seen == [] and runner.load_status() is None


def test_the_conversion_runs_in_a_process_of_its_own():
    """Spawned, so the server's process (which spaces forks for each GPU call) runs no torch computation."""
    from engine.background_load import start_conversion
    process = start_conversion(["tiny-random/target", "no/hub-id"])        # nothing to convert among these
    process.join(ENDED_WITHIN_S)
    assert type(process).__name__ == "SpawnProcess" and process.exitcode == 0


def test_a_run_does_all_its_device_work_in_one_gpu_call_that_streams_its_steps(spaces, device_work, monkeypatch):
    monkeypatch.setattr(device_call, "TRACE_EVERY_S", 0.0)        # every step's trace crosses, to see them all
    _, demo, runner = booted(["--preset", "tiny-random", "--no-hosted"])
    queue = run_handlers(demo).queue
    config = SpecConfig(k=3, max_new_tokens=24, seed=0)
    first = joined(queue, RunRequest(TINY, "def add(a, b):", config, with_baseline=True), "visitor 1")
    second = joined(queue, RunRequest(TINY, "class Stack:", config.replace(k=2)), "visitor 2")
    done = [wait_ended(first), wait_ended(second)]
    assert [snapshot.phase for snapshot in done] == [DONE, DONE], [snapshot.error for snapshot in done]

    assert device_work.outside == [], f"device work outside a GPU call: {device_work.outside[:5]}"
    assert {"load_pair", "LlamaForCausalLM.forward"} <= set(device_work.inside)
    assert len(spaces.calls) == 2 and not any(call["open"] for call in spaces.calls)
    assert not any(call["overlapped"] for call in spaces.calls)     # the second waited in the queue, not in a call
    assert [call["request"] for call in spaces.calls] == ["visitor 1", "visitor 2"]   # each visitor's quota pays
    assert [call["duration"] for call in spaces.calls] == [gpu_seconds(config, True),
                                                          gpu_seconds(config.replace(k=2), False)]
    trace = done[0].trace
    # every step came back as it was made, the last with the baseline computed inside the call
    stepped = [event for event in spaces.calls[0]["yielded"] if type(event).__name__ == "Stepped"]
    assert [len(event.trace.steps) for event in stepped] == list(range(1, len(trace.steps) + 1))
    assert stepped[-1].done and stepped[-1].trace.baseline is not None
    assert trace.baseline is not None and trace.baseline.identical       # greedy: target-only output
    loading = [event.message for event in spaces.calls[0]["yielded"] if type(event).__name__ == "Loading"]
    assert loading[0] == device_call.LOADING and any("starting the engine" in message for message in loading[1:])


def test_traces_cross_the_call_less_often_than_steps_and_the_last_is_whole(spaces, device_work, monkeypatch):
    monkeypatch.setattr(device_call, "TRACE_EVERY_S", 3600.0)     # no trace but the first step's and the last one
    _, demo, _ = booted(["--no-preload", "--no-hosted"])
    queue = run_handlers(demo).queue
    snapshot = wait_ended(joined(queue, RunRequest(TINY, "import os", SpecConfig(k=2, max_new_tokens=16)), "visitor"))
    stepped = [event for event in spaces.calls[0]["yielded"] if type(event).__name__ == "Stepped"]
    assert snapshot.phase == DONE and len(stepped) == len(snapshot.trace.steps) > 1
    assert [event.trace is not None for event in stepped] == [True] + [False] * (len(stepped) - 2) + [True]
    assert [step.index for step in snapshot.trace.steps] == [event.record.index for event in stepped]


def test_a_refused_request_keeps_its_sentence_across_the_call(spaces, device_work):
    _, demo, _ = booted(["--no-preload", "--no-hosted"])
    queue = run_handlers(demo).queue
    bad = ModelChoice(target="no/such-model-here")         # offline in tests: the Hub cannot be asked
    snapshot = wait_ended(queue.join(RunRequest(bad, "x", SpecConfig(max_new_tokens=4)), threading.Event()))
    assert snapshot.phase == FAILED and snapshot.error.startswith("Could not start: ")
    assert "no/such-model-here" in snapshot.error and "ZeroGPU" not in snapshot.error
    assert len(spaces.calls) == 1 and not spaces.calls[0]["open"]
    assert device_work.outside == []


def test_a_failed_step_keeps_its_sentence_and_what_was_recorded(spaces, device_work, monkeypatch):
    from engine.decode.generation import Generation
    real_step = Generation.step

    def failing_step(generation):        # the third step fails
        if len(generation.trace().steps) == 2:
            raise KeyError("planted")
        return real_step(generation)

    monkeypatch.setattr(Generation, "step", failing_step)
    _, demo, _ = booted(["--no-preload", "--no-hosted"])
    queue = run_handlers(demo).queue
    snapshot = wait_ended(joined(queue, RunRequest(TINY, "def g(y):", SpecConfig(k=2, max_new_tokens=32)), "visitor"))
    assert snapshot.phase == FAILED and "KeyError: 'planted'" in snapshot.error
    assert len(snapshot.trace.steps) == 2 and not spaces.calls[0]["open"]
    assert device_work.outside == []


def test_a_stopped_run_ends_its_gpu_call(spaces, device_work, monkeypatch):
    from engine.decode.generation import Generation
    real_step, release = Generation.step, threading.Event()

    def gated_step(generation):          # the second step waits until the page has pressed Stop (the first
                                         # step's trace crosses the call at once, so the page sees it first)
        if generation.trace().steps:
            release.wait(ENDED_WITHIN_S)
        return real_step(generation)

    monkeypatch.setattr(Generation, "step", gated_step)
    _, demo, _ = booted(["--no-preload", "--no-hosted"])
    queue = run_handlers(demo).queue
    stop = threading.Event()
    seat = queue.join(RunRequest(TINY, "def f(x):", SpecConfig(k=2, max_new_tokens=64)), stop)
    while not (snapshot := seat.run.snapshot()).ended and (snapshot.trace is None or not snapshot.trace.steps):
        seat.run.wait(snapshot.version, timeout=1.0)
    stop.set()
    queue.leave(seat)
    release.set()
    snapshot = wait_ended(seat)
    assert snapshot.phase == "stopped" and len(snapshot.trace.steps) < 64
    deadline = time.monotonic() + ENDED_WITHIN_S
    while spaces.calls[0]["open"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not spaces.calls[0]["open"]
    assert device_work.outside == []
