"""One model's KV cache and its length bookkeeping; every rollback goes through here.

`num_committed` counts the committed tokens this cache has dealt with (fed, or in
lab mode deliberately skipped), and only `commit` advances it; `num_stale` counts the positions it holds that are
no committed text (rejected drafts the lab modes keep, zero-filled or not). Rejected
positions are removed for real (transformers 5.x: `DynamicCache.crop(-n)` removes n
tokens), and `lengths()` writes what happened into the step's record.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from engine.config import CUTOFF_MODES
from engine.records import CacheLengths


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
        self._num_committed = 0
        self.num_stale = 0                # positions holding no committed text (lab modes only)

    @property
    def num_committed(self) -> int:
        """How many tokens of the committed text, from the start, this cache has dealt with."""
        return self._num_committed

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

    def commit(self, num_tokens: int) -> None:
        """Count the next num_tokens committed tokens as dealt with: fed through `forward` (and
        not cut off), or in lab mode skipped on purpose. The one place num_committed moves."""
        self._num_committed += num_tokens

    def cutoff(self, num_tokens: int, mode: str = "truncate") -> int:
        """Retire the last num_tokens positions (drafts the committed text does not keep) and
        return how many were removed: all of them under "truncate". The lab modes remove none
        and count them as stale: "none" keeps them as they are, "zero_fill" zeroes their keys
        and values in place (lab problem C)."""
        if mode not in CUTOFF_MODES:
            raise ValueError(f"unknown cutoff mode {mode!r}")
        if num_tokens <= 0:
            return 0
        if mode == "truncate":
            self.cache.crop(-num_tokens)
            return num_tokens
        if mode == "zero_fill":
            for layer in self.cache.layers:
                layer.keys[..., -num_tokens:, :].zero_()                   # (1, heads, num_tokens, head_dim)
                layer.values[..., -num_tokens:, :].zero_()
        self.num_stale += num_tokens
        return 0

    def lengths(self, before: int, after_forward: int, removed: int) -> CacheLengths:
        """This step's record of the cache, taken after its cutoff."""
        return CacheLengths(before, after_forward, removed, self.length, self.num_stale)

    def key_values(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values), each (1, heads, length, head_dim); for invariant checks."""
        return [(layer.keys, layer.values) for layer in self.cache.layers]

