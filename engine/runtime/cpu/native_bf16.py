"""Does this CPU compute bfloat16 natively, so a bfloat16 target pays on the prepacked path?

A bfloat16 target halves the bytes each verify forward reads, but it is faster only where the
CPU multiplies bfloat16 in hardware (AVX-512 BF16 or AMX) and oneDNN can prepack it; an AVX2
CPU emulates bfloat16, slower than float32. `native_bf16_refusal` detects it (the CPU's flags,
torch's kernel capability, then the bfloat16 prepacking probe) and says why not in one sentence;
`cpu_target_dtype` turns that into the target dtype the loader runs for the "bfloat16-native"
choice (engine/config.py NATIVE_BF16): bfloat16 where native, else float32 with the reason.
"""

from __future__ import annotations

import torch

from engine.cli.machine import machine_record
from engine.runtime.cpu.kernel_probe import probe_prepacked

NATIVE_FLAGS = ("avx512_bf16", "amx_bf16")      # /proc/cpuinfo flags of a CPU that multiplies bfloat16 itself


def native_bf16_refusal(flags: dict[str, bool] | None = None) -> str | None:
    """None when this CPU computes bfloat16 natively and oneDNN prepacks it correctly here; else why
    not, one sentence. `flags` (the CPU's kernel flags, engine/cli/machine.py) default to this CPU's."""
    flags = machine_record()["flags"] if flags is None else flags
    if not any(flags.get(flag) for flag in NATIVE_FLAGS):
        return ("this CPU has no native bfloat16 arithmetic (neither AVX-512 BF16 nor AMX), so a bfloat16 "
                "target would be emulated and slower: the float32 target stays")
    capability = torch.backends.cpu.get_cpu_capability()
    if capability != "AVX512":
        return (f"torch runs its {capability} kernels here (capped or not built for AVX-512), so oneDNN "
                "cannot prepack a bfloat16 target: the float32 target stays")
    reason = probe_prepacked(torch.bfloat16)
    if reason is not None:
        return f"{reason}: the float32 target stays"
    return None


def cpu_target_dtype(flags: dict[str, bool] | None = None) -> tuple[str, str | None]:
    """("bfloat16", None) where the CPU computes bfloat16 natively, else ("float32", why not)."""
    reason = native_bf16_refusal(flags)
    return ("float32", reason) if reason is not None else ("bfloat16", None)
