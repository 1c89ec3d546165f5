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

import torch

MAX_EXACT_ID = 2**24        # float32 holds every integer below this exactly


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
