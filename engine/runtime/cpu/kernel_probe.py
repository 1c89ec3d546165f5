"""Probe each fast CPU kernel once at load: does it run here, and does it agree with F.linear?

The fast kernels (engine/runtime/cpu/kernel_modules.py) go through torch operators outside
its compatibility promise, and oneDNN refuses some dtypes on some CPUs (bfloat16 packing
needs AVX-512). Each probe builds a small random layer, runs 1 and 5 rows through the
fast kernel and through `F.linear`, and returns None when they agree within the dtype's
rounding, else one sentence saying why not (the operator is missing, it raised, or it
disagreed). The loader keeps the stock kernel for that model when a probe says no and
shows the sentence in its progress. A probe costs well under a second.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from engine.presets import first_line
from engine.runtime.cpu.kernel_modules import Int4Linear, Int8Linear, PackedLinear

PROBE_IN, PROBE_OUT, PROBE_ROWS = 96, 80, (1, 5)
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 3e-3}


def bf16_prepack_supported() -> bool:
    """True when this CPU lets oneDNN prepack bfloat16 weights. torch refuses it (RuntimeError at
    reorder time) without AVX-512 BW/VL/DQ, which is what ATen's "AVX512" capability requires, so
    CPUs such as a 2-core AMD EPYC with AVX2 only keep the plain bfloat16 kernels."""
    return torch.backends.cpu.get_cpu_capability() == "AVX512"


def probe_prepacked(dtype: torch.dtype) -> str | None:
    """None when oneDNN prepacking works for `dtype` on this CPU and matches F.linear; else why not."""
    if dtype not in (torch.float32, torch.bfloat16):
        return f"oneDNN prepacking covers float32 and bfloat16, not {str(dtype).removeprefix('torch.')}"
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")
            and hasattr(torch.ops.mkldnn, "_linear_pointwise")):
        return "this torch build has no oneDNN linear-prepacking operators"
    if dtype == torch.bfloat16 and not bf16_prepack_supported():
        return (f"oneDNN prepacks bfloat16 weights only on a CPU with AVX-512 (this one has "
                f"{torch.backends.cpu.get_cpu_capability()})")
    weight, bias = _random_layer(dtype)
    return _compare("oneDNN prepacked", lambda: PackedLinear.from_weight(weight, bias), weight, bias, dtype)


def probe_int8() -> str | None:
    """None when the int8 weight-only kernel runs here and matches F.linear on its dequantized
    weight; else why not."""
    if not hasattr(torch, "_weight_int8pack_mm"):
        return "this torch build has no int8 weight-only matrix product"
    weight, bias = _random_layer(torch.float32)
    try:
        layer = Int8Linear.from_weight(weight, bias)
    except RuntimeError as error:
        return f"int8 quantization failed here ({first_line(error)})"
    return _compare("int8 weight-only", lambda: layer, layer.dequantized_weight(), bias, torch.bfloat16)


def probe_int4() -> str | None:
    """None when the int4 weight-only kernel runs here and matches F.linear on the weight the int4 law
    gives (`Int4Linear.law_weight`, computed from the float weight, not read back from the kernel);
    else why not."""
    if not (hasattr(torch, "_weight_int4pack_mm_for_cpu") and hasattr(torch, "_convert_weight_to_int4pack_for_cpu")):
        return "this torch build has no int4 weight-only matrix product for the CPU"
    weight, bias = _random_layer(torch.float32)
    try:
        layer = Int4Linear.from_weight(weight, bias)
    except (RuntimeError, NotImplementedError) as error:
        return f"int4 quantization failed here ({first_line(error)})"
    return _compare("int4 weight-only", lambda: layer, Int4Linear.law_weight(weight), bias, torch.bfloat16)


def _random_layer(dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(PROBE_OUT, PROBE_IN, generator=generator) / PROBE_IN ** 0.5
    bias = torch.randn(PROBE_OUT, generator=generator)
    return weight.to(dtype), bias.to(dtype)


def _compare(kernel: str, build, weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype) -> str | None:
    """Run the kernel built by `build()` on 1 and 5 rows against F.linear in float64."""
    generator = torch.Generator().manual_seed(1)
    try:
        layer = build()
        for rows in PROBE_ROWS:
            x = torch.randn(1, rows, PROBE_IN, generator=generator).to(weight.dtype)
            with torch.inference_mode():
                got = layer(x).double()
            expected = F.linear(x.double(), weight.double(), bias.double())
            if got.shape != expected.shape:
                return f"the {kernel} kernel returned shape {tuple(got.shape)} for {tuple(expected.shape)}"
            error = (got - expected).abs().max().item() / max(1.0, expected.abs().max().item())
            if not error <= TOLERANCE[dtype]:
                return f"the {kernel} kernel disagreed with F.linear here (relative error {error:.1e})"
    except (RuntimeError, TypeError, ValueError, NotImplementedError) as error:
        return f"the {kernel} kernel failed here ({first_line(error)})"
    return None
