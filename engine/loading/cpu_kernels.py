"""Faster CPU linear layers for speculative decoding: prepacked weights and int8 drafts.

Two changes to a loaded model, both for the CPU only:

- `prepack_linear_layers` swaps every `nn.Linear` for a `PackedLinear` holding the
  same weights reordered once into oneDNN's blocked layout. Stock float32
  `F.linear` (MKL) handles a few rows in panels of three, re-reading the whole
  weight matrix per panel, so a forward's cost grows with each further panel of
  tokens. Verifying k drafts feeds k + 1 tokens, so a verify at a useful k costs
  more than one target step. With prepacked weights a verify over a few rows costs
  about one step, which is what the speedup theory assumes (measured figures:
  docs/benchmark.md, "Measurements quoted in code"). Precision is unchanged:
  float32 stays float32 (only the summation order differs, as it already does
  between a one-token and a k + 1-token forward).
- `quantize_int8` replaces a draft model's linear layers by dynamically quantized
  int8 ones (per-output-channel weight scales; activations quantized per call).
  A draft token costs well under its float32 time (docs/benchmark.md). The output
  is unchanged: the target decides every emitted token, so only the proposals (and
  the acceptance rate) can move.

Both are pure functions of a model in, the same model (modified in place) out.
"""

from __future__ import annotations

import warnings
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import torch
from torch import nn

PACKED_DTYPES = (torch.float32, torch.bfloat16)
PACK_ROWS_HINT = 4          # oneDNN picks its blocking for about this many rows (1..8 all stay near one step)


class PackedLinear(nn.Module):
    """y = x W^T + b with W held in oneDNN's prepacked layout (no plain copy is kept)."""

    def __init__(self, in_features: int, out_features: int, packed_weight: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.packed_weight = packed_weight
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> "PackedLinear":
        weight = linear.weight.detach()
        if weight.dtype == torch.bfloat16 and not bf16_prepack_supported():
            raise ValueError("oneDNN prepacks bfloat16 weights only on a CPU with AVX-512 (this one has "
                             f"{torch.backends.cpu.get_cpu_capability()}); keep the plain nn.Linear here")
        packed = torch.ops.mkldnn._reorder_linear_weight(weight, PACK_ROWS_HINT)
        bias = None if linear.bias is None else linear.bias.detach()
        return cls(linear.in_features, linear.out_features, packed, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self.packed_weight, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, oneDNN prepacked"


def can_prepack(model: nn.Module) -> bool:
    """True when the model lives on the CPU in a dtype this CPU's oneDNN prepacks (bfloat16
    needs AVX-512 or newer; torch refuses it elsewhere)."""
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu" or parameter.dtype not in PACKED_DTYPES:
        return False
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return False
    return parameter.dtype != torch.bfloat16 or bf16_prepack_supported()


def bf16_prepack_supported() -> bool:
    """True when this CPU lets oneDNN prepack bfloat16 weights. torch refuses it (RuntimeError at
    reorder time) without AVX-512 BW/VL/DQ, which is what ATen's "AVX512" capability requires, so
    CPUs such as a 2-core AMD EPYC with AVX2 only keep the plain bfloat16 kernels."""
    return torch.backends.cpu.get_cpu_capability() == "AVX512"


def can_quantize_int8() -> bool:
    """True when this torch has a CPU engine for dynamically quantized linear layers."""
    return any(engine in torch.backends.quantized.supported_engines for engine in ("x86", "fbgemm", "onednn", "qnnpack"))


def prepack_linear_layers(model: nn.Module) -> int:
    """Replace every nn.Linear of a CPU model by a PackedLinear; returns how many were packed."""
    if not can_prepack(model):
        return 0
    return _swap_in_parallel(_linear_slots(model), PackedLinear.from_linear)


def quantize_int8(model: nn.Module) -> int:
    """Dynamic int8 quantization of every nn.Linear (per-channel weights), in place, on every
    torch thread at once; returns how many layers were quantized. What torch's
    `quantize_dynamic` does, layer by layer, in parallel."""
    from torch.ao.nn.quantized.dynamic import Linear as DynamicQuantizedLinear
    from torch.ao.quantization import per_channel_dynamic_qconfig

    def convert(linear: nn.Linear) -> nn.Module:
        linear.qconfig = per_channel_dynamic_qconfig
        return DynamicQuantizedLinear.from_float(linear)

    with warnings.catch_warnings():      # torch marks its quantized tensor types as deprecated; they work in 2.13
        warnings.simplefilter("ignore")
        return _swap_in_parallel(_linear_slots(model), convert)


def _linear_slots(model: nn.Module) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, attribute, layer) for every plain nn.Linear of the model."""
    return [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
            if type(child) is nn.Linear]


def _swap_in_parallel(slots: list, convert) -> int:
    """Replace each layer by convert(layer). The conversions run on every torch thread (they
    release the GIL), at most one per thread at a time, largest first, each slot refilled as
    soon as its conversion ends: one huge layer (the vocabulary head, the slowest to convert) runs
    beside the small ones instead of holding a lockstep batch. No reference to a converted
    plain layer is kept, so its weight is freed once swapped: memory grows by a few layers,
    not by a second model. Takes the slots list over (empties it); returns how many were swapped."""
    workers = max(1, torch.get_num_threads())
    pending = sorted(slots, key=lambda slot: slot[2].weight.numel(), reverse=True)
    count = len(pending)
    slots.clear()
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict = {}
        while pending or running:
            while pending and len(running) < workers:
                parent, name, layer = pending.pop(0)
                running[pool.submit(convert, layer)] = (parent, name)
                del layer
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                parent, name = running.pop(future)
                setattr(parent, name, future.result())
    return count


def packed_layer_count(model: nn.Module) -> int:
    return sum(isinstance(module, PackedLinear) for module in model.modules())
