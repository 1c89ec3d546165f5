"""ModelPair: a loaded draft/target pair with the one tokenizer they share.

`load_pair` (engine/models.py) builds it; the engine, drafters and the trace
recorder read it. The target's tokenizer is used for everything, which is safe
because loading refuses pairs whose vocabularies differ. This module imports no
torch at run time, so the torch-free modules of the loading layer (presets,
weights) can raise `ModelLoadError` too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.adaptive import StepCosts

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class ModelLoadError(ValueError):
    """A model could not be loaded; the message is one readable sentence for the user."""


@dataclass
class ModelPair:
    """A target model, an optional draft model and the shared tokenizer, ready for inference."""

    target: "PreTrainedModel"
    draft: "PreTrainedModel | None"       # None for n-gram-only pairs
    tokenizer: "PreTrainedTokenizerBase"  # the target's tokenizer, used for everything
    target_name: str                      # what was loaded: preset model, hub id or path
    draft_name: str                       # "ngram" when draft is None
    device: "torch.device"
    target_dtype: str                     # "float32" | "bfloat16" | "float16"
    draft_dtype: str                      # the same, or "int8" (quantized draft); "" when draft is None
    preset: str | None                    # preset name, None for custom pairs
    default_drafter: str                  # "model" | "ngram"
    prepacked: bool = False               # the target's linear layers hold oneDNN-prepacked weights (CPU)
    step_costs: StepCosts = field(default_factory=StepCosts, compare=False)   # measured by adaptive k, shared
    _token_texts: dict[int, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def has_draft_model(self) -> bool:
        return self.draft is not None

    @property
    def vocab_size(self) -> int:
        """Logit width both models share. Embedding matrices may be padded past the
        tokenizer (Qwen: 151936 rows); slice logits to `[..., :vocab_size]` if widths differ."""
        widths = [_logit_width(self.target)]
        if self.draft is not None:
            widths.append(_logit_width(self.draft))
        return min(widths)

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Every id that ends generation: the tokenizer's EOS plus the target's generation_config EOS."""
        ids: set[int] = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        generation_config = getattr(self.target, "generation_config", None)
        configured = getattr(generation_config, "eos_token_id", None)
        if isinstance(configured, int):
            ids.add(configured)
        elif isinstance(configured, Iterable):
            ids.update(int(token_id) for token_id in configured)
        return frozenset(ids)

    @property
    def max_context(self) -> int:
        """Longest sequence (prompt + generated) the target supports."""
        return int(self.target.config.max_position_embeddings)

    def encode_prompt(self, text: str, raw: bool = False) -> list[int]:
        """Token ids for a user prompt: through the chat template (with the assistant turn
        opened) when the tokenizer has one and `raw` is False, else plain encoding."""
        if not raw and self.tokenizer.chat_template:
            rendered = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
            return list(self.tokenizer.encode(rendered, add_special_tokens=False))
        return list(self.tokenizer.encode(text))

    def token_text(self, token_id: int) -> str:
        """Decoded text of one token (special tokens kept), cached for the trace."""
        text = self._token_texts.get(token_id)
        if text is None:
            text = self.tokenizer.decode([token_id], skip_special_tokens=False, clean_up_tokenization_spaces=False)
            self._token_texts[token_id] = text
        return text

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        """Text of a token sequence; special tokens (BOS, EOS, chat markers) dropped by default."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens,
                                     clean_up_tokenization_spaces=False)


def _logit_width(model: "PreTrainedModel") -> int:
    head = model.get_output_embeddings()
    if head is not None and isinstance(getattr(head, "out_features", None), int):   # plain, prepacked or int8 linear
        return head.out_features
    if head is not None and getattr(head, "weight", None) is not None:
        return int(head.weight.shape[0])
    return int(model.config.vocab_size)
