"""Every architecture a preset or a user is likely to pick, on either KV cache (docs/architecture.md §7,
"Which models").

Tiny random models built in code (no files): Llama (SmolLM2, tiny-random), Qwen2 (the Qwen presets,
and with its sliding layers on), GPT-2 (the gpt2 preset: multi-head attention, a config with no
`num_key_value_heads`), Mistral with a sliding window of 16 (every run reaches the window's
edge), of 128 (less than the runner's 256 rows) and of 256 (as many: transformers' sliding layer
would fit the mask there, and its host counter, never rewound, would drift with every cut), Phi3 and Gemma2 (sliding and full layers alternating, a head_dim of its own). Each
with a noisy copy as its draft, so drafts are both accepted and cut. On one engine, so a static
cache's runner serves run after run: greedy speculative output against target-only decoding on a
dynamic cache (itself checked against transformers' `generate`), and every KV record against the
laws of the cache's lengths and against the other cache kind's record of the same step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import pytest
import torch
from transformers import (AutoModelForCausalLM, Gemma2Config, GPT2Config, LlamaConfig, MistralConfig, Phi3Config,
                          PretrainedConfig, Qwen2Config, Qwen3NextConfig)

from engine.config import MODEL_DRAFTER, SpecConfig
from engine.decode.baseline import target_only
from engine.decode.pair import ModelPair
from engine.decode.speculative import SpeculativeEngine
from engine.formats.trace import Trace
from engine.loading.tiny import DEFAULT_DRAFT_NOISE, HEAD_SCALE, INIT_STD, add_noise, build_tiny_tokenizer
from engine.runtime.static_cache import StaticKV, static_cache_refusal
from oracles import replaying_graphs

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)

TOKENIZER = build_tiny_tokenizer()
SHAPE = dict(vocab_size=len(TOKENIZER), bos_token_id=TOKENIZER.bos_token_id, eos_token_id=TOKENIZER.eos_token_id,
             pad_token_id=TOKENIZER.pad_token_id, initializer_range=INIT_STD, tie_word_embeddings=False)
ATTENTION = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=512)
ARCHITECTURES: dict[str, PretrainedConfig] = {
    "llama": LlamaConfig(**ATTENTION, **SHAPE),
    "qwen2": Qwen2Config(**ATTENTION, **SHAPE),
    "qwen2-sliding": Qwen2Config(**ATTENTION, **SHAPE, use_sliding_window=True, sliding_window=48, max_window_layers=1),
    "gpt2": GPT2Config(n_embd=64, n_layer=2, n_head=4, n_positions=512, **SHAPE),
    "mistral-window-16": MistralConfig(**ATTENTION, **SHAPE, sliding_window=16),
    "mistral-window-128": MistralConfig(**ATTENTION, **SHAPE, sliding_window=128),
    "mistral-window-256": MistralConfig(**ATTENTION, **SHAPE, sliding_window=256),   # = the runner's 256 rows
    "phi3": Phi3Config(**ATTENTION, **SHAPE),
    "gemma2": Gemma2Config(**ATTENTION, **SHAPE, head_dim=24, sliding_window=32),
}
PROMPTS = ("ab", "The cat", "x = 1")                     # three runs, each on the runner the last one gave back
KS = (4, 2, 7)
MOST_NEW_TOKENS = 60


@dataclass
class Runs:
    """One architecture's three runs on one cache kind."""

    pair: ModelPair
    traces: list[Trace]


def tiny_pair(config: PretrainedConfig, seed: int = 0) -> ModelPair:
    """A seeded random model of `config`'s architecture and a noisy copy of it as its draft."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        target = AutoModelForCausalLM.from_config(config)
    with torch.no_grad():
        target.get_output_embeddings().weight.mul_(HEAD_SCALE)       # peaked next-token distributions: no near ties
    target.eval().requires_grad_(False)
    draft = copy.deepcopy(target)
    add_noise(draft, DEFAULT_DRAFT_NOISE, seed)
    return ModelPair(target=target, draft=draft, tokenizer=TOKENIZER, target_name=f"tiny {config.model_type}",
                     draft_name=f"noisy tiny {config.model_type}", device=torch.device("cpu"), target_dtype="float32",
                     draft_dtype="float32", preset=None, default_drafter=MODEL_DRAFTER)


def new_tokens(pair: ModelPair, prompt: str) -> int:
    """As many new tokens as the models allow, up to MOST_NEW_TOKENS: a run with a sliding window ends at it."""
    return min(MOST_NEW_TOKENS, pair.max_context - len(pair.encode_prompt(prompt)))


@pytest.fixture(scope="module", params=list(ARCHITECTURES))
def architecture(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def runs(architecture) -> dict[str, Runs]:
    """Per cache kind: three runs on one engine (the static one's graph dispatch replayed eagerly)."""
    by_cache = {}
    for cache in ("static", "dynamic"):
        pair = replaying_graphs(tiny_pair(ARCHITECTURES[architecture]))
        engine = SpeculativeEngine(pair)
        traces = [engine.generate(prompt, SpecConfig(k=k, max_new_tokens=new_tokens(pair, prompt), cache=cache))
                  for prompt, k in zip(PROMPTS, KS)]
        by_cache[cache] = Runs(pair, traces)
    return by_cache


def test_target_only_on_a_dynamic_cache_is_transformers_generate(architecture):
    """The oracle's own check: the engine's target-only loop emits what transformers' greedy generate does."""
    pair = tiny_pair(ARCHITECTURES[architecture])
    prompt_ids = pair.encode_prompt(PROMPTS[0])
    ours = target_only(pair, prompt_ids, SpecConfig(max_new_tokens=new_tokens(pair, PROMPTS[0]), cache="dynamic"))
    with torch.inference_mode():
        theirs = pair.target.generate(torch.tensor([prompt_ids]), do_sample=False, max_new_tokens=len(ours.token_ids),
                                      min_new_tokens=len(ours.token_ids), pad_token_id=TOKENIZER.pad_token_id)
    assert list(ours.token_ids) == theirs[0, len(prompt_ids):].tolist()


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_greedy_speculative_equals_target_only_run_after_run(runs, cache):
    pair, traces = runs[cache].pair, runs[cache].traces
    for trace in traces:
        assert trace.config.cache == cache
        oracle = target_only(pair, list(trace.prompt.token_ids), trace.config.replace(cache="dynamic"))
        assert trace.output.token_ids == oracle.token_ids, (trace.prompt.text, trace.config.k)
    assert any(step.kv_target.cutoff > 0 for trace in traces for step in trace.steps)     # drafts were cut
    assert any(step.num_accepted > 0 for trace in traces for step in trace.steps)        # and accepted
    if cache == "static":       # all three on the runner prepared at load, given back and lent again
        assert pair.runner_pool("target").num_runners == 1 and pair.runner_pool("draft").num_runners == 1


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_kv_records_add_up(runs, cache):
    """Each step's lengths follow from the last and from what was fed and cut; the run ends holding
    the prompt and every new token but the last (the target's pending token), on either model."""
    for trace in runs[cache].traces:
        for role in ("target", "draft"):
            records = [step.kv_target if role == "target" else step.kv_draft for step in trace.steps]
            assert records[0].before == 0
            for previous, record in zip([None, *records], records):
                if previous is not None:
                    assert record.before == previous.after_cutoff, role
                assert record.after_forward >= record.before and record.after_cutoff == record.after_forward - record.cutoff
                assert record.stale == 0
                if cache == "static":
                    assert record.capacity == 256 and record.masked >= record.cutoff
                    assert record.after_cutoff + record.masked <= record.capacity
                else:
                    assert record.masked is None and record.capacity is None
        final = trace.steps[-1].kv_target.after_cutoff
        assert final in (len(trace.prompt.token_ids) + len(trace.output.token_ids) - 1,
                         len(trace.prompt.token_ids) + len(trace.output.token_ids))


def test_either_cache_records_the_same_lengths(runs):
    """One greedy run drafts, keeps and cuts the same tokens on either cache, so every length matches."""
    def lengths(trace: Trace) -> list[tuple]:
        return [(kv.before, kv.after_forward, kv.cutoff, kv.after_cutoff)
                for step in trace.steps for kv in (step.kv_target, step.kv_draft)]
    for static, dynamic in zip(runs["static"].traces, runs["dynamic"].traces, strict=True):
        assert static.output.token_ids == dynamic.output.token_ids
        assert lengths(static) == lengths(dynamic)


def test_a_sliding_window_run_reaches_the_window():
    """The matrix's windowed runs end at the window's edge (so a layer that slid, or a counter
    that drifted with each cut, would show), and the static cache refuses a forward past it."""
    pair = tiny_pair(ARCHITECTURES["mistral-window-16"])
    prompt_ids = pair.encode_prompt(PROMPTS[0])
    assert len(prompt_ids) + new_tokens(pair, PROMPTS[0]) == 16
    kv = StaticKV(pair.target, capacity=256)
    kv.move_pointer(14)
    assert kv.room(2) and not kv.room(3)


def test_a_model_with_layers_a_pointer_cannot_roll_back_is_refused_in_one_sentence():
    config = Qwen3NextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                             num_key_value_heads=2, **SHAPE)
    model = AutoModelForCausalLM.from_config(config)
    reason = static_cache_refusal(model)
    assert reason == ("the static cache cannot hold qwen3_next's LinearAttentionLayer layers (state a write pointer "
                      "cannot roll back): use the dynamic cache")
    with pytest.raises(ValueError, match="LinearAttentionLayer"):
        StaticKV(model, capacity=256)
    assert all(static_cache_refusal(tiny_pair(config).target) is None for config in ARCHITECTURES.values())
