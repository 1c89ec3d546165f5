"""A static cache's runners at Run time (engine/runtime/static_runner.py, docs/architecture.md §7):
a capture that fails falls back to eager forwards on the same cache and says why, and a pool keeps
each run on the smallest cache that holds it, shrinking to MAX_IDLE_RUNNERS free runners.

A CPU has no CUDA graphs: the capture under test is the eager stand-in (`EagerReplay`, the same
dispatch), and the failure is planted in it as CUDA raises one (a RuntimeError from the capture).
"""

from __future__ import annotations

import gc

import pytest
import torch

import engine.runtime.static_runner
from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.speed_up import GRAPH_ROWS
from engine.loading.tiny import build_tiny_pair
from engine.runtime.cuda.graphs import EagerReplay, capture
from engine.runtime.static_runner import MAX_IDLE_RUNNERS, PoolSettings, RunnerPool, StaticRunner
from oracles import assert_static_matches_dynamic_target_only, replaying_graphs

CAPTURE_ERROR = "CUDA error: operation not permitted when stream is capturing"


class Run:
    """A borrower: the lease ends when it is garbage-collected (or ended)."""


def failing_capture(*args, **kwargs):
    raise RuntimeError(CAPTURE_ERROR + "\nCUDA kernel errors might be asynchronously reported")


def test_a_capture_that_fails_at_run_time_runs_eagerly_and_says_why(monkeypatch):
    """The runner captured at load serves 256 rows; a longer run needs a new one, whose capture
    fails: the run still emits what target-only decoding emits, eagerly (no replay), and the runner
    and its pool carry one sentence naming the failure."""
    pair = replaying_graphs(build_tiny_pair(seed=0, max_context=2048))
    pool = pair.runner_pool("target")
    replays: list[int] = []
    replay = EagerReplay.replay
    monkeypatch.setattr(EagerReplay, "replay", lambda self: replays.append(self.rows) or replay(self))
    monkeypatch.setattr(engine.runtime.static_runner, "capture", failing_capture)
    spec_engine = SpeculativeEngine(pair)
    generation = spec_engine.start("a long run", SpecConfig(k=4, max_new_tokens=300, cache="static"))
    runner = generation.target.lease.runner
    assert runner.kv.capacity == 512 and runner.graphs == {}
    assert runner.eager_reason == pool.eager_reason == (
        f"the graph capture for a 512-row cache failed ({CAPTURE_ERROR}): its forwards run eagerly")
    del generation, runner
    gc.collect()                                  # its runners go back to the pool
    assert pool.num_free == 2
    replays.clear()
    trace = assert_static_matches_dynamic_target_only(spec_engine, "a long run",
                                                      SpecConfig(k=4, max_new_tokens=300, cache="static"))
    assert trace.steps[-1].kv_target.capacity == 512
    assert replays == []                          # the draft's long-run runner failed its capture too
    monkeypatch.setattr(engine.runtime.static_runner, "capture", capture)
    short = spec_engine.generate("short", SpecConfig(k=4, max_new_tokens=12, cache="static"))
    assert short.steps[-1].kv_target.capacity == 256 and 5 in replays     # the load's runner still replays


def test_a_failed_capture_leaves_an_empty_cache(monkeypatch):
    monkeypatch.setattr(engine.runtime.static_runner, "capture", failing_capture)
    runner = StaticRunner(build_tiny_pair(seed=0).target, capacity=256, graph_rows=(1, 3), backend="eager-replay")
    assert runner.graphs == {} and runner.kv.length == 0 and runner.eager_reason is not None
    with torch.inference_mode():
        runner.forward(torch.tensor([[5, 6, 7]]), num_logits=1)
    assert runner.kv.length == 3


def test_an_error_that_is_not_a_capture_failure_is_not_hidden(monkeypatch):
    """Only CUDA's errors (RuntimeError) fall back: a bug in the engine still fails loudly."""
    def broken(*args, **kwargs):
        raise TypeError("a bug")
    monkeypatch.setattr(engine.runtime.static_runner, "capture", broken)
    with pytest.raises(TypeError, match="a bug"):
        StaticRunner(build_tiny_pair(seed=0).target, capacity=256, graph_rows=(1,), backend="eager-replay")


def test_each_run_borrows_the_smallest_runner_that_holds_it():
    pool = RunnerPool(build_tiny_pair(seed=0, max_context=4096).target, PoolSettings())
    for rows in (100, 300, 600):
        pool.prepare(rows)
    assert sorted(runner.kv.capacity for runner in pool.free_runners) == [256, 512, 1024]
    borrowers = [Run() for _ in range(3)]
    leases = [pool.lend(borrower, rows) for borrower, rows in zip(borrowers, (20, 400, 20))]
    assert [lease.runner.kv.capacity for lease in leases] == [256, 512, 1024]   # the third takes what is free
    for lease in leases:
        lease.end()
    assert pool.lend(Run(), 20).runner.kv.capacity == 256


def test_a_pool_keeps_at_most_its_idle_runners_dropping_the_largest():
    """Several runs at once each build a runner; when they end, the pool shrinks to MAX_IDLE_RUNNERS,
    the largest caches going first."""
    pool = RunnerPool(build_tiny_pair(seed=0, max_context=8192).target, PoolSettings())
    sizes = (20, 300, 20, 700, 20)
    borrowers = [Run() for _ in sizes]
    leases = [pool.lend(borrower, rows) for borrower, rows in zip(borrowers, sizes)]
    assert pool.num_runners == len(sizes) and pool.num_free == 0
    for lease in leases:
        lease.end()
    assert pool.num_free == pool.num_runners == MAX_IDLE_RUNNERS
    assert sorted(runner.kv.capacity for runner in pool.free_runners) == [256, 256, 256]


def test_graph_rows_of_a_pool_are_captured_for_every_new_runner():
    pair = build_tiny_pair(seed=0, max_context=2048)
    pool = RunnerPool(pair.target, PoolSettings(GRAPH_ROWS["target"], "eager-replay"))
    run = Run()
    lease = pool.lend(run, 600)
    assert lease.runner.kv.capacity == 1024 and sorted(lease.runner.graphs) == list(GRAPH_ROWS["target"])
    assert lease.runner.eager_reason is None and pool.eager_reason is None
