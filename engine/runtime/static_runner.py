"""A model on a static cache: eager forwards for any shape, graph replays for the captured ones.

`StaticRunner` owns one model's `StaticKV` and its captured forwards (runtime/cuda/graphs.py),
one per row count: the target's one-token decode and its verify of k + 1 rows for each k up to
the captured limit, the draft's one token and the two of a bonus-token carryover. Any other
shape (the prompt's prefill, a larger k, a token tree with its own mask) runs eagerly on the
same cache, so nothing depends on which shapes were captured but the speed.

A graph is bound to the addresses of the buffers it was captured on, so runners are kept and
reused run after run: `RunnerPool` lends one to each run in progress (two sessions' runs
interleave step by step on the compute thread, engine/runtime/compute_thread.py, and each needs
its own cache) and takes it back when the run ends or its cache is garbage-collected.

A runner is sized to its run: a run borrows the smallest free runner that holds it, and a run
longer than every free runner gets a new, larger one (new buffers, graphs captured) while the
smaller runners stay for the short runs after it (attention reads every row of the cache, so a
short run on a long run's cache pays for rows it never uses: ~8 % a token at 512 rows on an H200,
issue #34). The pool keeps at most MAX_IDLE_RUNNERS free, dropping the largest first.

A capture can fail at Run time too (a new runner for a longer run, a second run at once: out of
memory, another capture in progress): that runner then runs eagerly, on the same static cache, and
says why (`StaticRunner.eager_reason`, also on its pool). Everything a runner does on a GPU runs
with that GPU current (runtime/cuda/device.py), so a pair on `cuda:N` captures and replays there.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from engine.presets import first_line
from engine.runtime.cuda.attention import pinned_attention
from engine.runtime.cuda.device import on_device
from engine.runtime.cuda.graphs import Replayable, capture, new_pool
from engine.runtime.static_cache import StaticKV

MIN_CAPACITY = 256          # rows; capacities are powers of two from here (attention reads every row)
MAX_IDLE_RUNNERS = 3        # free runners a pool keeps (each holds its buffers and its graphs' memory)


def capacity_for(rows: int) -> int:
    """The bucket a run of `rows` rows gets: the next power of two, at least MIN_CAPACITY."""
    capacity = MIN_CAPACITY
    while capacity < rows:
        capacity *= 2
    return capacity


class StaticRunner:
    """One model's forwards on its static cache."""

    def __init__(self, model: PreTrainedModel, capacity: int, graph_rows: tuple[int, ...] = (),
                 backend: str | None = None):
        self.model = model
        self.kv = StaticKV(model, capacity)
        self.backend = backend
        self.graphs: dict[int, Replayable] = {}
        self.capture_s = 0.0
        self.eager_reason: str | None = None     # why this runner has no graphs although its pool captures them
        if backend is not None and graph_rows:
            try:
                self._capture(graph_rows)
            except RuntimeError as error:        # CUDA's errors (out of memory, a capture already running)
                self.graphs.clear()
                self.kv.reset()
                self.eager_reason = (f"the graph capture for a {capacity}-row cache failed ({first_line(error)}): "
                                     "its forwards run eagerly")

    @property
    def device(self) -> torch.device:
        return self.kv.device

    def forward(self, input_ids: torch.Tensor, num_logits: int, positions: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """Feed (1, T) tokens at the pointer and return the last num_logits rows of logits (model dtype).

        A chain passes neither positions nor mask: the rows take the next positions, each seeing
        the text before it, and a captured graph of T rows runs if there is one. A token tree
        passes its (1, T) positions and (1, 1, T, W) additive mask (engine/decode/tree/mask.py),
        widened here to the cache's capacity; it runs eagerly."""
        rows = input_ids.shape[-1]
        if not self.kv.room(rows):
            window = " (the model's attention window)" if self.kv.limit < self.kv.capacity else ""
            raise ValueError(f"the static cache holds {self.kv.limit} rows{window}; {self.kv.length} + {rows} do not fit")
        start = self.kv.length
        graph = self.graphs.get(rows) if mask is None and positions is None else None
        with on_device(self.device), pinned_attention(self.device):
            if graph is not None:
                graph.input_ids.copy_(input_ids.view(1, rows))
                graph.positions.copy_(self.kv.columns[start:start + rows][None])
                logits = graph.replay()[-num_logits:]
            else:
                if positions is None:
                    positions = self.kv.columns[start:start + rows][None]                        # (1, T)
                full_mask = self.kv.causal_mask(positions) if mask is None else self.kv.padded_mask(mask)
                logits = self._model_forward(input_ids.view(1, rows), positions, full_mask, num_logits)
        self.kv.advance(rows)
        return logits

    def _model_forward(self, input_ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                       num_logits: int) -> torch.Tensor:
        output = self.model(input_ids=input_ids, position_ids=positions, attention_mask=mask,
                            past_key_values=self.kv.cache, use_cache=True, logits_to_keep=num_logits)
        return output.logits[0]                                                                  # (num_logits, V)

    def _graph_forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return self._model_forward(input_ids, positions, self.kv.causal_mask(positions), input_ids.shape[-1])

    def _capture(self, graph_rows: tuple[int, ...]) -> None:
        """Capture a graph per row count, largest first into one pool (each fits in what the largest
        left). The cache is empty: the warm-ups write rows that the first real forward overwrites."""
        started = time.perf_counter()
        pool = new_pool(self.backend, self.device)
        with torch.inference_mode(), on_device(self.device), pinned_attention(self.device):
            for rows in sorted(set(graph_rows), reverse=True):
                if rows <= self.kv.capacity:
                    self.graphs[rows] = capture(self.backend, self._graph_forward, rows, self.device, pool,
                                                self.kv.reset)
        self.capture_s = time.perf_counter() - started


@dataclass(frozen=True)
class Lease:
    """A runner lent to one run; `end()` gives it back (once; later calls do nothing)."""

    runner: StaticRunner
    _give_back: weakref.finalize

    @property
    def is_active(self) -> bool:
        return self._give_back.alive

    def end(self) -> None:
        self._give_back()


@dataclass(frozen=True)
class PoolSettings:
    """What each of a model's runners captures: the row counts and the graph backend (None: no graphs)."""

    graph_rows: tuple[int, ...] = ()
    backend: str | None = None


class RunnerPool:
    """The runners of one model, lent to one run each and reused."""

    def __init__(self, model: PreTrainedModel, settings: PoolSettings):
        self.model = model
        self.settings = settings
        self._free: list[StaticRunner] = []
        self.num_runners = 0
        self.capture_s = 0.0          # every capture so far, seconds (the load status and bench report it)
        self.eager_reason: str | None = None   # the last failed capture's sentence, if any

    @property
    def free_runners(self) -> tuple[StaticRunner, ...]:
        return tuple(self._free)

    @property
    def num_free(self) -> int:
        return len(self._free)

    def prepare(self, rows: int) -> StaticRunner:
        """Build a runner for runs of up to `rows` rows now (at load: its graphs are captured then,
        not at the first Run) and keep it free."""
        runner = self._new(rows)
        self._give_back(runner)
        return runner

    def lend(self, borrower: object, rows: int) -> Lease:
        """The smallest free runner with room for `rows` rows (a new one of the run's size if none
        holds it), its cache empty, kept from other runs until the lease ends: `Lease.end()` (a
        finished run) or `borrower` garbage-collected (an abandoned one)."""
        fitting = [runner for runner in self._free if runner.kv.capacity >= rows]
        if fitting:
            runner = min(fitting, key=lambda candidate: candidate.kv.capacity)
            self._free.remove(runner)
        else:
            runner = self._new(rows)
        runner.kv.reset()
        return Lease(runner, weakref.finalize(borrower, self._give_back, runner))

    def _give_back(self, runner: StaticRunner) -> None:
        """A runner is free again; past MAX_IDLE_RUNNERS free ones, the largest go (a long run's
        cache is rebuilt if another long run comes)."""
        self._free.append(runner)
        while len(self._free) > MAX_IDLE_RUNNERS:
            largest = max(self._free, key=lambda candidate: candidate.kv.capacity)
            self._free.remove(largest)
            self.num_runners -= 1

    def _new(self, rows: int) -> StaticRunner:
        runner = StaticRunner(self.model, capacity_for(rows), self.settings.graph_rows, self.settings.backend)
        self.num_runners += 1
        self.capture_s += runner.capture_s
        if runner.eager_reason is not None:
            self.eager_reason = runner.eager_reason
        return runner
