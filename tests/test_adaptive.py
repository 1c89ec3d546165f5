"""The adaptive draft length controller (engine/decode/adaptive.py) on scripted costs and verdicts, then
in the engine on the tiny-random pair: costs kept per drafter, the prefill step never timed."""

from __future__ import annotations

import pytest

from engine.decode.adaptive import AdaptiveDraftLength, StepCosts
from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.decode.generation import Generation
from engine.metrics import expected_tokens_per_step
from engine.loading.models import load_pair


def feed(controller: AdaptiveDraftLength, steps: int, draft_ms: float, verify) -> list[int]:
    """Run `steps` scripted steps that accept every draft; verify(rows) gives the verify time."""
    chosen = []
    for _ in range(steps):
        k = controller.k
        chosen.append(controller.observe(k, k, draft_ms * k, verify(k + 1), k + 1))
    return chosen


def test_first_step_keeps_the_configured_k_until_costs_are_known():
    assert AdaptiveDraftLength(k=5, max_k=10).k == 5


def test_cheap_drafts_and_full_acceptance_grow_k_to_the_cap():
    controller = AdaptiveDraftLength(k=2, max_k=10)
    chosen = feed(controller, 12, draft_ms=10, verify=lambda rows: 250)
    assert chosen[-1] == 10
    assert chosen == sorted(chosen)                     # it walks up as it learns that longer drafts cost nothing extra


def test_expensive_drafts_and_poor_acceptance_settle_on_one_token():
    controller = AdaptiveDraftLength(k=5, max_k=10)
    for _ in range(8):                                  # every draft rejected at once
        controller.observe(controller.k, 0, 250.0 * controller.k, 250.0, controller.k + 1)
    assert controller.k == 1
    assert controller.acceptance < 0.1


def test_stepped_verify_costs_keep_k_inside_the_cheap_block():
    # Verify costs one unit per three rows (stock fp32 GEMM on the reference CPU): with a
    # draft at 0.4 of a target step and a = 0.8, k = 2 (3 rows) beats k = 3..5 (4..6 rows).
    costs = {rows: 250.0 * ((rows + 2) // 3) for rows in range(2, 12)}
    controller = AdaptiveDraftLength(k=2, max_k=10, costs=StepCosts(100.0, dict(costs)))
    controller.accepted, controller.reached = 8.0, 10.0

    def rate(k: int) -> float:
        return expected_tokens_per_step(0.8, k) / (100.0 * k + costs[k + 1])
    assert controller.best_k() == max(range(1, 11), key=rate) == 2


def test_a_long_start_on_stepped_costs_explores_down_to_the_cheap_block():
    """Starting at k=5 (6 rows, two units), the smaller sizes are estimated optimistically,
    tried, measured, and the controller ends inside the first block."""
    controller = AdaptiveDraftLength(k=5, max_k=10)
    chosen = feed(controller, 15, draft_ms=100.0, verify=lambda rows: 250.0 * ((rows + 2) // 3))
    assert chosen[-1] == 2 and set(chosen[-5:]) == {2}


def test_unmeasured_verify_sizes_are_estimated_optimistically():
    costs = StepCosts(10.0, {3: 100.0, 6: 300.0})
    assert costs.verify_ms(5) == 100.0                   # larger: the nearest smaller measurement (flat)
    assert costs.verify_ms(9) == 300.0
    assert costs.verify_ms(2) == pytest.approx(200.0 / 3)   # smaller: in proportion to its rows


def test_costs_and_acceptance_carry_over_to_the_next_generation_of_the_pair():
    shared = StepCosts()
    first = AdaptiveDraftLength(k=2, max_k=10, costs=shared)
    feed(first, 12, draft_ms=10, verify=lambda rows: 250)
    second = AdaptiveDraftLength(k=2, max_k=10, costs=shared)
    assert shared.known and second.acceptance > 0.9 and second.k == 10   # starts where the first one ended


@pytest.mark.parametrize("decay", [0.5, 0.9])
def test_acceptance_estimate_follows_recent_steps(decay):
    controller = AdaptiveDraftLength(k=4, max_k=8, decay=decay)
    for _ in range(30):
        controller.observe(4, 4, 40.0, 100.0, 5)
    high = controller.acceptance
    for _ in range(60):
        controller.observe(4, 0, 40.0, 100.0, 5)
    assert high > 0.9 and controller.acceptance < 0.1


def test_the_prefill_step_counts_its_verdicts_but_not_its_costs():
    controller = AdaptiveDraftLength(k=4, max_k=8)
    controller.observe(4, 4, draft_ms=2000.0, verify_ms=3000.0, verify_rows=60, timed=False)
    assert controller.costs.draft_ms_per_token is None and controller.costs.verify_ms_by_rows == {}
    assert controller.k == 4 and controller.acceptance > 0.5



@pytest.fixture
def pair():
    return load_pair("tiny-random", device="cpu")


def start(pair, drafter: str) -> Generation:
    return SpeculativeEngine(pair).start("def fib(n): return fib(n - 1) + fib(n - 2)",
                                         SpecConfig(k=3, adaptive_k=True, drafter=drafter, max_new_tokens=24))


def finish(generation: Generation) -> Generation:
    while not generation.is_done:
        generation.step()
    return generation


def test_each_drafter_keeps_its_own_costs_and_acceptance_on_the_pair(pair):
    model_costs = pair.step_costs.for_drafter("model")
    model_costs.draft_ms_per_token, model_costs.verify_ms_by_rows = 1000.0, {rows: 10.0 for rows in range(2, 8)}
    model_costs.acceptance = 0.05                      # a draft model that costs much and is rarely right: k = 1
    ngram = start(pair, "ngram")
    assert ngram.adaptive.k == 3                       # the configured k: the model's costs do not steer it
    finish(ngram)
    assert model_costs == StepCosts(1000.0, {rows: 10.0 for rows in range(2, 8)}, 0.05)   # nor does it touch them
    ngram_costs = pair.step_costs.for_drafter("ngram")
    assert ngram.adaptive.costs is ngram_costs and ngram_costs.verify_ms_by_rows
    model = start(pair, "model")
    assert model.adaptive.costs is model_costs and model.adaptive.k == 1


@pytest.mark.parametrize("drafter", ["model", "ngram"])
def test_the_prefill_step_never_reaches_the_costs_of_either_model(pair, drafter, monkeypatch):
    observed = []
    real = StepCosts.observe
    monkeypatch.setattr(StepCosts, "observe", lambda costs, *args: observed.append(args) or real(costs, *args))
    first, *rest = finish(start(pair, drafter)).records
    assert first.kv_target.before == 0 and len(rest) > 3          # the first step prefills the target...
    if drafter == "model":                                         # ...and the draft model
        assert first.kv_draft.before == 0 < min(step.kv_draft.before for step in rest)
    assert observed == [(step.k, step.timing.draft, step.timing.verify, step.k + 1) for step in rest]
