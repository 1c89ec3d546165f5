"""ModelPair: a loaded draft/target pair with the one tokenizer they share.

`load_pair` (engine/loading/models.py) builds it; the engine, drafters and the trace
recorder read it. The target's tokenizer is used for everything, which is safe
because loading refuses pairs whose tokenizers disagree on any token id both
define.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.decode.adaptive import DrafterCosts
from engine.device_costs import DeviceCosts
from engine.runtime.kernel_names import ONEDNN_PREPACKED
from engine.runtime.static_runner import PoolSettings, RunnerPool

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

SLIDING_LAYERS = ("sliding_attention", "hybrid_sliding", "reference_sliding_attention")   # transformers' layer types


@dataclass
class ModelPair:
    """A target model, an optional draft model and the shared tokenizer, ready for inference."""

    target: "PreTrainedModel"
    draft: "PreTrainedModel | None"       # None for n-gram-only pairs
    tokenizer: "PreTrainedTokenizerBase"  # the target's tokenizer, used for everything
    target_name: str                      # what was loaded: preset model, hub id or path
    draft_name: str                       # NGRAM_DRAFTER ("ngram") when draft is None
    device: "torch.device"
    target_dtype: str                     # "float32" | "bfloat16" | "float16"
    draft_dtype: str                      # the same, or "int8" (quantized draft); "" when draft is None
    preset: str | None                    # preset name, None for custom pairs
    default_drafter: str                  # one of engine.config.DRAFTERS
    target_kernel: str = "stock"          # engine/runtime/kernel_names.py: what runs the target's linear layers
    draft_kernel: str = ""                # the same for the draft model; "" when draft is None
    shared_token_ids: int | None = None   # ids both tokenizers define, when their lengths differ (else None)
    step_costs: DrafterCosts = field(default_factory=DrafterCosts, compare=False)   # adaptive k's, per drafter
    # static caches (engine/runtime/static_runner.py): what each model's runners capture, and the pools,
    # made on first use (at load on CUDA, where their graphs are captured then)
    pool_settings: dict[str, PoolSettings] = field(default_factory=dict, compare=False, repr=False)
    static_pools: dict[str, RunnerPool] = field(default_factory=dict, compare=False, repr=False)
    device_costs: DeviceCosts | None = field(default=None, compare=False)   # measured at load on a GPU
    _token_texts: dict[int, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def runner_pool(self, role: str) -> RunnerPool:
        """The static-cache runners of the "target" or the "draft" model."""
        if role not in self.static_pools:
            model = self.target if role == "target" else self.draft
            if model is None:
                raise ValueError(f"the {self.target_name} pair has no draft model")
            self.static_pools[role] = RunnerPool(model, self.pool_settings.get(role, PoolSettings()))
        return self.static_pools[role]

    @property
    def prepacked(self) -> bool:
        """The target's linear layers run on oneDNN-prepacked weights (the CPU's fast verify kernel)."""
        return self.target_kernel == ONEDNN_PREPACKED

    @property
    def vocab_size(self) -> int:
        """The shared vocabulary: ids below it exist in both output heads and, when the two
        tokenizers differ in length (a GGUF tokenizer lists its padding rows, a Hub one does not),
        in both tokenizers. Every logit row is cut to `[..., :vocab_size]`, which masks the ids
        past it for both models alike, as transformers' assisted generation does."""
        widths = [_logit_width(self.target)]
        if self.draft is not None:
            widths.append(_logit_width(self.draft))
        if self.shared_token_ids is not None:
            widths.append(self.shared_token_ids)
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
        """Longest sequence (prompt + generated) both models support."""
        return self.context_limit().num_tokens

    def context_limit(self, with_draft: bool = True) -> ContextLimit:
        """The tightest limit on prompt + generated tokens among the models a run uses."""
        limits = [model_context_limit(self.target, f"target {self.target_name}")]
        if with_draft and self.draft is not None:
            limits.append(model_context_limit(self.draft, f"draft {self.draft_name}"))
        return min(limits, key=lambda limit: limit.num_tokens)

    def check_fits(self, prompt_ids: list[int], max_new_tokens: int, with_draft: bool = True) -> None:
        """ValueError unless a run of `prompt_ids` plus `max_new_tokens` fits both models: every id
        inside the shared vocabulary, and the whole sequence inside each model's context limit.
        The verify overhang needs no room of its own: k shrinks so that the k drafts never pass
        the last position the token budget can fill (engine/decode/generation.py)."""
        outside = next((token_id for token_id in prompt_ids if token_id >= self.vocab_size), None)
        if outside is not None:
            raise ValueError(f"the prompt holds token {self.token_text(outside)!r} (id {outside}), past the "
                             f"{self.vocab_size} token ids both models share: leave it out of the prompt")
        limit = self.context_limit(with_draft)
        if len(prompt_ids) + max_new_tokens > limit.num_tokens:
            raise ValueError(f"the prompt is {len(prompt_ids)} tokens; with {max_new_tokens} new tokens that exceeds "
                             f"the {limit.model}'s {limit.reason}: shorten the prompt or ask for fewer new tokens")

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


@dataclass(frozen=True)
class ContextLimit:
    """How many tokens (prompt + generated) one model can take, and why."""

    num_tokens: int
    model: str        # e.g. "draft Qwen/Qwen2.5-0.5B-Instruct"
    reason: str       # e.g. "context of 32768 tokens"


def model_context_limit(model: "PreTrainedModel", name: str) -> ContextLimit:
    """The model's position limit, or its sliding (or chunked) attention window when smaller.

    A window is only safe while the whole sequence fits in it: past it transformers' cache
    keeps only the last positions, and a speculative step could no longer roll rejected
    drafts back (nor would target-only decoding attend to the same keys)."""
    config = model.config.get_text_config(decoder=True)
    positions = int(config.max_position_embeddings)
    window = _attention_window(config)
    if window is not None and window < positions:
        return ContextLimit(window, name, f"sliding attention window of {window} tokens (speculative decoding "
                                          "cannot roll back a cache that has started to slide)")
    return ContextLimit(positions, name, f"context of {positions} tokens")


def _attention_window(config: Any) -> int | None:
    """The smallest sliding or chunked attention window among the layers, read as transformers'
    DynamicCache reads it (explicit `layer_types`, else `sliding_window` / `attention_chunk_size`;
    Qwen2's config clears `sliding_window` itself when `use_sliding_window` is false)."""
    sliding, chunked = getattr(config, "sliding_window", None), getattr(config, "attention_chunk_size", None)
    layer_types = getattr(config, "layer_types", None)
    if layer_types is None:
        windows = [sliding if sliding is not None else chunked]
    else:
        windows = [sliding if kind in SLIDING_LAYERS else chunked if kind == "chunked_attention" else None
                   for kind in layer_types]
    return min((int(window) for window in windows if window is not None), default=None)


def _logit_width(model: "PreTrainedModel") -> int:
    head = model.get_output_embeddings()
    if head is not None and isinstance(getattr(head, "out_features", None), int):   # plain, prepacked or int8 linear
        return head.out_features
    if head is not None and getattr(head, "weight", None) is not None:
        return int(head.weight.shape[0])
    return int(model.config.vocab_size)
