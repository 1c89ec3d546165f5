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

Every model the dynamic path loads (docs/architecture.md §7, "Which models"): the buffers take
their shapes from the first forward's keys and values (transformers' lazy initialization), so
no config field is assumed (GPT-2's config has no `num_key_value_heads`; Gemma's head_dim is
not hidden_size / heads). A sliding-window (or chunked) layer gets a full-size layer like the
others: transformers' `StaticSlidingWindowLayer` keeps `min(window, capacity)` rows and a host
counter (`cumulative_length_int`) that a pointer moved back never rewinds, so run after run it
drifts until the layer "slides" on rows that were cut. A run never passes the window
(`ModelPair.context_limit` refuses it), and inside the window sliding attention is full
attention, so one pointer and one mask serve every layer; `room` refuses a forward past the
window. Layers that keep other state (linear attention, an indexer) are refused with the reason.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, StaticCache
from transformers.cache_utils import StaticLayer, StaticSlidingWindowLayer

from engine.presets import first_line

SERVED_LAYERS = (StaticLayer, StaticSlidingWindowLayer)     # exact types: a subclass keeps state of its own


class StaticKV:
    """One model's fixed key/value buffers and the pointer that says how many rows are valid.

    `length` is the host's copy of the pointer (the device counters always equal it), so
    reading it costs no sync. `written` is the highest row any forward has written: rows in
    [length, written) hold keys and values of tokens the text no longer has (cut drafts),
    masked until overwritten."""

    def __init__(self, model: PreTrainedModel, capacity: int):
        refusal = static_cache_refusal(model)
        if refusal is not None:
            raise ValueError(refusal)
        self.capacity = capacity
        self.device = model.device
        self.dtype = model.get_input_embeddings().weight.dtype
        self.window = attention_window(model)
        with torch.inference_mode():        # the counters are updated in inference mode: make them there
            self.cache = StaticCache(config=model.config, max_cache_len=capacity)
            self.cache.layers = [StaticLayer(max_cache_len=capacity) for _ in self.cache.layers]   # see the docstring
            self.columns = torch.arange(capacity, device=self.device)                 # (capacity,)
            self.pointers = torch.zeros(len(self.cache.layers), dtype=torch.long, device=self.device)
            for index, layer in enumerate(self.cache.layers):   # each layer advances its own element in place
                layer.cumulative_length = self.pointers[index]  # (its lazy initialization keeps this tensor)
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

    @property
    def limit(self) -> int:
        """The most rows a run may hold: the capacity, or the model's attention window if smaller."""
        return min(self.capacity, self.window or self.capacity)

    def room(self, rows: int) -> bool:
        """Whether `rows` more rows fit after the pointer (and inside the model's attention window)."""
        return self.length + rows <= self.limit

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


def static_cache_refusal(model: PreTrainedModel) -> str | None:
    """Why `model` cannot run on a static cache (one sentence naming its layers), or None: every
    layer must be one transformers builds as plain or sliding-window attention."""
    try:
        layers = StaticCache(config=model.config, max_cache_len=1).layers  # lazy: nothing allocated
    except (ValueError, KeyError, TypeError) as error:                       # a layer kind it has no static form for
        return f"transformers builds no static cache for {model.config.model_type} ({first_line(error)}): use the dynamic cache"
    others = sorted({type(layer).__name__ for layer in layers if type(layer) not in SERVED_LAYERS})
    if not others:
        return None
    return (f"the static cache cannot hold {model.config.model_type}'s {', '.join(others)} layers (state a write "
            "pointer cannot roll back): use the dynamic cache")


def attention_window(model: PreTrainedModel) -> int | None:
    """The smallest sliding or chunked attention window among the model's layers, None if none."""
    layers = StaticCache(config=model.config, max_cache_len=2**62).layers
    windows = [layer.max_cache_len for layer in layers if isinstance(layer, StaticSlidingWindowLayer)]
    return min(windows, default=None)


def additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """bool -> additive float mask: 0 where allowed, the dtype's minimum elsewhere."""
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed,
                                                                                        torch.finfo(dtype).min)
