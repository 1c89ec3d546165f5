"""Summary metrics computed by hand, the JSON round trip, and strict parsing."""

from __future__ import annotations

import dataclasses
import json

import pytest

from engine.metrics import BaselineStats, expected_speedup, expected_tokens_per_step
from engine.records import StepTiming
from engine.formats.trace import SCHEMA, SCHEMA_V1, Trace, TraceFormatError
from records_factory import make_trace
from trace_factory import V1_FIXTURE


def test_summary_matches_hand_computation():
    trace = make_trace([(4, 4), (4, 1), (4, 0), (2, 2)], wall_s=2.0)
    summary = trace.summary
    assert summary.steps == 4 and summary.target_forwards == 4
    assert summary.drafted == 14 and summary.accepted == 7
    assert summary.acceptance_rate == pytest.approx(7 / 14)
    assert summary.new_tokens == 5 + 2 + 1 + 3
    assert summary.mean_accepted_length == pytest.approx(11 / 4)
    # position 0 reached 4 times, accepted 3; position 1: reached 3 (steps 0, 1, 3), accepted 2;
    # position 2: reached 2 (steps 0, 1... no: step 1 rejected at 1) -> steps 0 only; position 3: step 0 only
    assert summary.per_position_acceptance == pytest.approx((3 / 4, 2 / 3, 1.0, 1.0))
    assert summary.accepted_length_histogram == (1, 1, 1, 0, 1)
    assert summary.tokens_per_s == pytest.approx(11 / 2.0)
    # draft 4 ms per drafted token, verify 10 ms per step
    assert summary.cost_ratio == pytest.approx(0.4)


def test_the_cost_ratio_leaves_out_the_first_step_which_also_prefills_the_prompt():
    trace = make_trace([(4, 4), (4, 1), (2, 0)], wall_s=2.0)
    prefill = dataclasses.replace(trace.steps[0], timing=StepTiming(draft=900.0, verify=700.0, total=1650.0))
    later = (dataclasses.replace(trace.steps[1], timing=StepTiming(draft=8.0, verify=20.0, total=30.0)),
             dataclasses.replace(trace.steps[2], timing=StepTiming(draft=4.0, verify=20.0, total=25.0)))
    summary = dataclasses.replace(trace, steps=(prefill, *later)).summary
    assert summary.cost_ratio == pytest.approx((12.0 / 6) / (40.0 / 2))       # 0.1: steps 1 and 2 only
    one_step = dataclasses.replace(trace, steps=(prefill,)).summary           # nothing else to measure
    assert one_step.cost_ratio == pytest.approx((900.0 / 4) / 700.0)


def test_estimated_alpha_is_the_mean_overlap_over_every_drafted_position():
    trace = make_trace([(4, 1), (2, 2)])
    steps = (dataclasses.replace(trace.steps[0], overlap=(0.9, 0.5, 0.1, 0.3)),
             dataclasses.replace(trace.steps[1], overlap=(0.6, 0.2)))
    summary = dataclasses.replace(trace, steps=steps).summary
    assert summary.estimated_alpha == pytest.approx(2.6 / 6)            # not the mean of step means (0.425)
    assert summary.acceptance_rate == pytest.approx(3 / 6)              # verdicts, not overlaps


def test_round_trip_is_identical():
    trace = make_trace([(3, 1), (3, 3)]).with_baseline(BaselineStats(2.0, True, 1.0, True))
    again = Trace.from_json(trace.to_json())
    assert again == trace
    assert again.to_dict() == trace.to_dict()
    assert again.to_dict()["schema"] == SCHEMA
    assert again.summary.speedup == pytest.approx(trace.summary.tokens_per_s / 2.0)


def test_schema_field_names_are_the_binding_ones():
    data = make_trace([(2, 1)]).to_dict()
    step = data["steps"][0]
    for name in ("index", "context_len", "carryover", "draft", "target", "verdicts", "accept_prob",
                 "num_accepted", "emitted", "kv", "timing_ms", "eos"):
        assert name in step
    assert set(step["kv"]["target"]) == {"before", "after_forward", "cutoff", "after_cutoff", "stale"}
    assert data["schema"] == SCHEMA == "specviz.trace/2"
    for name in ("new_tokens", "steps", "target_forwards", "drafted", "accepted", "acceptance_rate",
                 "mean_accepted_length", "per_position_acceptance", "accepted_length_histogram", "wall_s",
                 "tokens_per_s", "baseline"):
        assert name in data["summary"]
    for name in ("draft", "target", "drafter", "k", "adaptive_k", "temperature", "top_p", "top_k",
                 "max_new_tokens", "seed", "device", "draft_dtype", "target_dtype"):
        assert name in data["config"]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="other/1"), "schema"),
    (lambda d: d["steps"][0].pop("verdicts"), "missing field steps[0].verdicts"),
    (lambda d: d["steps"][0].update(num_accepted=2), "accepted"),
    (lambda d: d["summary"].update(accepted=99), "summary.accepted"),
    (lambda d: d["output"].update(token_ids=[1, 2]), "output.token_ids"),
    (lambda d: d["config"].update(k=0), "config"),
    (lambda d: d["steps"][0]["kv"]["target"].update(before="x"), "steps[0].kv.target.before"),
    (lambda d: d["steps"][0]["draft"][0].update(q=3.5), "probability"),
])
def test_inconsistent_or_malformed_traces_are_refused(mutate, message):
    data = make_trace([(2, 1), (2, 2)]).to_dict()
    mutate(data)
    with pytest.raises(TraceFormatError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Trace.from_dict(data)


def test_a_trace_1_file_still_loads_with_its_cutoff_as_given_and_stale_unknown():
    text = V1_FIXTURE.read_text(encoding="utf-8")
    assert json.loads(text)["schema"] == SCHEMA_V1 == "specviz.trace/1"
    trace = Trace.from_json(text)
    first = trace.steps[0].kv_target
    assert (first.after_forward, first.cutoff, first.after_cutoff) == (52, 5, 52)     # what /1 recorded, unchanged
    caches = [c for step in trace.steps for c in (step.kv_target, step.kv_draft)]
    assert len(caches) == 14 and all(c.stale is None and c.num_text is None for c in caches)
    again = trace.to_dict()                                    # written back as what it is: /1, no stale field
    assert again["schema"] == SCHEMA_V1 and "stale" not in again["steps"][0]["kv"]["draft"]
    assert Trace.from_dict(again) == trace


def test_a_trace_2_file_needs_stale_and_a_trace_1_file_has_none():
    data = make_trace([(2, 1), (2, 2)]).to_dict()
    assert data["steps"][1]["kv"]["draft"]["stale"] == 0
    del data["steps"][1]["kv"]["draft"]["stale"]
    with pytest.raises(TraceFormatError, match=r"missing field steps\[1\]\.kv\.draft\.stale"):
        Trace.from_dict(data)
    data = make_trace([(2, 1)]).to_dict() | {"schema": SCHEMA_V1}
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.kv\.target\.stale is not part of specviz\.trace/1"):
        Trace.from_dict(data)
    data["steps"][0]["kv"]["target"].update(stale="2")
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.kv\.target\.stale must be a whole number"):
        Trace.from_dict(data)


def test_truncated_and_non_json_uploads_are_refused():
    text = make_trace([(2, 1)]).to_json()
    with pytest.raises(TraceFormatError, match="truncated"):
        Trace.from_json(text[: len(text) // 2])
    with pytest.raises(TraceFormatError, match="must be an object"):
        Trace.from_json(json.dumps([1, 2, 3]))


def test_oversized_upload_is_refused():
    with pytest.raises(TraceFormatError, match="limit"):
        Trace.from_json(" " * (21 * 1024 * 1024))


def test_theory_formulas():
    assert expected_tokens_per_step(0.0, 5) == 1.0
    assert expected_tokens_per_step(1.0, 5) == 6.0
    assert expected_tokens_per_step(0.999999, 4) == pytest.approx(5.0, rel=1e-4)
    assert expected_tokens_per_step(0.5, 2) == pytest.approx(1.75)                 # 1 + 0.5 + 0.25
    assert expected_speedup(0.5, 2, 0.1) == pytest.approx(1.75 / 1.2)
    assert expected_speedup(0.8, 4, 0.05) == pytest.approx((1 - 0.8 ** 5) / (0.2 * 1.2))
