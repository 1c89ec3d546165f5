"""Speculative sampling is lossless: over thousands of seeded runs, the first two
generated tokens follow the exact target distribution (enumerated on a 6-token
vocabulary), for a draft model that differs from the target and for n-gram lookup."""

from __future__ import annotations


import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from engine.config import SpecConfig
from engine.engine import SpeculativeEngine
from engine.sampling import SamplingParams, to_probs
from engine.tiny import build_tiny_pair

RUNS = 2500
END = -1       # stands for "no second token" after EOS


@pytest.fixture(scope="module")
def pair():
    pair = build_tiny_pair(seed=1, draft_noise=0.6, vocab="ab", num_layers=1, hidden_size=32)
    torch.set_num_threads(1)
    return pair


def next_probs(model, ids: list[int], params: SamplingParams) -> torch.Tensor:
    with torch.inference_mode():
        return to_probs(model(input_ids=torch.tensor([ids])).logits[0, -1], params)


def exact_two_token_distribution(model, prompt: list[int], params: SamplingParams, eos: frozenset[int]) -> dict:
    first = next_probs(model, prompt, params)
    table = {}
    for x1 in range(first.shape[0]):
        if x1 in eos:
            table[(x1, END)] = float(first[x1])
            continue
        second = next_probs(model, prompt + [x1], params)
        for x2 in range(second.shape[0]):
            table[(x1, x2)] = float(first[x1] * second[x2])
    return table


def chi_square_p_value(counts: dict, table: dict) -> float:
    """Pool cells expected to hold fewer than 5 samples, then chi-square against the exact table."""
    cells = sorted(table, key=table.get, reverse=True)
    observed, expected, rest_observed, rest_expected = [], [], 0, 0.0
    for cell in cells:
        if table[cell] * RUNS >= 5:
            observed.append(counts.get(cell, 0))
            expected.append(table[cell] * RUNS)
        else:
            rest_observed += counts.get(cell, 0)
            rest_expected += table[cell] * RUNS
    if rest_expected > 0:
        observed.append(rest_observed)
        expected.append(rest_expected)
    elif rest_observed:
        return 0.0                       # samples where the target puts no mass at all
    expected = np.array(expected) * (sum(observed) / sum(expected))
    return float(chisquare(observed, expected).pvalue)


def sample_counts(engine: SpeculativeEngine, prompt: str, config: SpecConfig) -> tuple[dict, float]:
    counts: dict = {}
    drafted = accepted = 0
    for seed in range(RUNS):
        trace = engine.generate(prompt, config.replace(seed=seed))
        ids = list(trace.output.token_ids) + [END]
        counts[(ids[0], ids[1])] = counts.get((ids[0], ids[1]), 0) + 1
        drafted += trace.summary.drafted
        accepted += trace.summary.accepted
    return counts, accepted / max(drafted, 1)


@pytest.mark.parametrize("drafter, temperature, top_p", [("model", 1.0, 1.0), ("model", 0.7, 0.9), ("ngram", 1.0, 1.0)])
def test_first_two_tokens_follow_the_target_distribution(pair, drafter, temperature, top_p):
    engine = SpeculativeEngine(pair, detailed_trace=False)
    prompt = "abba ab"
    config = SpecConfig(k=3, temperature=temperature, top_p=top_p, max_new_tokens=2, drafter=drafter, raw=True)
    prompt_ids = pair.encode_prompt(prompt, raw=True)
    params = SamplingParams(temperature, 0, top_p)
    table = exact_two_token_distribution(pair.target, prompt_ids, params, pair.eos_token_ids)
    counts, acceptance = sample_counts(engine, prompt, config)
    assert 0.05 < acceptance < 0.95, "both accept and reject paths must run for the test to mean anything"
    assert chi_square_p_value(counts, table) > 1e-3
    if drafter == "model":
        # Power check: the draft's own distribution is clearly different, so a rule that
        # let draft tokens through unchecked would fail the same test.
        draft_table = exact_two_token_distribution(pair.draft, prompt_ids, params, pair.eos_token_ids)
        cells = list(draft_table)
        rng = np.random.default_rng(0)
        picks = rng.choice(len(cells), size=RUNS, p=np.array([draft_table[c] for c in cells]) / sum(draft_table.values()))
        draft_counts = {cell: int(n) for cell, n in zip(cells, np.bincount(picks, minlength=len(cells)))}
        assert chi_square_p_value(draft_counts, table) < 1e-6
