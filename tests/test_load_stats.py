"""engine/load/stats.py without a server: percentiles against the standard library's, a level's
figures against a plain computation, acceptance and τ from per-step counts."""

from __future__ import annotations

import random
import statistics

import pytest

from engine.load.stats import RequestTimes, acceptance, level_summary, percentile


def test_percentiles_agree_with_the_standard_library():
    generator = random.Random(7)
    for size in (1, 2, 3, 5, 16, 101):
        values = [generator.uniform(0.0, 10.0) for _ in range(size)]
        if size == 1:
            assert percentile(values, 0.5) == percentile(values, 0.99) == values[0]
            continue
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        for share, cut in ((0.5, cuts[49]), (0.9, cuts[89]), (0.99, cuts[98])):
            assert percentile(values, share) == pytest.approx(cut, rel=1e-12)
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_a_level_summary_is_the_plain_computation():
    requests = [RequestTimes(0, 0.0, 0.5, 2.0, 10), RequestTimes(1, 0.1, 1.1, 3.1, 20, 5),
                RequestTimes(0, 0.2, 0.4, 1.2, 4)]
    summary = level_summary(requests)
    assert summary["wall_s"] == pytest.approx(3.1)
    assert summary["output_tokens"] == 34
    assert summary["aggregate_tokens_per_s"] == pytest.approx(34 / 3.1)
    assert summary["latency_s"]["p50"] == pytest.approx(2.0)          # latencies 2.0, 3.0, 1.0
    assert summary["latency_s"]["p90"] == pytest.approx(2.8)
    assert summary["first_token_s"]["p50"] == pytest.approx(0.5)      # 0.5, 1.0, 0.2
    speeds = [9 / 1.5, 15 / 2.0, 3 / 0.8]    # the tokens after the first chunk
    assert summary["tokens_per_s_per_request"]["p50"] == pytest.approx(statistics.median(speeds))
    assert summary["tokens_per_s_per_request"]["mean"] == pytest.approx(statistics.fmean(speeds))


def test_a_request_whose_tokens_came_in_one_chunk_has_no_speed():
    summary = level_summary([RequestTimes(0, 0.0, 1.0, 1.0, 1), RequestTimes(1, 0.0, 0.5, 0.6, 8, 8)])
    assert summary["tokens_per_s_per_request"] is None
    assert summary["aggregate_tokens_per_s"] == pytest.approx(9.0)


def test_acceptance_counts_tau_over_the_steps_that_drafted():
    # two requests: steps (accepted, drafted) = (0,0) prefill, (3,3), (1,3); and (2,3), (0,3)
    counts = [((0, 3, 1), (0, 3, 3)), ((2, 0), (3, 3))]
    result = acceptance(counts)
    assert result == {"drafted": 12, "accepted": 6, "rate": 0.5, "tau": 1.0 + 6 / 4}
    assert acceptance([((0,), (0,))]) == {"drafted": 0, "accepted": 0, "rate": None, "tau": None}
