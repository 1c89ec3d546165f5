"""A model forward at a fixed number of rows, captured once as a CUDA graph and replayed.

nano-vllm's recipe (model_runner.py, `capture_cudagraph`): static input buffers, a warm-up on a
side stream, one capture per shape into a memory pool the shapes share, and a replay that only
copies the inputs into the buffers. A one-token forward of a 1.5B model is about 400 kernel
launches; eager PyTorch pays each launch on the host (13-16 ms a token on an H200 whatever the
model size), a replay pays one (docs/benchmark.md, "GPU").

The captured forward writes its keys and values at the static cache's device pointer and
moves it (runtime/static_cache.py), reads position ids from its buffer and builds its mask
from them, so one graph serves every position. Capture, pool and replay use the graph's own GPU
(device.py: a `cuda:1` pair's graphs live and replay on cuda:1). `EagerReplay` runs the same buffers and the
same forward without a graph: the CPU tests prove the dispatch (which graph for which rows,
what is copied where) with it, since a CPU has no graphs.
"""

from __future__ import annotations

import time
from typing import Callable, Protocol

import torch

from engine.runtime.cuda.device import on_device

Forward = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]   # (input ids (1, T), positions (1, T)) -> (T, V)
GRAPH_BACKENDS = ("cuda", "eager-replay")


class Replayable(Protocol):
    rows: int
    input_ids: torch.Tensor          # (1, rows) the buffer a replay reads its tokens from
    positions: torch.Tensor          # (1, rows) and their position ids
    capture_s: float

    def replay(self) -> torch.Tensor:
        """Run the forward on the buffers' current contents; (rows, V) logits, valid until the next replay."""


class CapturedGraph:
    """One CUDA graph of `forward` at `rows` rows; `reset` puts back what the warm-up runs moved."""

    def __init__(self, forward: Forward, rows: int, device: torch.device, pool: tuple[int, int] | None,
                 reset: Callable[[], None], warmups: int = 2):
        started = time.perf_counter()
        self.rows = rows
        self.device = device
        with on_device(device):
            self.input_ids = torch.zeros((1, rows), dtype=torch.long, device=device)
            self.positions = torch.arange(rows, device=device)[None]
            side = torch.cuda.Stream(device)
            side.wait_stream(torch.cuda.current_stream(device))
            with torch.cuda.stream(side):                # warm-up: lazy inits and autotuning outside the capture
                for _ in range(warmups):
                    forward(self.input_ids, self.positions)
                    reset()
            torch.cuda.current_stream(device).wait_stream(side)
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph, pool=pool):
                self.output = forward(self.input_ids, self.positions)          # (rows, V), lives in the pool
            reset()
            torch.cuda.synchronize(device)
        self.capture_s = time.perf_counter() - started

    def replay(self) -> torch.Tensor:
        with on_device(self.device):
            self.graph.replay()
        return self.output


class EagerReplay:
    """The same buffers and forward as a CapturedGraph, run eagerly at each replay (CPU tests)."""

    def __init__(self, forward: Forward, rows: int, device: torch.device, pool: object, reset: Callable[[], None]):
        self.rows = rows
        self.forward = forward
        self.input_ids = torch.zeros((1, rows), dtype=torch.long, device=device)
        self.positions = torch.arange(rows, device=device)[None]
        self.capture_s = 0.0

    def replay(self) -> torch.Tensor:
        return self.forward(self.input_ids, self.positions)


def capture(backend: str, forward: Forward, rows: int, device: torch.device, pool: object,
            reset: Callable[[], None]) -> Replayable:
    """A replayable forward at `rows` rows: a CUDA graph, or the eager stand-in that tests the dispatch."""
    if backend == "cuda":
        return CapturedGraph(forward, rows, device, pool, reset)
    if backend == "eager-replay":
        return EagerReplay(forward, rows, device, pool, reset)
    raise ValueError(f"graph backend must be one of {', '.join(GRAPH_BACKENDS)}, got {backend!r}")


def new_pool(backend: str, device: torch.device) -> object:
    """A memory pool the graphs of one model share (captured largest first, so it fits them all), on its GPU."""
    if backend != "cuda":
        return None
    with on_device(device):
        return torch.cuda.graph_pool_handle()
