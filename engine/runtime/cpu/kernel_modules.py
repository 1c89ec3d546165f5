"""The replacement linear layers: a oneDNN-prepacked one, an int8 and an int4 weight-only one.

Each computes y = x W^T + b like the `nn.Linear` it replaces, on the CPU only, through
torch operators whose names start with an underscore (not covered by torch's
compatibility promise). engine/runtime/cpu/kernel_probe.py therefore runs each once at load
on a small matrix against `F.linear`; the loader uses a kernel only when its probe
agrees, and records which kernels run (engine/runtime/kernel_names.py).

- `PackedLinear` holds W reordered once into oneDNN's blocked layout
  (`torch.ops.mkldnn._reorder_linear_weight`, run by `_linear_pointwise`). Why it exists:
  engine/runtime/cpu/kernels.py. Float32 stays float32 (only the summation order differs).
- `Int8Linear` holds W as int8 with one scale per output row (symmetric, max |w| -> 127)
  and multiplies through `torch._weight_int8pack_mm` with bfloat16 activations. Weight-only
  quantization treats every input row on its own: a row's result never depends on the
  other rows of the batch (per-tensor dynamic activation scales, as torch's deprecated
  `quantized.dynamic` layers used, would make it). It is used for draft models only: the
  target decides every emitted token and always keeps its float weights.
- `Int4Linear` holds W as 4-bit integers in groups of INT4_GROUP inputs, each group with its
  own scale and offset (asymmetric: the group's min and max span 0..15), packed for
  `torch._weight_int4pack_mm_for_cpu`, bfloat16 activations, rows independent as above. It
  reads half an int8 layer's bytes and its kernel runs near the memory's speed where the int8
  one does not (issue #40; the draft's share of each token, int8 against int4 on the same
  target: docs/benchmark.md, "Where the time goes"). Draft models only, like int8: the embedded
  draft's GGUF weights are 4- and 5-bit in blocks of 32 already.
"""

from __future__ import annotations

import torch
from torch import nn

PACK_ROWS_HINT = 4          # oneDNN picks its blocking for about this many rows (1..8 all stay near one step)
INT8_LIMIT = 127            # symmetric: -127..127, so w = q * scale with scale = max |w| / 127
INT4_GROUP = 32             # inputs per int4 group: the GGUF block size of the embedded draft's weights
INT4_LEVELS = 15            # 0..15; the kernel computes w = (q - 8) * scale + offset
INT4_INNER_K_TILES = 2      # the packing's inner_k_tiles argument, the value gpt-fast passes on a CPU
INT8_FORMAT = "int8-rowwise-bf16-scales-v1"   # change it with `Int8Linear.from_weight`: saved quantizations then miss


class PackedLinear(nn.Module):
    """y = x W^T + b with W held in oneDNN's prepacked layout (no plain copy is kept)."""

    def __init__(self, in_features: int, out_features: int, packed_weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.packed_weight = packed_weight
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> "PackedLinear":
        """Pack `weight` (out x in); the caller checked that this CPU packs its dtype (kernel_probe)."""
        packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), PACK_ROWS_HINT)
        return cls(weight.shape[1], weight.shape[0], packed, None if bias is None else bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, oneDNN prepacked"


class Int8Linear(nn.Module):
    """y = x W^T + b with W as int8 rows and a scale per row (weight-only; bfloat16 activations)."""

    def __init__(self, weight_int8: torch.Tensor, scales: torch.Tensor, bias: torch.Tensor | None,
                 out_dtype: torch.dtype):
        super().__init__()
        self.in_features = weight_int8.shape[1]
        self.out_features = weight_int8.shape[0]
        self.out_dtype = out_dtype
        self.register_buffer("weight_int8", weight_int8)
        self.register_buffer("scales", scales)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> "Int8Linear":
        """Quantize `weight` (out x in) row by row: scale = max |w| / 127 (rounded to bfloat16, the
        dtype the kernel reads it in), q = round(w / scale)."""
        weight = weight.detach()
        scales = (weight.abs().amax(dim=1).float() / INT8_LIMIT).clamp_min(torch.finfo(torch.bfloat16).tiny)
        scales = scales.to(torch.bfloat16)
        quantized = torch.round(weight.float() / scales.float()[:, None]).clamp_(-INT8_LIMIT, INT8_LIMIT)
        return cls(quantized.to(torch.int8).contiguous(), scales, bias, weight.dtype)

    def dequantized_weight(self) -> torch.Tensor:
        """The weight this layer multiplies by, in float32 (what the probe compares against)."""
        return self.weight_int8.float() * self.scales.float()[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        y = torch._weight_int8pack_mm(rows, self.weight_int8, self.scales).to(self.out_dtype)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                "int8 weights per output row, bfloat16 activations")


class Int4Linear(nn.Module):
    """y = x W^T + b with W as 4-bit groups of INT4_GROUP inputs, a scale and offset each (weight-only;
    bfloat16 activations)."""

    def __init__(self, packed: torch.Tensor, scales_and_offsets: torch.Tensor, bias: torch.Tensor | None,
                 in_features: int, out_features: int, out_dtype: torch.dtype):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.out_dtype = out_dtype
        self.register_buffer("packed", packed)
        self.register_buffer("scales_and_offsets", scales_and_offsets)   # (in / group, out, 2) bfloat16
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    @staticmethod
    def fits(weight: torch.Tensor) -> bool:
        """Whether a weight (out x in) splits into whole groups and the kernel's packing takes it."""
        return weight.dim() == 2 and weight.shape[1] % INT4_GROUP == 0 and weight.shape[0] % 16 == 0

    @staticmethod
    def quantize(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The int4 law on `weight` (out x in, `fits`), group by group: scale = (max - min) / 15 (at least
        bfloat16's tiniest), offset = min + 8 scale, both rounded to bfloat16 first (the dtype the kernel
        reads them in), q = round((w - offset) / scale + 8) in 0..15. Returns (q as int32, out x in;
        scales and offsets as float32, out x groups)."""
        out_features, in_features = weight.shape
        groups = weight.detach().float().reshape(out_features, in_features // INT4_GROUP, INT4_GROUP)
        low, high = groups.amin(dim=-1), groups.amax(dim=-1)
        scales = ((high - low) / INT4_LEVELS).clamp_min(torch.finfo(torch.bfloat16).tiny).to(torch.bfloat16).float()
        offsets = (low + 8 * scales).to(torch.bfloat16).float()
        quantized = torch.round((groups - offsets[..., None]) / scales[..., None] + 8).clamp_(0, INT4_LEVELS)
        return quantized.reshape(out_features, in_features).to(torch.int32), scales, offsets

    @classmethod
    def law_weight(cls, weight: torch.Tensor) -> torch.Tensor:
        """The weight the layer built from `weight` multiplies by, by the law (not read back from the
        kernel): (q - 8) scale + offset, in float32. The probe checks the kernel against it."""
        quantized, scales, offsets = cls.quantize(weight)
        groups = quantized.float().reshape(*scales.shape, INT4_GROUP)
        return ((groups - 8) * scales[..., None] + offsets[..., None]).reshape(weight.shape)

    @classmethod
    def from_weight(cls, weight: torch.Tensor, bias: torch.Tensor | None) -> "Int4Linear":
        """Quantize `weight` (out x in, `fits`) by the law (`quantize`) and pack it for the kernel."""
        quantized, scales, offsets = cls.quantize(weight)
        packed = torch._convert_weight_to_int4pack_for_cpu(quantized, INT4_INNER_K_TILES)
        scales_and_offsets = torch.stack([scales, offsets], dim=-1).transpose(0, 1).contiguous().to(torch.bfloat16)
        return cls(packed, scales_and_offsets, bias, weight.shape[1], weight.shape[0], weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features).to(torch.bfloat16)
        y = torch._weight_int4pack_mm_for_cpu(rows, self.packed, INT4_GROUP, self.scales_and_offsets).to(self.out_dtype)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"int4 weights in groups of {INT4_GROUP} inputs with a scale and offset each, bfloat16 activations")
