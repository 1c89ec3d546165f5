"""The static cache (docs/architecture.md §7), the GPU's KV cache kind, proven on the CPU.

Against oracles that share none of its machinery: target-only decoding on a dynamic cache
(greedy output), a fresh prefill of the committed text after every step and every rollback
(each cache's rows, and the device write pointers against the host's length), the same run
on a dynamic cache (every recorded length). The graph dispatch runs with the eager stand-in
of a CUDA graph (runtime/cuda/graphs.py `EagerReplay`): the same buffers, the same choice of
graph by row count, the same copies; tests/test_fault_injection.py plants the static cache's
bugs (a pointer off by one, a stale row visible, a graph of the wrong k) and sees these catch them.
"""

from __future__ import annotations

import gc

import pytest
import torch

import engine.decode.generation
import engine.decode.verify
from engine.config import SpecConfig
from engine.decode.readout import HostReads
from engine.decode.verify import Decision
from engine.lab import stage as lab_stage
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from engine.runtime.cuda.graphs import EagerReplay
from engine.loading.speed_up import GRAPH_ROWS
from engine.runtime.static_runner import PoolSettings, StaticRunner
from oracles import (GREEDY_PROMPTS, assert_caches_match_prefill_every_step,
                     assert_static_matches_dynamic_target_only, replaying_graphs)

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


ROLLBACK_PROMPT = "Speculative decoding is"        # on the seed-0 pair: rejections at every k and temperature


@pytest.fixture(scope="module")
def noisy_engine() -> SpeculativeEngine:
    return SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0)))


@pytest.fixture(scope="module")
def copy_engine() -> SpeculativeEngine:
    return SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=1, draft_noise=0.0)))


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("k", [1, 2, 4, 6, 9])
def test_static_greedy_matches_target_only_on_a_dynamic_cache(noisy_engine, k, drafter):
    """k = 9 verifies 10 rows: past the captured graphs (up to 8 + 1), so that step runs eagerly."""
    rates = []
    for prompt in GREEDY_PROMPTS:
        trace = assert_static_matches_dynamic_target_only(noisy_engine, prompt,
                                                          SpecConfig(k=k, drafter=drafter, max_new_tokens=24))
        rates.append(trace.summary.acceptance_rate)
    if drafter == "model":
        assert 0.0 < sum(rates) / len(rates) < 1.0          # drafts really are both accepted and rejected


def test_static_full_acceptance_bonus_and_carryover(copy_engine):
    for prompt in GREEDY_PROMPTS:
        trace = assert_static_matches_dynamic_target_only(copy_engine, prompt, SpecConfig(k=4, max_new_tokens=24))
        assert all(s.num_accepted == s.k for s in trace.steps if s.k > 0)
        assert all(len(s.carryover) == 2 for s in trace.steps[1:] if trace.steps[s.index - 1].k > 0)


@pytest.mark.parametrize("changes", [{"tree_nodes": 16, "tree_branch": 3, "k": 5},
                                     {"tree_nodes": 6, "tree_branch": 2, "k": 4},
                                     {"adaptive_k": True, "confidence_threshold": 0.3, "k": 3}],
                         ids=["tree-16x3", "tree-6x2", "adaptive-confidence"])
def test_static_trees_and_adaptive_match(noisy_engine, changes):
    for prompt in GREEDY_PROMPTS[:6]:
        assert_static_matches_dynamic_target_only(noisy_engine, prompt, SpecConfig(max_new_tokens=24, **changes))


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("k", [1, 3, 6])
def test_static_caches_equal_a_fresh_prefill_after_every_rollback(k, temperature):
    """After every step both caches hold exactly the committed text's keys and values in their
    valid rows, and every layer's device pointer sits where the host says; the cut rows stay in
    memory past the pointer (masked), counted in the record."""
    engine = SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0)))
    config = SpecConfig(k=k, temperature=temperature, max_new_tokens=30, seed=2, cache="static")
    trace = assert_caches_match_prefill_every_step(engine, ROLLBACK_PROMPT, config)
    dynamic = engine.generate(ROLLBACK_PROMPT, config.replace(cache="dynamic"))
    assert trace.output.token_ids == dynamic.output.token_ids           # one seed, one run, either cache
    for static_step, dynamic_step in zip(trace.steps, dynamic.steps, strict=True):
        for static_kv, dynamic_kv in ((static_step.kv_target, dynamic_step.kv_target),
                                      (static_step.kv_draft, dynamic_step.kv_draft)):
            assert (static_kv.before, static_kv.after_forward, static_kv.cutoff, static_kv.after_cutoff,
                    static_kv.stale) == (dynamic_kv.before, dynamic_kv.after_forward, dynamic_kv.cutoff,
                                         dynamic_kv.after_cutoff, dynamic_kv.stale)
            assert dynamic_kv.masked is None and dynamic_kv.capacity is None
            assert static_kv.masked >= static_kv.cutoff                    # this step's cut rows are still there
            assert static_kv.after_cutoff + static_kv.masked <= static_kv.capacity
    assert any(step.kv_target.cutoff > 0 for step in trace.steps)          # rollbacks happened


def test_graphs_replay_for_the_captured_row_counts():
    """The target's one-token and k + 1-row forwards and the draft's one- and two-token forwards
    replay their graphs; the prompt's prefill, which no graph has, runs eagerly."""
    pair = replaying_graphs(build_tiny_pair(seed=0))
    replays: dict[int, int] = {}
    replay = EagerReplay.replay

    def counted(self: EagerReplay) -> torch.Tensor:
        replays[self.rows] = replays.get(self.rows, 0) + 1
        return replay(self)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(EagerReplay, "replay", counted)
        trace = SpeculativeEngine(pair).generate("def reverse(xs):", SpecConfig(k=4, max_new_tokens=24, cache="static"))
    verifies = sum(1 for step in trace.steps[1:] if step.k == 4)
    assert replays.get(5, 0) >= verifies > 0                               # every later k = 4 verify replayed
    assert replays.get(1, 0) > 0 and replays.get(2, 0) > 0                  # draft tokens and a carryover pair
    assert len(trace.prompt.token_ids) + 4 not in replays                  # the first verify (prefill) is eager


@pytest.mark.parametrize("changes", [{"temperature": 0.0}, {"temperature": 0.8}, {"drafter": "ngram"}],
                         ids=["greedy", "sampled", "ngram"])
def test_a_step_reads_the_device_once(changes):
    """Every value a chain step needs on the host comes back in one copy (readout.py): no other
    Python-level read of a tensor (tolist, item, int(), bool(), .cpu(), an index by a 0-dim tensor)
    happens during a step, recorder on or off. HostReads sees calls made from Python only: reads
    inside operators (nonzero, torch.equal) are counted by the
    profiler in scripts/gpu_check.py (tests/test_gpu_check.py)."""
    pair = replaying_graphs(build_tiny_pair(seed=0))
    for detailed in (True, False):
        generation = SpeculativeEngine(pair, detailed_trace=detailed).start(
            "def reverse(xs): return xs[::-1]", SpecConfig(k=4, max_new_tokens=20, cache="static", **changes))
        while not generation.is_done:
            with HostReads() as counter:
                generation.step()
            assert counter.reads == ["tolist"], (detailed, counter.reads)


def test_the_read_counter_sees_an_index_by_a_device_scalar(monkeypatch):
    """The counter's own check: the greedy rule picking its next token by indexing with the number
    accepted (a 0-dim tensor: a sync on a GPU) is one read too many."""
    def planted(drafts, target_logits):
        choice = torch.argmax(target_logits, dim=-1)
        accepted = engine.decode.verify.accepted_prefix(drafts == choice[:drafts.shape[0]])
        return Decision(drafts.shape[0], accepted, choice[accepted].view(1), choice, None, None, None)
    monkeypatch.setattr(engine.decode.generation, "decide_greedy", planted)
    generation = SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0))).start(
        "planted", SpecConfig(k=4, max_new_tokens=8, cache="static"))
    with HostReads() as counter:
        generation.step()
    assert counter.reads == ["__getitem__", "tolist"]


def test_interleaved_runs_each_borrow_their_own_runner():
    """Two runs stepped alternately (two sessions on one compute thread) each get a runner; each
    emits what it emits alone; both runners go back to the pool, and a third run reuses one."""
    pair = replaying_graphs(build_tiny_pair(seed=0))
    engine = SpeculativeEngine(pair)
    config = SpecConfig(k=3, max_new_tokens=20, cache="static")
    alone = [engine.generate(prompt, config).output.token_ids for prompt in GREEDY_PROMPTS[:2]]
    first, second = (engine.start(prompt, config) for prompt in GREEDY_PROMPTS[:2])
    while not (first.is_done and second.is_done):
        for generation in (first, second):
            if not generation.is_done:
                generation.step()
    assert [first.trace().output.token_ids, second.trace().output.token_ids] == alone
    pool = pair.runner_pool("target")
    assert pool.num_runners == 2 and pool.num_free == 2
    engine.generate(GREEDY_PROMPTS[2], config)
    assert pool.num_runners == 2


def test_an_abandoned_run_gives_its_runner_back():
    pair = replaying_graphs(build_tiny_pair(seed=0))
    generation = SpeculativeEngine(pair).start("abandoned", SpecConfig(k=3, max_new_tokens=20, cache="static"))
    generation.step()
    pool = pair.runner_pool("target")
    assert pool.num_free == 0
    del generation
    gc.collect()
    assert pool.num_free == 1


def test_a_finished_run_cannot_use_the_runner_it_gave_back():
    generation = SpeculativeEngine(build_tiny_pair(seed=0)).start("done", SpecConfig(k=3, max_new_tokens=4,
                                                                                       cache="static"))
    while not generation.is_done:
        generation.step()
    with pytest.raises(RuntimeError, match="went back to the pool"):
        with torch.inference_mode():
            generation.target.forward([5], num_logits=1)


def test_a_run_longer_than_every_runner_gets_a_larger_one_and_short_runs_keep_the_small_one():
    """A long run gets a new 512-row runner; the 256-row one stays, and the short run after it runs
    there (not on the long run's cache, whose extra rows every forward would read)."""
    pair = build_tiny_pair(seed=0, max_context=2048)
    pair.pool_settings = {role: PoolSettings(rows, "eager-replay") for role, rows in GRAPH_ROWS.items()}
    pool = pair.runner_pool("target")
    pool.prepare(rows=40)
    assert [runner.kv.capacity for runner in pool.free_runners] == [256]
    engine = SpeculativeEngine(pair)
    config = SpecConfig(k=4, max_new_tokens=300, cache="static")
    trace = assert_static_matches_dynamic_target_only(engine, "a long run", config)
    assert trace.steps[-1].kv_target.capacity == 512 and pool.num_runners == 2
    short = assert_static_matches_dynamic_target_only(engine, "a short run", config.replace(max_new_tokens=20))
    assert {step.kv_target.capacity for step in short.steps} == {256}
    assert sorted(runner.kv.capacity for runner in pool.free_runners) == [256, 512]


def test_capture_leaves_an_empty_cache():
    """The warm-ups before a capture write rows; the runner starts its first run empty."""
    model = build_tiny_pair(seed=0).target
    runner = StaticRunner(model, capacity=256, graph_rows=(1, 3), backend="eager-replay")
    assert runner.kv.length == 0 and {int(layer.cumulative_length) for layer in runner.kv.layers} == {0}


@pytest.mark.parametrize("stage", ["A", "B", "C", "D"])
def test_lab_stages_record_the_same_on_either_cache(stage):
    """The lab's stages switch pieces off (rejected rows kept, zero-filled): a static cache keeps
    them past nothing (its pointer stays), so every length and every output matches."""
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    config = lab_stage(stage).apply(SpecConfig(k=3, max_new_tokens=16))
    static, dynamic = (engine.generate("The lab stage", config.replace(cache=cache)) for cache in ("static", "dynamic"))
    assert static.output.token_ids == dynamic.output.token_ids
    assert [(s.kv_target.after_cutoff, s.kv_target.stale) for s in static.steps] == \
           [(s.kv_target.after_cutoff, s.kv_target.stale) for s in dynamic.steps]


def test_the_pool_settings_capture_at_load():
    pair = build_tiny_pair(seed=0)
    pair.pool_settings = {"target": PoolSettings((1, 2, 3), "eager-replay")}
    runner = pair.runner_pool("target").prepare(rows=64)
    assert sorted(runner.graphs) == [1, 2, 3]
