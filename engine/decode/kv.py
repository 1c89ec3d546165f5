"""One model's KV cache and its length bookkeeping; every rollback goes through here.

Two kinds (docs/architecture.md §7, `SpecConfig.cache`): a *dynamic* cache (transformers'
`DynamicCache`) grows with each forward and a cut frees the rows (`crop(-n)` removes n); a
*static* cache (engine/runtime/static_cache.py) is sized once and a cut moves its write
pointer back: the rows stay in memory, masked, until the next forward overwrites them, and
its forwards can replay CUDA graphs (engine/runtime/static_runner.py). The step's numbers are
the same for both; the record says which happened.

`num_committed` counts the committed tokens this cache has dealt with (fed, or in
lab mode deliberately skipped), and only `commit` advances it; `num_stale` counts the positions it holds that are
no committed text (rejected drafts the lab modes keep, zero-filled or not). A verified token
tree's accepted rows are first gathered into place (`gather`), and `lengths()` writes what
happened into the step's record.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel

from engine.config import CUTOFF_MODES
from engine.records import CacheLengths
from engine.runtime.cuda.attention import pinned_attention
from engine.runtime.static_runner import RunnerPool

TokenIds = list[int] | torch.Tensor        # host ids, or ids already on the model's device (a chosen draft token)


@dataclass
class ForwardResult:
    logits: torch.Tensor              # (n, V) float32 logits of the last n fed positions
    length_before: int
    length_after: int


class KVCache:
    """Wraps a model and its cache, dynamic or static: feed tokens, read logits, cut positions."""

    def __init__(self, model: PreTrainedModel, vocab_size: int | None = None, pool: RunnerPool | None = None,
                 rows: int = 0):
        """A dynamic cache, or with `pool` a static one: a runner with room for `rows` rows, lent for as
        long as this cache lives (or until `release`)."""
        self.model = model
        self.vocab_size = vocab_size      # logits are cut to this width (padded embedding rows dropped)
        self.lease = pool.lend(self, rows) if pool is not None else None
        self.cache = DynamicCache(config=model.config) if self.lease is None else self.lease.runner.kv.cache
        self._num_committed = 0
        self.num_stale = 0                # positions holding no committed text (lab modes only)

    @property
    def is_static(self) -> bool:
        return self.lease is not None

    def release(self) -> None:
        """The run is over: a static cache's runner goes back to its pool for the next run."""
        if self.lease is not None:
            self.lease.end()

    @property
    def num_committed(self) -> int:
        """How many tokens of the committed text, from the start, this cache has dealt with."""
        return self._num_committed

    @property
    def length(self) -> int:
        """Rows that hold the cache's text: the write pointer of a static cache (a host copy, no sync)."""
        return self.lease.runner.kv.length if self.lease is not None else self.cache.get_seq_length()

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the model's hidden states (an additive attention mask must match it)."""
        return self.model.get_input_embeddings().weight.dtype

    def forward(self, token_ids: TokenIds, num_logits: int, position_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> ForwardResult:
        """Feed token_ids (appending their keys/values) and return the last num_logits logits.

        `token_ids` may already be on the device (a token the draft just chose: it is fed without
        a round trip through the host). A token tree passes its own `position_ids` (1, T) and a 4D
        additive `attention_mask` (1, 1, T, length after the forward), engine/decode/tree/mask.py;
        a chain passes neither (causal attention at the next positions)."""
        before = self.length
        if isinstance(token_ids, torch.Tensor):
            input_ids = token_ids.view(1, -1)                                               # (1, T)
        else:
            input_ids = torch.tensor([token_ids], dtype=torch.long, device=self.device)     # (1, T)
        if self.lease is not None:
            if not self.lease.is_active:
                raise RuntimeError("this run has ended: its static cache went back to the pool for the next run")
            rows = self.lease.runner.forward(input_ids, num_logits, position_ids, attention_mask)
        else:
            extra = {} if position_ids is None else {"position_ids": position_ids, "attention_mask": attention_mask}
            with pinned_attention(self.device):
                rows = self.model(input_ids=input_ids, past_key_values=self.cache, use_cache=True,
                                  logits_to_keep=num_logits, **extra).logits[0]
        # a copy in float32: a graph's output buffer is overwritten by its next replay
        logits = rows[-num_logits:, :self.vocab_size].to(torch.float32, copy=True)            # (num_logits, V)
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
            self._remove(num_tokens)
            return num_tokens
        if mode == "zero_fill":
            end = self.length
            for layer in self.cache.layers:
                layer.keys[..., end - num_tokens:end, :].zero_()           # (1, heads, num_tokens, head_dim)
                layer.values[..., end - num_tokens:end, :].zero_()
        self.num_stale += num_tokens
        return 0

    def _remove(self, num_tokens: int) -> None:
        """Drop the last num_tokens rows: a dynamic cache frees them, a static one moves its pointer
        back over them (they stay in memory, masked, until overwritten)."""
        if self.lease is not None:
            self.lease.runner.kv.move_pointer(self.length - num_tokens)
        else:
            self.cache.crop(-num_tokens)

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
            self._remove(removed)
        return removed

    def lengths(self, before: int, after_forward: int, removed: int) -> CacheLengths:
        """This step's record of the cache, taken after its cutoff; a static cache adds its capacity
        and the rows past its pointer that still hold cut tokens."""
        if self.lease is None:
            return CacheLengths(before, after_forward, removed, self.length, self.num_stale)
        kv = self.lease.runner.kv
        return CacheLengths(before, after_forward, removed, self.length, self.num_stale, masked=kv.num_masked,
                            capacity=kv.capacity)

    def key_values(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values) of the rows that hold text, each (1, heads, length, head_dim); for
        invariant checks."""
        if self.lease is not None:
            return self.lease.runner.kv.key_values()
        return [(layer.keys, layer.values) for layer in self.cache.layers]

