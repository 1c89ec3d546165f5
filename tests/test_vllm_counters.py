"""engine/vllm/counters.py on /metrics pages recorded from a real vLLM 0.32 server before and after
three requests (tests/data/vllm/): the interval's counts equal the sum of the requests' own
per-request metrics, the same numbers counted two ways."""

from __future__ import annotations

import pytest

from engine.vllm.counters import SpecCounters, parse_counters
from engine.vllm.transport import VllmError
from vllm_replay import load_recording

RECORDING = load_recording()


def test_an_interval_counts_exactly_the_requests_in_it() -> None:
    interval = parse_counters(RECORDING["metrics_after"]).minus(parse_counters(RECORDING["metrics_before"]))
    requests = [next(e["metrics"]["speculative_decoding"] for e in stream["events"] if not e.get("choices"))
                for stream in RECORDING["streams"].values()]
    assert interval.num_drafts == sum(r["num_spec_steps"] for r in requests)
    assert interval.num_draft_tokens == sum(r["num_draft_tokens"] for r in requests)
    assert interval.num_accepted_tokens == sum(r["num_accepted_draft_tokens"] for r in requests) == \
        sum(interval.accepted_per_pos)
    by_position = [sum(sum(1 for a in r["per_step_accepted"] if a > position) for r in requests) for position in range(3)]
    assert list(interval.accepted_per_pos) == by_position
    assert interval.acceptance_by_position == tuple(n / interval.num_drafts for n in by_position)


def test_counters_that_fall_and_a_page_without_them_are_refused() -> None:
    later = SpecCounters(5, 15, 7, (4, 2, 1))
    with pytest.raises(VllmError, match="restarted"):
        SpecCounters(2, 6, 1, (1, 0, 0)).minus(later)
    with pytest.raises(VllmError, match="without speculation"):
        parse_counters("# HELP vllm:num_requests_running\nvllm:num_requests_running{engine=\"0\"} 0.0\n")
