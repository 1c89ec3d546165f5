"""The runner's own GPU made current for a block: `cuda:N` honoured everywhere (docs/architecture.md §7).

CUDA's streams, events, graph captures and replays, and the memory pools graphs share all act on
the *current* device, which is `cuda:0` unless something sets it. A pair loaded on `cuda:1`
therefore runs its forwards, captures its graphs, records its step clock's events and
synchronises inside `on_device(its device)`: `torch.cuda.device`, public API, which restores the
previous device on leaving. Off CUDA it is nothing.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

import torch


def on_device(device: torch.device) -> AbstractContextManager:
    """A context in which `device` is CUDA's current device (a no-op for a CPU or MPS device)."""
    if device.type != "cuda":
        return nullcontext()
    return torch.cuda.device(device)
