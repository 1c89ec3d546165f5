"""One model's KV cache and its length bookkeeping; every rollback goes through here.

`num_committed` counts the committed tokens this cache has dealt with (fed, or in
lab mode deliberately skipped), and only `commit` advances it; `num_stale` counts the positions it holds that are
no committed text (rejected drafts the lab modes keep, zero-filled or not). Rejected
positions are removed for real (transformers 5.x: `DynamicCache.crop(-n)` removes n
tokens; a verified token tree's accepted rows are first gathered into place, `gather`), and
`lengths()` writes what happened into the step's record.
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


def wait_for(tensor: torch.Tensor) -> None:
    """Block until the device has computed `tensor` (CUDA and MPS run asynchronously: time the
    work, not the launch)."""
    if tensor.device.type == "cuda":
        torch.cuda.synchronize(tensor.device)
    elif tensor.device.type == "mps":
        torch.mps.synchronize()


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

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the model's hidden states (an additive attention mask must match it)."""
        return self.model.get_input_embeddings().weight.dtype

    def forward(self, token_ids: list[int], num_logits: int, position_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> ForwardResult:
        """Feed token_ids (appending their keys/values) and return the last num_logits logits.

        A token tree passes its own `position_ids` (1, T) and a 4D additive `attention_mask`
        (1, 1, T, length after the forward), engine/decode/tree/mask.py; a chain passes neither
        (causal attention at the next positions)."""
        before = self.length
        input_ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)        # (1, T)
        extra = {} if position_ids is None else {"position_ids": position_ids, "attention_mask": attention_mask}
        output = self.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                            logits_to_keep=num_logits, **extra)
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

    def gather(self, start: int, kept: list[int]) -> int:
        """Keep, of the positions from `start` on, only those at `start + kept[i]` (ascending offsets),
        moved to `start + i`, and remove the rest; return how many were removed. A verified token
        tree's accepted path lies scattered among the rejected nodes: its rows are copied into place
        (their keys were computed at the positions they now hold), then the tail is cropped."""
        tail = self.length - start
        if any(later <= earlier for earlier, later in zip(kept, kept[1:])) or (kept and not 0 <= kept[0] <= kept[-1] < tail):
            raise ValueError(f"gather needs ascending offsets below {tail}, got {kept}")
        if kept != list(range(len(kept))):
            index = torch.tensor(kept, dtype=torch.long, device=self.device) + start
            for layer in self.cache.layers:
                layer.keys[..., start:start + len(kept), :] = layer.keys.index_select(-2, index)   # (1, heads, n, head_dim)
                layer.values[..., start:start + len(kept), :] = layer.values.index_select(-2, index)
        removed = tail - len(kept)
        if removed > 0:
            self.cache.crop(-removed)
        return removed

    def lengths(self, before: int, after_forward: int, removed: int) -> CacheLengths:
        """This step's record of the cache, taken after its cutoff."""
        return CacheLengths(before, after_forward, removed, self.length, self.num_stale)

    def key_values(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values), each (1, heads, length, head_dim); for invariant checks."""
        return [(layer.keys, layer.values) for layer in self.cache.layers]

