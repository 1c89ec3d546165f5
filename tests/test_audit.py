"""The audit (engine/audit/): another engine's tokens scored under the target.

Oracles: each score equals the target's probability from its own forward over that token's
prefix alone (one row at a time, as target-only decoding computes it), through the same
temperature / top-k / top-p; tokens that target-only sampling drew are marked no more often than
the law allows (a Chernoff bound on the count, from the law's own expected number); tokens
planted where the target gives them under 1e-6 are all marked, at the step that emitted them; a
greedy run is marked exactly where it leaves the target's argmax.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.audit.marks import RARE, marked_lines, token_kinds
from engine.audit.runs import EMITTED_SCHEMA, EmittedRun, emitted_document, read_runs
from engine.audit.score import score_tokens, steps_of
from engine.config import SpecConfig
from engine.decode.sampling import SamplingParams, to_probs
from engine.decode.speculative import SpeculativeEngine
from engine.formats.trace import TraceFormatError
from engine.loading.tiny import build_tiny_pair

ROOT = Path(__file__).resolve().parent.parent
PROMPTS = ("The quick brown fox", "def reverse(xs):", "1 2 3 4 5 6", "Hello, world")


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair()


def prefix_probs(pair, prompt_ids, emitted, params) -> list[torch.Tensor]:
    """The oracle: the target's law for each emitted token from a forward over its prefix alone."""
    rows = []
    with torch.inference_mode():
        for i in range(len(emitted)):
            context = torch.tensor([[*prompt_ids, *emitted[:i]]])
            rows.append(to_probs(pair.target(input_ids=context).logits[0, -1, :pair.vocab_size], params))
    return rows


def sampled(pair, prompt: str, temperature: float, seed: int, tokens: int = 48) -> tuple[list[int], tuple[int, ...]]:
    prompt_ids = pair.encode_prompt(prompt)
    config = SpecConfig(temperature=temperature, max_new_tokens=tokens, seed=seed)
    return prompt_ids, SpeculativeEngine(pair).target_only_ids(prompt_ids, config)


@pytest.mark.parametrize("temperature, top_k, top_p", [(0.7, 0, 1.0), (1.3, 5, 1.0), (0.9, 0, 0.8)])
def test_each_score_is_the_targets_probability_after_that_prefix(pair, temperature, top_k, top_p):
    prompt_ids, emitted = sampled(pair, "abc", temperature, seed=3, tokens=12)
    audit = score_tokens(pair, prompt_ids, emitted, temperature, top_k, top_p)
    oracle = prefix_probs(pair, prompt_ids, emitted, SamplingParams(temperature, top_k, top_p))
    assert [s.token_id for s in audit.scores] == list(emitted)
    for score, row in zip(audit.scores, oracle):
        assert score.probability == pytest.approx(float(row[score.token_id]), rel=1e-4, abs=1e-9)
        assert score.top[0].id == int(row.argmax())
    expected = sum(float((row * (row < RARE)).sum()) for row in oracle)
    assert audit.expected_marked == pytest.approx(expected, rel=1e-4, abs=1e-12)


def law_limit(expected: float, false_alarm: float = 1e-9) -> int:
    """The fewest marked tokens that sampling from the target reaches with probability below
    `false_alarm`: Chernoff's bound P(X >= m) <= e^-mu (e mu / m)^m for a sum of Bernoulli
    marks whose chances (each token's mass below RARE given its prefix) add up to mu."""
    if expected == 0:
        return 1
    m = max(1, math.ceil(expected))
    while m * math.log(math.e * expected / m) - expected > math.log(false_alarm):
        m += 1
    return m


def test_target_only_samples_are_marked_no_more_than_the_law_allows(pair):
    marked, expected, tokens = 0, 0.0, 0
    for seed in range(6):
        for prompt in PROMPTS:
            prompt_ids, emitted = sampled(pair, prompt, 0.7, seed)
            audit = score_tokens(pair, prompt_ids, emitted, 0.7)
            marked, expected, tokens = marked + len(audit.marked), expected + audit.expected_marked, tokens + len(emitted)
    assert tokens > 1000
    assert marked < law_limit(expected), f"{marked} of {tokens} marked; the law expects {expected:.3g}"


def test_planted_impossible_tokens_are_marked_at_their_steps(pair):
    """Tokens the target gives under 1e-6 planted into a target-only sample, as vLLM's broken
    speculative sampling emitted them: every one is marked, at the step that emitted it."""
    prompt_ids, emitted = sampled(pair, "The quick brown fox", 0.7, seed=1)
    emitted, planted = list(emitted), (5, 17, 30)
    for position in planted:
        row = prefix_probs(pair, prompt_ids, emitted[:position + 1], SamplingParams(0.7))[position]
        emitted[position] = int(row.argmin())
        assert float(row.min()) < RARE
    sizes = [3] * (len(emitted) // 3) + [len(emitted) % 3] * bool(len(emitted) % 3)   # 3 tokens a step
    audit = score_tokens(pair, prompt_ids, emitted, 0.7, steps=steps_of(sizes))
    marked = {score.position for score in audit.marked}
    assert set(planted) <= marked
    assert {position // 3 for position in planted} <= set(audit.marked_steps)
    assert len(audit.marked) >= law_limit(audit.expected_marked)             # far beyond the law
    assert all(score.probability < RARE for score in audit.marked)
    lines = marked_lines(audit)
    assert any(line.startswith("step 1, token 5: ") for line in lines), lines


def test_greedy_marks_exactly_where_the_run_leaves_the_argmax(pair):
    prompt_ids, emitted = sampled(pair, "def reverse(xs):", 0.0, seed=0, tokens=24)
    assert score_tokens(pair, prompt_ids, emitted, 0.0).marked == ()
    emitted = list(emitted)
    runner_up = int(torch.topk(prefix_probs(pair, prompt_ids, emitted[:9], SamplingParams())[8], 2).indices[1])
    emitted[8] = runner_up
    audit = score_tokens(pair, prompt_ids, emitted, 0.0)
    assert audit.marked and audit.marked[0].position == 8 and audit.marked[0].margin > 0
    assert audit.expected_marked == 0.0


def test_the_cli_prints_the_marked_steps_of_an_emitted_document(pair, tmp_path):
    prompt_ids, emitted = sampled(pair, "abc", 0.7, seed=2, tokens=10)
    emitted = list(emitted)
    row = prefix_probs(pair, prompt_ids, emitted[:5], SamplingParams(0.7))[4]
    emitted[4] = int(row.argmin())
    document = tmp_path / "emitted.json"
    document.write_text(json.dumps(emitted_document([
        EmittedRun("planted", "a test", tuple(prompt_ids), tuple(emitted), 0.7, step_sizes=(1, 2, 2, 5),
                   step_drafted=(0, 4, 4, 4))])))
    result = subprocess.run([sys.executable, "-m", "engine.audit", str(document), "--preset", "tiny-random"],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "planted (a test): " in result.stdout and "step 2, token 4: " in result.stdout, result.stdout
    assert "(recovered): p = " in result.stdout and "1 of 2 recovered tokens" in result.stdout, result.stdout


def test_token_kinds_follow_the_steps_sizes_and_drafts():
    assert token_kinds([1, 3, 2, 4], [0, 3, 3, 3]) == [
        "no drafts", "accepted draft", "accepted draft", "recovered", "accepted draft", "recovered",
        "accepted draft", "accepted draft", "accepted draft", "bonus"]


def test_a_trace_file_is_read_with_its_steps(pair, tmp_path):
    trace = SpeculativeEngine(pair).generate("abc", SpecConfig(k=3, temperature=0.7, max_new_tokens=16, seed=0))
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(trace.to_dict()))
    (run,) = read_runs(path)
    assert run.token_ids == tuple(trace.output.token_ids) and run.temperature == 0.7
    assert run.step_sizes == tuple(len(step.emitted) for step in trace.steps)
    audit = score_tokens(pair, run.prompt_ids, run.token_ids, run.temperature, steps=steps_of(run.step_sizes))
    assert audit.scores[-1].step == len(trace.steps) - 1


@pytest.mark.parametrize("document, words", [
    ({"schema": EMITTED_SCHEMA, "runs": [{"name": "x", "engine": "e", "prompt_token_ids": [1], "token_ids": [5, 6],
      "temperature": 0.7, "top_k": 0, "top_p": 1.0, "step_sizes": [1]}]}, "runs[0].step_sizes adds up to 1 tokens"),
    ({"schema": EMITTED_SCHEMA, "runs": [{"name": "x", "engine": "e", "prompt_token_ids": [1], "token_ids": [-5],
      "temperature": 0.7, "top_k": 0, "top_p": 1.0}]}, "runs[0].token_ids"),
    ({"schema": "nothing/1"}, "schema must be"),
])
def test_bad_documents_get_one_sentence(tmp_path, document, words):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    with pytest.raises(TraceFormatError, match=words.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        read_runs(path)


def test_tokens_outside_the_vocabulary_are_refused_in_the_prefix_and_marked_when_emitted(pair):
    with pytest.raises(ValueError, match="outside the"):
        score_tokens(pair, [1, 10_000], [5], 0.7)
    audit = score_tokens(pair, [1, 5], [6, 10_000], 0.7)
    assert [s.marked for s in audit.scores][1] and audit.scores[1].probability == 0.0
