"""One model's KV cache and its length bookkeeping; every rollback goes through here.

`num_committed` counts the committed tokens this cache has dealt with (fed, or in
lab mode deliberately skipped); the physical `length` can differ from it only in
lab modes that keep stale positions. Rejected positions are removed for real
(transformers 5.x: `DynamicCache.crop(-n)` removes n tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel


@dataclass
class ForwardResult:
    logits: torch.Tensor              # (n, V) float32 logits of the last n fed positions
    length_before: int
    length_after: int


class KVCache:
    """Wraps a model and its DynamicCache: feed tokens, read logits, cut positions."""

    def __init__(self, model: PreTrainedModel, vocab_size: int | None = None):
        self.model = model
        self.vocab_size = vocab_size      # logits are cut to this width (padded embedding rows dropped)
        self.cache = DynamicCache(config=model.config)
        self.num_committed = 0

    @property
    def length(self) -> int:
        return self.cache.get_seq_length()

    @property
    def device(self) -> torch.device:
        return self.model.device

    def forward(self, token_ids: list[int], num_logits: int) -> ForwardResult:
        """Feed token_ids (appending their keys/values) and return the last num_logits logits."""
        before = self.length
        input_ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)        # (1, T)
        output = self.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                            logits_to_keep=num_logits)
        logits = output.logits[0, -num_logits:, :self.vocab_size].float()                  # (num_logits, V)
        return ForwardResult(logits, before, self.length)

    def cutoff(self, num_tokens: int, mode: str = "truncate") -> None:
        """Drop the last num_tokens positions. Lab modes: "none" keeps them, "zero_fill"
        zeroes their keys and values in place (lab problem C) so the length never shrinks."""
        if num_tokens <= 0 or mode == "none":
            return
        if mode == "truncate":
            self.cache.crop(-num_tokens)
            return
        for layer in self.cache.layers:
            layer.keys[..., -num_tokens:, :].zero_()
            layer.values[..., -num_tokens:, :].zero_()

    def key_values(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values), each (1, heads, length, head_dim); for invariant checks."""
        return [(layer.keys, layer.values) for layer in self.cache.layers]

