"""Timing a step's phases without making the device wait.

On a CPU the host clock is the device's clock. A GPU runs behind the host: its phases are
timed with CUDA events recorded between them, read once the step's one copy to the host has
waited for the device anyway (readout.py), so timing adds no sync. On Apple's MPS, which has
no such events in torch, each mark waits for the device (as every timing did before). An event is
recorded on the clock's own GPU's current stream (`cuda:N`, not whichever device is current).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


class StepClock:
    """Marks between a step's phases; `between(a, b)` in milliseconds once the step has synced."""

    host_clock: Callable[[], float] = time.perf_counter    # seconds, off the device; scripts/gpu_check.py's CPU
                                                          # cost-model check reads the thread's CPU time instead

    def __init__(self, device: torch.device):
        self.device = device
        self.is_cuda = device.type == "cuda"

    def mark(self) -> torch.cuda.Event | float:
        if self.is_cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            return event
        if self.device.type == "mps":
            torch.mps.synchronize()
        return self.host_clock()

    def between(self, start: torch.cuda.Event | float, end: torch.cuda.Event | float) -> float:
        """Milliseconds from `start` to `end` (both marks of this clock; on CUDA, after a sync)."""
        if self.is_cuda:
            end.synchronize()
            return start.elapsed_time(end)
        return (end - start) * 1000
