"""engine/runtime/compute_thread.py, and app.py's EngineRunner keeping every model computation on it:
the models' forward passes (seen through forward hooks on the real tiny-random pair) run on
one thread whichever server thread steps the generation."""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from app import EngineRunner
from engine.runtime.compute_thread import ComputeThread
from specviz.serving.runner import ModelChoice, RunRequest, SweepRequest
from engine.config import SpecConfig

REQUEST_ID = contextvars.ContextVar("request_id", default=None)


def test_calls_run_in_order_on_one_thread_and_return_or_raise_in_the_caller():
    compute = ComputeThread()
    seen = []
    with ThreadPoolExecutor(max_workers=4) as callers:
        results = list(callers.map(lambda n: compute.run(lambda: seen.append(threading.get_ident()) or n * n), range(20)))
    assert results == [n * n for n in range(20)]
    assert set(seen) == {compute.thread_id} and compute.thread_id != threading.get_ident()
    with pytest.raises(ZeroDivisionError):
        compute.run(lambda: 1 / 0)
    assert compute.run(lambda: threading.get_ident()) == compute.thread_id      # still alive after an error


def test_context_variables_travel_and_nested_calls_run_inline():
    compute = ComputeThread()
    token = REQUEST_ID.set("session-7")
    try:
        assert compute.run(REQUEST_ID.get) == "session-7"
    finally:
        REQUEST_ID.reset(token)
    assert compute.run(lambda: compute.run(lambda: threading.get_ident())) == compute.thread_id


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_its_own_thread():
    compute = ComputeThread()
    parent_thread = compute.run(threading.get_ident)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:        # child: the parent's thread does not exist here
        try:
            ok = compute.run(lambda: threading.get_ident() == compute.thread_id) and compute.thread_id is not None
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.waitpid(pid, 0)
    assert answer == b"1" and compute.run(threading.get_ident) == parent_thread


def _request(prompt: str = "def fib(n):") -> RunRequest:
    return RunRequest(models=ModelChoice(preset="tiny-random", draft="", target="", draft_dtype="float32",
                                         target_dtype="float32"),
                      prompt=prompt, config=SpecConfig(k=3, max_new_tokens=12))


def test_engine_runner_loads_steps_and_sweeps_on_the_compute_thread():
    runner = EngineRunner(device="cpu")
    forward_threads: set[int] = set()
    hooked = []

    def hook_models(pair) -> None:
        for model in (pair.draft, pair.target):
            hooked.append(model.register_forward_pre_hook(lambda *_: forward_threads.add(threading.get_ident())))

    generation = runner.start(_request(), progress=lambda fraction, message: None)
    hook_models(runner._pairs[_request().models.key])
    with ThreadPoolExecutor(max_workers=3) as server_threads:     # as Gradio's worker threads would
        while not generation.is_done:
            server_threads.submit(generation.step).result()
        trace = server_threads.submit(generation.trace).result()
        compared = server_threads.submit(runner.with_baseline, _request(), trace).result()
        sweep = SweepRequest(models=_request().models, prompts=("a", "b"), ks=(1, 2), temperatures=(0.0,), seeds=(0,),
                             config=SpecConfig(max_new_tokens=6))
        updates = server_threads.submit(lambda: list(runner.sweep(sweep, progress=lambda fraction, message: None))).result()
    assert trace.summary.new_tokens == 12 and compared.summary.baseline is not None and updates[-1].done == 4
    assert forward_threads == {runner.compute.thread_id}
