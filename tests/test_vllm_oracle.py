"""engine/vllm/ split against an oracle, not a mirror (issue 38): SpecViz's own engine on the same tiny weights
(float32, greedy, the same draft model or vLLM's n-gram rule, k = 3) must take the steps the recorded real
vLLM 0.32 servers took (tests/data/vllm/, recorded on the pair tests/vllm_session.py serves), including
a step the budget cuts and a step a preemption recomputes. tests/vllm_oracle.py says how the two align.

Against a live server (marker vllm) the same oracle runs in tests/test_vllm_cut_steps.py.
"""

from __future__ import annotations

import dataclasses

import pytest

from engine.formats.trace import Trace
from engine.vllm.split import split_steps
from engine.vllm.stream import SpecMetrics, StreamChunk
from engine.vllm.transport import VllmError
from vllm_oracle import compare, compare_recomputed, reference
from vllm_replay import load_recording
from vllm_session import tiny_pair
from vllm_traces import recorded_trace, server_info

DRAFT, NGRAM = load_recording(), load_recording("tiny_ngram_k3")
RUNS = {("draft_model", "greedy"): (DRAFT, None), ("draft_model", "long"): (DRAFT, None),
        ("ngram", "greedy"): (NGRAM, (1, 3)), ("ngram", "long"): (NGRAM, (1, 3))}


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


@pytest.fixture(scope="module")
def references(pair):
    found = {}
    for (method, name), (recording, lookup) in RUNS.items():
        trace = recorded_trace(recording, name, method, lookup)
        found[method, name] = reference(pair, trace.prompt.token_ids, len(trace.output.token_ids), trace.config,
                                        max_model_len(recording))
    return found


def max_model_len(recording) -> int:
    return recording["models"]["data"][0]["max_model_len"]


@pytest.mark.parametrize("method,name", sorted(RUNS))
def test_specviz_takes_the_steps_the_server_took(references, method, name) -> None:
    recording, lookup = RUNS[method, name]
    trace = recorded_trace(recording, name, method, lookup)
    agreement = compare(trace, references[method, name])
    assert agreement.problems == ()
    verify_steps = sum(step.k > 0 for step in trace.steps)
    assert agreement.steps_compared == len(trace.steps) - 1 and verify_steps >= 8


@pytest.mark.parametrize("tokens", [5, 7, 10, 11, 14])
def test_a_step_the_budget_cuts_keeps_vllms_count_and_only_the_tokens_that_exist(references, tokens) -> None:
    """vLLM counts a step's accepted drafts before it truncates to max_tokens (vllm/v1/core/sched/scheduler.py:
    `num_accepted` from the sampled ids, then `_update_request_with_output`): the cut step keeps that count
    (SpecViz's engine, unbudgeted, accepts as many), emits only the tokens inside the budget, and its cache
    holds only the tokens that exist; τ and the acceptance rate are vLLM's, over the counts it reported."""
    trace = recorded_trace(DRAFT, "long", tokens=tokens)
    assert len(trace.output.token_ids) == tokens
    assert compare(trace, references["draft_model", "long"]).problems == ()
    last = trace.steps[-1]
    if last.num_emitted < last.num_accepted + 1:
        kept = last.num_kept
        assert kept == min(last.num_emitted, last.num_accepted) and last.verdicts[:last.num_accepted] == \
            ("accepted",) * last.num_accepted
        assert all(d.id is None and d.origin == "unknown" for d in last.draft[kept:last.num_accepted])
        target_kind = "bonus" if last.num_accepted == last.k else "recovered"
        assert [e.kind for e in last.emitted] == (["accepted"] * last.num_accepted + [target_kind])[:last.num_emitted]
    ends_on_draft = last.emitted[-1].kind == "accepted"
    assert last.kv_target.after_cutoff == len(trace.prompt.token_ids) + tokens - (not ends_on_draft)
    verify = [s for s in trace.steps if s.k]
    summary = trace.summary
    assert summary.new_tokens == tokens and summary.accepted == sum(s.num_accepted for s in verify)
    assert summary.mean_accepted_length == pytest.approx(1 + summary.accepted / len(verify))
    assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict()


def test_the_budget_cuts_inside_accepted_drafts_somewhere() -> None:
    """The cases above include cuts before accepted drafts (not only before the target's own token)."""
    cuts = [recorded_trace(DRAFT, "long", tokens=tokens).steps[-1] for tokens in (5, 7, 10, 11, 14)]
    assert any(step.num_kept < step.num_accepted for step in cuts)
    assert any(step.num_emitted == step.num_accepted for step in cuts)       # only the target's token cut


def test_the_oracle_fails_on_an_off_by_one_split(references) -> None:
    """Plant: one step's accepted count one more, the next one less, so the counts still split the tokens
    (a split that slips by one token); the oracle names the step."""
    recording, _ = RUNS["draft_model", "greedy"]
    trace = recorded_trace(recording, "greedy")
    steps = list(trace.steps)
    index = next(i for i in range(1, len(steps) - 1) if steps[i].num_accepted < steps[i].k and steps[i + 1].num_accepted)
    chunks, metrics = _stream(trace)
    accepted = list(metrics.per_step_accepted)
    accepted[index - 1] += 1
    accepted[index] -= 1
    slipped = dataclasses.replace(metrics, per_step_accepted=tuple(accepted))
    placed = split_steps(_one_chunk(chunks), slipped, 3)
    assert [len(s.token_ids) for s in placed] != [s.num_emitted for s in steps]
    from engine.vllm.to_trace import build_trace
    bad = build_trace(server_info(), trace.config, trace.prompt, _one_chunk(chunks), slipped, 1.0,
                      lambda ids: [DRAFT["detokenize"][t] for t in ids], True, "length")
    problems = compare(bad, references["draft_model", "greedy"]).problems
    assert problems and f"step {index}" in problems[0]


def test_a_preempted_step_is_placed_as_one_that_verified_nothing(pair) -> None:
    """After a preemption vLLM recomputes the request and its next step emits one token without drafts,
    absent from the arrays (its `_preempt_request` clears the drafts). Greedy, that token is the one a step
    that accepted nothing emits, so dropping such a step's entry from a recorded stream is that run. Where
    merged chunks leave the recomputed step's place open, the run is not split (a real server preempting
    six lagging streams at once merged chunks of up to 29 tokens: guessed placements disagreed with the
    oracle; the unambiguous ones agreed)."""
    trace = recorded_trace(DRAFT, "greedy")
    chunks, metrics = _stream(trace)
    index = next(i for i, step in enumerate(trace.steps) if step.k and step.num_accepted == 0)
    keep = [i for i in range(len(metrics.per_step_accepted)) if i != index - 1]
    preempted = dataclasses.replace(metrics, per_step_accepted=tuple(metrics.per_step_accepted[i] for i in keep),
                                    per_step_drafted=tuple(metrics.per_step_drafted[i] for i in keep))
    placed = split_steps(chunks, preempted, 3)
    assert [(len(s.token_ids), s.drafted) for s in placed] == \
        [(s.num_emitted, 0 if i == index else s.k) for i, s in enumerate(trace.steps)]
    from engine.vllm.to_trace import build_trace
    drawn = build_trace(server_info(), trace.config, trace.prompt, chunks, preempted, 1.0,
                        lambda ids: [DRAFT["detokenize"][t] for t in ids], True, "length")
    agreement = compare_recomputed(pair, drawn, max_model_len(DRAFT))       # SpecViz restarts where vLLM recomputed
    assert agreement.problems == () and agreement.steps_compared == len(trace.steps) - 2
    with pytest.raises(VllmError, match="cannot be told: its tokens are kept, unsplit"):
        split_steps(_one_chunk(chunks), preempted, 3)       # the client lagged: every step in one chunk


def _stream(trace: Trace) -> tuple[list[StreamChunk], SpecMetrics]:
    """A finished trace's stream back: one chunk per step, and the server's arrays."""
    chunks = [StreamChunk(1.0 + i, tuple(e.id for e in s.emitted), "", None) for i, s in enumerate(trace.steps)]
    verify = [s for s in trace.steps if s.k]
    return chunks, SpecMetrics(3, tuple(s.num_accepted for s in verify), tuple(s.k for s in verify),
                               sum(s.k for s in verify), sum(s.num_accepted for s in verify))


def _one_chunk(chunks: list[StreamChunk]) -> list[StreamChunk]:
    return [StreamChunk(chunks[-1].time_s, tuple(t for c in chunks for t in c.token_ids), "", "length")]


def test_the_step_detail_says_the_budget_cut_the_accepted_drafts() -> None:
    """specviz/run/step_reasons.py: a budget-cut step's accepted drafts past the cut are named as not emitted."""
    from specviz.run.step_reasons import outcome, verdict_reason
    last = recorded_trace(DRAFT, "long", tokens=10).steps[-1]
    assert last.num_kept < last.num_accepted and not last.eos
    assert outcome(last).endswith(f"{last.num_kept} kept (the output ends at the token budget)")
    assert verdict_reason(last, last.num_kept, True).endswith("past the token budget, so not emitted")
    assert "budget" not in verdict_reason(last, 0, True)


def test_the_tau_card_says_it_counts_the_drafts_the_cut_left_out() -> None:
    """τ and the acceptance rate are vLLM's (they count the cut step's accepted drafts); the card says so."""
    from specviz.run.output_view import metrics_html
    cut = recorded_trace(DRAFT, "long", tokens=10)
    unseen = cut.steps[-1].num_accepted - cut.steps[-1].num_kept
    assert f"counts {unseen} accepted draft" in metrics_html(cut)
    assert "never emitted" not in metrics_html(recorded_trace(DRAFT, "long"))
