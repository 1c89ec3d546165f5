"""Which SDPA kernels a CUDA forward may use (docs/benchmark.md, "GPU").

torch >= 2.10 prefers cuDNN's attention on Hopper, and cuDNN keys its execution plans by
sequence length: a growing cache builds a new plan on most calls (a 6-row verify measured
55 ms inside the engine on an H200, 18 ms without cuDNN). Every CUDA forward therefore runs
with cuDNN's kernel left out: flash, memory-efficient or, where neither supports the shape,
the math kernel. `torch.nn.attention.sdpa_kernel` is public API; on another device the pin is
nothing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

PINNED_BACKENDS = (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH)


def pinned_attention(device: torch.device) -> AbstractContextManager:
    """A context in which SDPA on `device` never picks cuDNN's kernel (a no-op off CUDA)."""
    if device.type != "cuda":
        return nullcontext()
    return sdpa_kernel(list(PINNED_BACKENDS))
