"""Draft and target must speak one vocabulary: the checks `load_pair` runs on both tokenizers
before any weights load, and on the loaded pair's end-of-sequence tokens."""

from __future__ import annotations

import re

from transformers import PreTrainedTokenizerBase

from engine.decode.pair import ModelPair
from engine.presets import ModelLoadError

GGUF_PADDING = re.compile(r"\[PAD\d+\]")     # llama.cpp's name for an embedding row no token uses


def check_same_vocabulary(draft_tokenizer: PreTrainedTokenizerBase,
                          target_tokenizer: PreTrainedTokenizerBase) -> int | None:
    """Refuse tokenizers unless they map every id both define to the same token, and every id
    only one defines is a padding placeholder; return how many ids both define when that
    differs (ModelPair.shared_token_ids), else None.

    A GGUF file names its embedding table's padding rows "[PAD<id>]" (llama.cpp), so a GGUF
    tokenizer of Qwen2.5 has 151936 entries where the Hub one stops at 151665; the ids past the
    shorter one are left out of the shared vocabulary (`ModelPair.vocab_size`)."""
    draft_tokens, target_tokens = _by_id(draft_tokenizer), _by_id(target_tokenizer)
    shared = min(len(draft_tokens), len(target_tokens))
    if any(token is not None and not GGUF_PADDING.fullmatch(token)
           for token in draft_tokens[shared:] + target_tokens[shared:]):
        raise ModelLoadError(f"draft vocabulary has {len(draft_tokenizer)} tokens but target has "
                             f"{len(target_tokenizer)}: speculative decoding needs the same tokenizer")
    differing = next((index for index in range(shared) if draft_tokens[index] != target_tokens[index]), None)
    if differing is not None:
        raise ModelLoadError(f"draft and target vocabularies map them differently: token id {differing} is "
                             f"{draft_tokens[differing]!r} for the draft but {target_tokens[differing]!r} for the "
                             "target; speculative decoding needs the same tokenizer")
    return shared if len(draft_tokens) != len(target_tokens) else None


def check_end_tokens(pair: ModelPair) -> None:
    """Refuse a pair whose end-of-sequence tokens lie past the shared vocabulary: it could never stop."""
    outside = sorted(token_id for token_id in pair.eos_token_ids if token_id >= pair.vocab_size)
    if outside:
        raise ModelLoadError(f"the end-of-sequence token id {outside[0]} lies past the {pair.vocab_size} token ids "
                             "draft and target share: speculative decoding needs the same tokenizer")


def _by_id(tokenizer: PreTrainedTokenizerBase) -> list[str | None]:
    """Token text by id from 0 to the largest id (None for an unused id)."""
    vocab = tokenizer.get_vocab()
    tokens: list[str | None] = [None] * (max(vocab.values(), default=-1) + 1)
    for token, index in vocab.items():
        tokens[index] = token
    return tokens
