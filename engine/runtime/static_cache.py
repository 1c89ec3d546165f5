"""A static KV cache with a write pointer: sized once, rolled back by moving the pointer.

gpt-fast's and vLLM's design (docs/architecture.md §7): every layer's keys and values live in
fixed buffers of `capacity` rows, a forward writes its rows at the pointer and moves it on,
and a rejection moves the pointer back instead of freeing anything. The rows past the pointer
stay in memory, hidden from attention by the mask, until the next forward overwrites them.
Fixed buffers are what lets a forward be captured once as a CUDA graph and replayed
(runtime/cuda/graphs.py): every replay reads and writes the same addresses.

The buffers are transformers' `StaticCache` (5.x), which writes at its own per-layer device
counter `cumulative_length` and ignores any position passed to it. Here every layer's counter
is a view of one shared tensor (`pointers`), so moving the pointer is one in-place `fill_`
(one kernel, no host sync) however many layers the model has. A forward is given its
own position ids and a 4D additive mask over all `capacity` columns (`causal_mask`,
`padded_mask`), so transformers builds no mask of its own: its mask code reads the device
counter on the host for some shapes, which a graph capture cannot do.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, StaticCache


class StaticKV:
    """One model's fixed key/value buffers and the pointer that says how many rows are valid.

    `length` is the host's copy of the pointer (the device counters always equal it), so
    reading it costs no sync. `written` is the highest row any forward has written: rows in
    [length, written) hold keys and values of tokens the text no longer has (cut drafts),
    masked until overwritten."""

    def __init__(self, model: PreTrainedModel, capacity: int):
        config = model.config.get_text_config(decoder=True)
        heads = config.num_key_value_heads or config.num_attention_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        self.capacity = capacity
        self.device = model.device
        self.dtype = model.get_input_embeddings().weight.dtype
        with torch.inference_mode():        # the counters are updated in inference mode: make them there
            self.cache = StaticCache(config=model.config, max_cache_len=capacity)
            self.cache.early_initialization(batch_size=1, num_heads=heads, head_dim=head_dim, dtype=self.dtype,
                                            device=self.device)
            self.columns = torch.arange(capacity, device=self.device)                 # (capacity,)
            self.pointers = torch.zeros(len(self.cache.layers), dtype=torch.long, device=self.device)
            for index, layer in enumerate(self.cache.layers):   # each layer advances its own element in place
                layer.cumulative_length = self.pointers[index]
        self.length = 0
        self.written = 0

    @property
    def layers(self) -> list:
        return self.cache.layers

    @property
    def num_masked(self) -> int:
        """Rows past the pointer that still hold cut tokens' keys and values (masked, not freed)."""
        return self.written - self.length

    def advance(self, rows: int) -> None:
        """Count `rows` just written by a forward (the device counters moved by themselves)."""
        self.length += rows
        self.written = max(self.written, self.length)

    def move_pointer(self, length: int) -> None:
        """Set the write position to `length` on every layer: the next forward writes there."""
        if not 0 <= length <= self.capacity:
            raise ValueError(f"a static cache of {self.capacity} rows has no position {length}")
        with torch.inference_mode():
            self.pointers.fill_(length)
        self.length = length

    def reset(self) -> None:
        """An empty cache for a new run: the pointer at 0 (old rows stay, masked, until overwritten)."""
        self.move_pointer(0)
        self.written = 0

    def room(self, rows: int) -> bool:
        """Whether `rows` more rows fit after the pointer."""
        return self.length + rows <= self.capacity

    def causal_mask(self, positions: torch.Tensor) -> torch.Tensor:
        """(1, T) position ids -> (1, 1, T, capacity) additive mask: row i sees the columns up to its
        position, so every row past the pointer (not yet written, or left by a cut) is hidden."""
        allowed = self.columns[None, :] <= positions[0, :, None]                          # (T, capacity)
        return additive(allowed, self.dtype)[None, None]

    def padded_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """A (1, 1, T, W) additive mask over the first W columns (a token tree's, W = length after
        the forward) widened to all `capacity` columns, the extra ones hidden."""
        rows, width = mask.shape[-2:]
        padded = torch.full((1, 1, rows, self.capacity), torch.finfo(mask.dtype).min, dtype=mask.dtype,
                            device=mask.device)
        padded[..., :width] = mask
        return padded

    def key_values(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (keys, values) of the valid rows, each (1, heads, length, head_dim)."""
        return [(layer.keys[..., :self.length, :], layer.values[..., :self.length, :]) for layer in self.layers]


def additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool -> additive float mask: 0 where allowed, the dtype's minimum elsewhere."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed,
                                                                                        torch.finfo(dtype).min)
