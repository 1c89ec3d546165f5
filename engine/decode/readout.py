"""The step's one copy from the device to the host.

A GPU step queues its draft forwards, its verify and the acceptance rule without waiting
(the tokens the draft chooses are fed straight back in, the number accepted stays a device
tensor). What the host needs afterwards (the drafts, the target's choices, how many were
accepted, the next token, and for the record p and q at the drafts and each row's top
alternatives, found with `topk` on the device) is gathered here into one small float32
tensor and copied once: no full-vocabulary row reaches the host. On a CPU the copy is free,
and the same code runs, so the CPU tests prove what the GPU reads.

Token ids travel as float32, exact below 2**24 (every vocabulary SpecViz loads is far below).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.overrides import TorchFunctionMode

MAX_EXACT_ID = 2**24        # float32 holds every integer below this exactly
READS = frozenset({torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__int__, torch.Tensor.__float__,
                   torch.Tensor.__bool__, torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.numpy})
INDEXING = frozenset({torch.Tensor.__getitem__, torch.Tensor.__setitem__})


class Readout:
    """Named device tensors, flattened into one copy by `fetch`."""

    def __init__(self) -> None:
        self._parts: list[tuple[str, torch.Tensor]] = []

    def add(self, name: str, tensor: torch.Tensor) -> None:
        self._parts.append((name, tensor.reshape(-1)))

    def fetch(self) -> dict[str, list[float]]:
        """Every part's values on the host, by name: one device-to-host copy."""
        if not self._parts:
            return {}
        packed = torch.cat([tensor.to(torch.float32) for _, tensor in self._parts]).tolist()    # the one copy
        values: dict[str, list[float]] = {}
        start = 0
        for name, tensor in self._parts:
            values[name] = packed[start:start + tensor.numel()]
            start += tensor.numel()
        return values


def ids(values: list[float]) -> list[int]:
    """Token ids (or counts) read back as float32, as ints."""
    return [int(value) for value in values]


class HostReads(TorchFunctionMode):
    """Counts the reads of a tensor's values on the host that Python code makes while active:
    `tolist`, `item`, `int()`, `bool()` (an `if` on a tensor), `.cpu()`, `.numpy()`, and indexing
    with a 0-dim tensor (which reads its value to index). On a GPU each is a device-to-host copy
    that waits for the device. It sees calls from Python only: a read inside an operator (on a CPU,
    torch.multinomial's `_assert_async`, which the CPU's draw no longer calls (sampling.draw); `nonzero` under
    boolean-mask indexing; `torch.equal`) and
    host-to-device copies pass unseen; scripts/gpu_check.py counts those with the torch profiler.
    `torch.overrides.TorchFunctionMode` is public API."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if func in READS or (func in INDEXING and _scalar_index(args[1] if len(args) > 1 else None)):
            self.reads.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def _scalar_index(index: Any) -> bool:
    parts = index if isinstance(index, tuple) else (index,)
    return any(isinstance(part, torch.Tensor) and part.dim() == 0 for part in parts)
