"""What a pair can run: the shared vocabulary (output heads and tokenizers of different sizes),
both models' context limits, and sliding attention windows, each checked once before a run."""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast,
                          Qwen2Config)

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.decode.pair import ModelPair, model_context_limit
from engine.loading.models import load_pair
from engine.loading.vocabulary import check_same_vocabulary
from engine.loading.tiny import ASCII_CHARACTERS, build_tiny_pair, build_tiny_tokenizer
from engine.presets import ModelLoadError

PROMPTS = ["def fib(n):", "Hello, world", "1 2 3 4"]
PADDING = [f"[PAD{index}]" for index in range(101, 202)]   # how a GGUF tokenizer names unused embedding rows


def greedy_ids(engine: SpeculativeEngine, prompt: str, config: SpecConfig) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(speculative output, target-only output) of one greedy run."""
    trace = engine.generate(prompt, config)
    return trace.output.token_ids, engine.target_only(trace).token_ids


# --- vocabulary -------------------------------------------------------------------------------------

def pad_vocabulary(model: LlamaForCausalLM, rows: int) -> None:
    """Grow the embedding table and output head by `rows`, each new output row three times an
    existing one: unmasked, the model would always pick a padding id over the real token."""
    size = model.config.vocab_size
    with torch.random.fork_rng(devices=[]):
        model.resize_token_embeddings(size + rows, mean_resizing=False)
    with torch.no_grad():
        model.lm_head.weight[size:] = 3.0 * model.lm_head.weight[:rows]
        model.get_input_embeddings().weight[size:] = model.get_input_embeddings().weight[:rows]


@pytest.mark.parametrize("side", ["draft", "target"])
def test_output_heads_of_different_sizes_run_on_the_shared_vocabulary(side):
    reference = SpeculativeEngine(build_tiny_pair(seed=0))
    pair = build_tiny_pair(seed=0)
    pad_vocabulary(getattr(pair, side), rows=40)
    engine = SpeculativeEngine(pair)
    assert pair.vocab_size == len(pair.tokenizer) == 101
    for prompt in PROMPTS:
        config = SpecConfig(k=4, max_new_tokens=24)
        output, target_only = greedy_ids(engine, prompt, config)
        assert output == target_only == reference.target_only(reference.generate(prompt, config)).token_ids


def gguf_like_tokenizer(padded_to: int) -> PreTrainedTokenizerFast:
    """The tiny tokenizer with GGUF's padding placeholders "[PAD101]"... up to `padded_to` ids."""
    tokenizer = build_tiny_tokenizer()
    tokenizer.add_tokens(PADDING[:padded_to - len(tokenizer)])
    return tokenizer


def save(folder: Path, model: LlamaForCausalLM, tokenizer: PreTrainedTokenizerFast) -> str:
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def test_tokenizers_of_different_lengths_share_the_ids_both_define(tmp_path):
    """A GGUF tokenizer lists the table's padding rows (151936 for Qwen2.5), a Hub one stops at
    151665: both define the same tokens below that, so the pair runs with the rest masked."""
    draft, target = build_tiny_pair(seed=1), build_tiny_pair(seed=2)
    for model in (draft.target, target.target):                  # both tables 202 rows, both keen on the last 101
        pad_vocabulary(model, rows=101)
    longer = gguf_like_tokenizer(202)
    assert check_same_vocabulary(draft.tokenizer, longer) == check_same_vocabulary(longer, draft.tokenizer) == 101
    pair = load_pair(draft=save(tmp_path / "draft", draft.target, draft.tokenizer),
                     target=save(tmp_path / "target", target.target, longer), draft_dtype="float32")
    assert pair.shared_token_ids == 101 and pair.vocab_size == 101 and len(pair.tokenizer) == 202
    engine = SpeculativeEngine(pair)
    for prompt in PROMPTS[:2]:
        output, target_only = greedy_ids(engine, prompt, SpecConfig(k=4, max_new_tokens=16))
        assert output == target_only and max(output) < 101
    with pytest.raises(ValueError, match=r"the prompt holds token '\[PAD150\]' \(id 150\), past the 101 token ids "
                                         r"both models share"):
        engine.start("[PAD150]", SpecConfig())


def test_tokenizers_that_really_differ_are_refused():
    with pytest.raises(ModelLoadError, match="draft vocabulary has 6 tokens but target has 101: speculative "
                                             "decoding needs the same tokenizer"):
        check_same_vocabulary(build_tiny_tokenizer("ab"), build_tiny_tokenizer(ASCII_CHARACTERS))   # 'a' at 4 in both
    with pytest.raises(ModelLoadError, match="map them differently: token id 4 is 'a' for the draft but 'b' for "
                                             "the target"):
        check_same_vocabulary(build_tiny_tokenizer("ab"), build_tiny_tokenizer("ba"))
    with pytest.raises(ModelLoadError, match="map them differently: token id 4 is '0' for the draft but 'x' for"):
        check_same_vocabulary(gguf_like_tokenizer(120), build_tiny_tokenizer("x" + ASCII_CHARACTERS))
    assert check_same_vocabulary(build_tiny_tokenizer(), build_tiny_tokenizer()) is None


def test_an_end_token_past_the_shared_vocabulary_is_refused(tmp_path):
    draft, target = build_tiny_pair(seed=1), build_tiny_pair(seed=2)
    pad_vocabulary(target.target, rows=3)
    target.target.generation_config.eos_token_id = [2, 102]
    with pytest.raises(ModelLoadError, match="end-of-sequence token id 102 lies past the 101 token ids"):
        load_pair(draft=save(tmp_path / "draft", draft.target, draft.tokenizer),
                  target=save(tmp_path / "target", target.target, gguf_like_tokenizer(104)))


# --- context limits -----------------------------------------------------------------------------------

def set_context(model: LlamaForCausalLM, num_tokens: int) -> None:
    """Give one model (the tiny pair's two share a config object) its own position limit."""
    model.config = copy.deepcopy(model.config)
    model.config.max_position_embeddings = num_tokens


@pytest.mark.parametrize("side", ["draft", "target"])
def test_both_models_context_limits_are_checked_naming_the_model(side):
    pair = build_tiny_pair(seed=0)
    set_context(getattr(pair, side), 40)
    engine = SpeculativeEngine(pair)
    prompt = "0123456789"                                         # 11 tokens with <bos>
    assert pair.max_context == 40
    with pytest.raises(ValueError, match=rf"the prompt is 11 tokens; with 30 new tokens that exceeds the {side} "
                                         rf"tiny-random/{side}'s context of 40 tokens"):
        engine.start(prompt, SpecConfig(max_new_tokens=30))
    trace = engine.generate(prompt, SpecConfig(k=8, max_new_tokens=29))        # exactly full: k needs no room
    assert trace.summary.new_tokens == 29 or trace.steps[-1].eos
    if side == "draft":                                           # the n-gram drafter never runs the draft
        assert engine.generate(prompt, SpecConfig(drafter="ngram", max_new_tokens=30)).complete


# --- sliding attention windows ------------------------------------------------------------------------

def with_window(model: LlamaForCausalLM, window: int) -> MistralForCausalLM:
    """The same weights as a Mistral model, which is Llama with a sliding attention window."""
    llama = model.config
    config = MistralConfig(
        vocab_size=llama.vocab_size, hidden_size=llama.hidden_size, intermediate_size=llama.intermediate_size,
        num_hidden_layers=llama.num_hidden_layers, num_attention_heads=llama.num_attention_heads,
        num_key_value_heads=llama.num_key_value_heads, head_dim=llama.hidden_size // llama.num_attention_heads,
        max_position_embeddings=llama.max_position_embeddings, sliding_window=window, tie_word_embeddings=False,
        bos_token_id=llama.bos_token_id, eos_token_id=llama.eos_token_id, pad_token_id=llama.pad_token_id)
    mistral = MistralForCausalLM(config)
    mistral.load_state_dict(model.state_dict())
    mistral.generation_config.eos_token_id = config.eos_token_id
    return mistral.eval().requires_grad_(False)


WINDOW = 40


@pytest.fixture(scope="module")
def windowed():
    """(the tiny pair with full attention, the same weights with a 40-token sliding window in both models)"""
    full = build_tiny_pair(seed=0)
    sliding = build_tiny_pair(seed=0)
    sliding.target, sliding.draft = with_window(sliding.target, WINDOW), with_window(sliding.draft, WINDOW)
    return SpeculativeEngine(full), SpeculativeEngine(sliding)


def test_a_run_inside_the_sliding_window_is_full_attention(windowed):
    full, sliding = windowed
    assert sliding.pair.max_context == WINDOW and full.pair.max_context == 1024
    for prompt in PROMPTS:
        config = SpecConfig(k=6, max_new_tokens=WINDOW - len(full.pair.encode_prompt(prompt)))   # exactly full
        output, target_only = greedy_ids(sliding, prompt, config)
        assert output == target_only == greedy_ids(full, prompt, config)[1]


def test_a_run_past_the_sliding_window_is_refused_before_it_starts(windowed):
    _, sliding = windowed
    prompt = PROMPTS[0]
    too_many = WINDOW - len(sliding.pair.encode_prompt(prompt)) + 1
    with pytest.raises(ValueError, match=rf"exceeds the target tiny-random/target's sliding attention window of "
                                         rf"{WINDOW} tokens \(speculative decoding cannot roll back"):
        sliding.start(prompt, SpecConfig(max_new_tokens=too_many))


@pytest.mark.parametrize(("config", "limit"), [
    (LlamaConfig(max_position_embeddings=64), 64),
    (Qwen2Config(max_position_embeddings=64, sliding_window=16, use_sliding_window=False), 64),   # Qwen2.5 GGUF
    (Qwen2Config(max_position_embeddings=64, sliding_window=16, use_sliding_window=True, num_hidden_layers=4,
                 max_window_layers=2), 16),
    (Qwen2Config(max_position_embeddings=64, sliding_window=16, layer_types=["full_attention"] * 2,
                 num_hidden_layers=2, use_sliding_window=True), 64),            # explicit layer types win
    (MistralConfig(max_position_embeddings=64, sliding_window=16), 16),
    (MistralConfig(max_position_embeddings=64, sliding_window=None), 64),
])
def test_the_window_is_read_as_transformers_cache_reads_it(config, limit):
    assert model_context_limit(SimpleNamespace(config=config), "target t").num_tokens == limit


def test_a_pair_limit_names_the_tighter_model():
    pair: ModelPair = build_tiny_pair(seed=0)
    set_context(pair.target, 500)
    assert pair.context_limit().model == "target tiny-random/target"
    set_context(pair.draft, 300)
    assert pair.context_limit().model == "draft tiny-random/draft" and pair.max_context == 300
    assert pair.context_limit(with_draft=False).num_tokens == 500

