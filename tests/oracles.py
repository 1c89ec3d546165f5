"""The oracles the engine is checked against, shared by the engine tests and by
tests/test_fault_injection.py, which plants the bugs they exist for and sees each fail.

- Sampling: the empirical joint law of the first few generated tokens over many seeded
  runs against the exact law of target-only sampling, enumerated over the prefix tree.
- Greedy: token-for-token identity with target-only greedy decoding.
- Caches: after every step, each KV cache equals a fresh prefill of what it has committed; a
  static cache's device write pointers also equal the length the host believes it has.
- Static caches: a run on a static cache (the GPU's kind) against target-only decoding on a
  dynamic one, an implementation that shares none of its pointer, masks or graphs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import chi2
from transformers import DynamicCache, GenerationConfig

from engine.config import SpecConfig
from engine.decode.baseline import target_only
from engine.decode.speculative import SpeculativeEngine
from engine.decode.kv import KVCache
from engine.decode.pair import ModelPair
from engine.decode.sampling import SamplingParams, to_probs
from engine.loading.tiny import build_tiny_pair
from engine.loading.speed_up import prepare_static_runners
from engine.formats.trace import Trace

FALSE_ALARM = 1e-4         # probability that the law test fails a correct engine
MIN_EXPECTED = 5           # cells expected to hold fewer samples are pooled into one
END = -1                   # fills the positions after an EOS


def law_pair() -> ModelPair:
    """6 tokens (4 special, "a", "b") and a draft far enough from the target that drafts are
    rejected at every position. Chosen, with LAW_TEMPERATURE, for distributions that change
    with the context, so a row from the wrong position is far from the right one."""
    return build_tiny_pair(seed=4, draft_noise=0.6, vocab="ab", num_layers=1, hidden_size=32)


# -- sampling: the joint law of the first tokens -------------------------------------------------

@dataclass(frozen=True)
class LawCase:
    """One run of the law test: `runs` seeded generations, the first `num_tokens` tokens compared."""

    drafter: str
    k: int
    temperature: float
    top_p: float
    num_tokens: int
    max_new_tokens: int
    runs: int
    prompt: str = "abba ab"
    tree_nodes: int = 0            # > 0: a token tree of this budget, depth k
    tree_branch: int = 3
    cache: str = "dynamic"         # the KV cache's kind (SpecConfig.cache)

    @property
    def config(self) -> SpecConfig:
        return SpecConfig(k=self.k, temperature=self.temperature, top_p=self.top_p,
                          max_new_tokens=self.max_new_tokens, drafter=self.drafter, raw=True,
                          tree_nodes=self.tree_nodes, tree_branch=self.tree_branch, cache=self.cache)

    @property
    def has_full_carryover(self) -> bool:
        """Whether a drafting step can follow a fully accepted one (k + 1 tokens) within the budget."""
        return self.drafter == "model" and self.max_new_tokens >= self.k + 3

    def __str__(self) -> str:
        tree = f"-tree{self.tree_nodes}x{self.tree_branch}" if self.tree_nodes else ""
        cache = "-static" if self.cache == "static" else ""
        return f"{self.drafter}-k{self.k}{tree}{cache}-T{self.temperature}-p{self.top_p}-first{self.num_tokens}"


LAW_TEMPERATURE = 0.7         # with law_pair(): the largest effect of each planted bug found
LAW_RUNS = 1500
# Each case spans several steps: rejections at draft positions 1 and 2, bonus tokens, a plain
# target step where the budget leaves no room to draft. With k = 2 over 5 new tokens, a fully
# accepted first step is followed by a drafting step that feeds d_2 and the bonus to the draft.
LAW_CASES = (
    LawCase("model", k=2, temperature=LAW_TEMPERATURE, top_p=1.0, num_tokens=4, max_new_tokens=5, runs=LAW_RUNS),
    LawCase("model", k=3, temperature=LAW_TEMPERATURE, top_p=0.9, num_tokens=4, max_new_tokens=4, runs=LAW_RUNS),
    LawCase("ngram", k=3, temperature=LAW_TEMPERATURE, top_p=1.0, num_tokens=4, max_new_tokens=4, runs=LAW_RUNS),
)
# Token trees: the first 3 tokens, over steps that accept a second or third child, reject every
# child of a node (the token then comes from what is left of p), end at a leaf (bonus).
TREE_LAW_CASES = (
    LawCase("model", k=3, temperature=LAW_TEMPERATURE, top_p=1.0, num_tokens=3, max_new_tokens=4, runs=LAW_RUNS,
            tree_nodes=6, tree_branch=2),
    LawCase("model", k=2, temperature=LAW_TEMPERATURE, top_p=0.9, num_tokens=3, max_new_tokens=4, runs=LAW_RUNS,
            tree_nodes=8, tree_branch=3),
)


@dataclass(frozen=True)
class Exercised:
    """What the sampled runs went through: the paths a lossless rule must get right."""

    drafted: int = 0
    accepted: int = 0
    multi_step_runs: int = 0        # runs of two steps or more
    late_rejections: int = 0        # rejections at draft position >= 1: residual rows past the first
    bonus_tokens: int = 0           # every draft accepted, a token sampled from p_{k+1}
    full_carryovers: int = 0        # d_k and the bonus fed to the draft model together
    later_children: int = 0         # tree nodes accepted after an earlier sibling was rejected
    all_rejected: int = 0           # tree steps that rejected two or more children where the walk stopped

    def add(self, trace: Trace) -> Exercised:
        steps = trace.steps
        trees = [s.tree for s in steps if s.tree is not None]
        return Exercised(
            later_children=self.later_children + sum(
                1 for tree in trees for node in tree.nodes if node.verdict == "accepted" and any(
                    other.parent == node.parent and other.id < node.id and other.verdict == "rejected"
                    for other in tree.nodes)),
            all_rejected=self.all_rejected + sum(
                sum(node.parent == (tree.path[-1] if tree.path else None) for node in tree.nodes) >= 2
                for tree in trees),
            drafted=self.drafted + sum(s.k for s in steps),
            accepted=self.accepted + sum(s.num_accepted for s in steps),
            multi_step_runs=self.multi_step_runs + (len(steps) > 1),
            late_rejections=self.late_rejections + sum(1 <= s.num_accepted < s.k for s in steps),
            bonus_tokens=self.bonus_tokens + sum(s.k > 0 and s.num_accepted == s.k for s in steps),
            full_carryovers=self.full_carryovers + sum(len(s.carryover) == 2 for s in steps))

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / max(self.drafted, 1)


@dataclass(frozen=True)
class LawCheck:
    statistic: float           # Pearson's chi-square
    dof: int
    p_value: float
    exercised: Exercised

    @property
    def passes(self) -> bool:
        return self.p_value > FALSE_ALARM

    def __str__(self) -> str:
        return f"chi2 = {self.statistic:.1f} on {self.dof} dof, p = {self.p_value:.3g}"


def exact_joint_law(model, prompt_ids: list[int], params: SamplingParams, num_tokens: int,
                    eos_ids: frozenset[int]) -> dict[tuple[int, ...], float]:
    """Law of the first num_tokens tokens of target-only sampling, over the prefix tree: one
    batched forward per depth. A sequence that reaches EOS is padded with END."""
    law: dict[tuple[int, ...], float] = {(): 1.0}
    for _ in range(num_tokens):
        growing = [prefix for prefix in law if not prefix or prefix[-1] not in eos_ids | {END}]
        with torch.inference_mode():
            batch = torch.tensor([prompt_ids + list(prefix) for prefix in growing])           # (B, T)
            probs = to_probs(model(input_ids=batch).logits[:, -1], params).double()           # (B, V)
        grown = {prefix + (END,): mass for prefix, mass in law.items() if prefix not in growing}
        for prefix, row in zip(growing, probs.tolist()):
            grown.update({prefix + (token,): law[prefix] * p for token, p in enumerate(row) if p > 0})
        law = grown
    return law


def sample_first_tokens(engine: SpeculativeEngine, case: LawCase) -> tuple[Counter, Exercised]:
    """Counts of the first num_tokens generated tokens over seeds 0..runs-1."""
    counts: Counter = Counter()
    exercised = Exercised()
    for seed in range(case.runs):
        trace = engine.generate(case.prompt, case.config.replace(seed=seed))
        ids = list(trace.output.token_ids[:case.num_tokens])
        counts[tuple(ids + [END] * (case.num_tokens - len(ids)))] += 1
        exercised = exercised.add(trace)
    return counts, exercised


def chi_square(counts: Counter, law: dict[tuple[int, ...], float]) -> tuple[float, int, float]:
    """Pearson's test of counts against an exact law: cells expected to hold fewer than
    MIN_EXPECTED samples are pooled; any sample outside the law's support fails outright."""
    runs = sum(counts.values())
    if any(cell not in law for cell in counts):
        return float("inf"), 0, 0.0
    kept = [cell for cell in law if law[cell] * runs >= MIN_EXPECTED]
    observed = [counts[cell] for cell in kept]
    expected = [law[cell] * runs for cell in kept]
    pooled_observed, pooled_expected = runs - sum(observed), runs - sum(expected)
    if pooled_observed or pooled_expected > 1e-9:
        observed.append(pooled_observed)
        expected.append(max(pooled_expected, 1e-12))
    observed_array, expected_array = np.array(observed, dtype=float), np.array(expected)
    statistic = float(((observed_array - expected_array) ** 2 / expected_array).sum())
    dof = len(expected) - 1
    return statistic, dof, float(chi2.sf(statistic, dof))


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, which also leaves the other cores free."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def check_joint_law(engine: SpeculativeEngine, case: LawCase) -> LawCheck:
    """Sample the engine and test the joint law of its first tokens against target-only sampling."""
    pair = engine.pair
    params = SamplingParams(case.temperature, 0, case.top_p)
    with one_torch_thread():
        law = exact_joint_law(pair.target, pair.encode_prompt(case.prompt, raw=True), params, case.num_tokens,
                              pair.eos_token_ids)
        counts, exercised = sample_first_tokens(engine, case)
    return LawCheck(*chi_square(counts, law), exercised)


def assert_follows_target_law(engine: SpeculativeEngine, case: LawCase) -> LawCheck:
    check = check_joint_law(engine, case)
    assert check.passes, f"{case}: the first tokens do not follow the target law ({check})"
    return check


# -- greedy: identical to target-only decoding ---------------------------------------------------

GREEDY_PROMPTS = ("Hello, world", "def reverse(xs):", "The quick brown fox", "aaaa bbbb aaaa bbbb", "1 2 3 4 5 6",
                  "Speculative decoding is", "x", "print('hi')\nprint('hi')", "SELECT * FROM t WHERE", "ab ab ab ab ab")


def assert_identical_to_target_only(engine: SpeculativeEngine, prompt: str, config: SpecConfig) -> Trace:
    trace = engine.with_baseline(engine.generate(prompt, config))
    assert trace.summary.baseline.identical, (prompt, config.k, trace.output.token_ids)
    assert trace.summary.new_tokens == len(trace.output.token_ids)
    return trace


def transformers_greedy(plain: ModelPair, prompt: str, max_new_tokens: int) -> list[int]:
    """Oracle: transformers' greedy generate() on `plain`'s target (an unpacked float32 model), the new ids."""
    ids = torch.tensor([plain.encode_prompt(prompt)])
    eos = sorted(plain.eos_token_ids)
    config = GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False, eos_token_id=eos, pad_token_id=eos[0])
    with torch.inference_mode():
        expected = plain.target.generate(ids, attention_mask=torch.ones_like(ids), generation_config=config)
    return expected[0, ids.shape[1]:].tolist()


def replaying_graphs(pair: ModelPair) -> ModelPair:
    """`pair` with static-cache runners that capture what a CUDA load captures, replayed eagerly on
    the CPU (runtime/cuda/graphs.py EagerReplay): the graph dispatch under test, without a GPU."""
    prepare_static_runners(pair, "eager-replay")
    return pair


def assert_static_matches_dynamic_target_only(engine: SpeculativeEngine, prompt: str, config: SpecConfig) -> Trace:
    """A run on a static cache emits what target-only decoding on a dynamic cache emits."""
    trace = engine.generate(prompt, config.replace(cache="static"))
    assert trace.config.cache == "static"
    oracle = target_only(engine.pair, list(trace.prompt.token_ids), trace.config.replace(cache="dynamic"))
    assert trace.output.token_ids == oracle.token_ids, (prompt, config, trace.output.token_ids, oracle.token_ids)
    return trace


# -- caches: equal to a fresh prefill after every step -------------------------------------------

CACHE_PROMPT = "The cache must match"

def fresh_prefill(model, token_ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=torch.tensor([token_ids]), past_key_values=cache, use_cache=True)
    return [(layer.keys, layer.values) for layer in cache.layers]


def assert_pointer_matches(kv: KVCache) -> None:
    """A static cache's per-layer device counters (where the next forward writes) equal its host length."""
    if kv.is_static:
        pointers = {int(layer.cumulative_length) for layer in kv.lease.runner.kv.layers}
        assert pointers == {kv.length}, f"the device write pointers are {pointers}, the host believes {kv.length}"


def assert_cache_equals_prefill(kv: KVCache, model, token_ids: list[int]) -> None:
    assert kv.length == len(token_ids), f"the cache holds {kv.length} positions for {len(token_ids)} committed tokens"
    assert_pointer_matches(kv)
    for (keys, values), (want_keys, want_values) in zip(kv.key_values(), fresh_prefill(model, token_ids)):
        assert torch.allclose(keys, want_keys, rtol=1e-4, atol=1e-4), (keys - want_keys).abs().max()
        assert torch.allclose(values, want_values, rtol=1e-4, atol=1e-4), (values - want_values).abs().max()


def assert_caches_match_prefill_every_step(engine: SpeculativeEngine, prompt: str, config: SpecConfig) -> Trace:
    """Step a generation; after each step both caches hold exactly what they committed."""
    pair = engine.pair
    generation = engine.start(prompt, config)
    while not generation.is_done:
        step = generation.step()
        committed = generation.committed
        # the target has fed everything but the last emitted token (its pending token), unless that was a draft
        assert_cache_equals_prefill(generation.target, pair.target, committed[:generation.target.num_committed])
        assert generation.target.num_committed == len(committed) - (step.emitted[-1].kind != "accepted")
        drafter = generation.drafter
        assert_cache_equals_prefill(drafter.kv, pair.draft, committed[:drafter.kv.num_committed])
    return generation.trace()
