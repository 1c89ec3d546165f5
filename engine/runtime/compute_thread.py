"""One long-lived thread for every model computation of a server process.

libgomp, torch's OpenMP runtime on Linux, gives each thread that starts a parallel
region its own pool of worker threads. Once the pools together hold more threads than
the machine has cores, libgomp stops spinning between parallel regions and puts its
workers to sleep after each one. A forward pass of a small model is hundreds of short
regions, so the wake-ups add up. A Gradio server runs each handler call, and each
`next()` of a generator handler, on whichever of its worker threads is free: the pair
loads on one, the steps run on others. Draft tokens and verifies then measurably take
longer (figures in `git show e9811c1:docs/benchmark.md`, "Measurements quoted in code": no saved run) than when every
model computation stays on one thread (which is what a script or the CLI does without
trying).

`ComputeThread.run(fn, ...)` runs `fn` on the process's compute thread and returns its
result (or raises its exception) in the caller. Calls queue in order, so two sessions'
runs interleave step by step instead of splitting two cores between them. The caller's
context variables travel with the call (Gradio's progress tracking reads them). A call
from the compute thread itself runs inline, and after a fork the child starts its own
thread. `StepsOnComputeThread` is a generation whose every step runs there.
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, TypeVar

if TYPE_CHECKING:
    from engine.decode.generation import Generation
    from engine.records import StepRecord
    from engine.formats.trace import Trace

Result = TypeVar("Result")


class ComputeThread:
    """Runs callables on one dedicated thread, started on first use."""

    def __init__(self, name: str = "specviz-compute"):
        self._name = name
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = -1
        self._thread_id: int | None = None

    def run(self, fn: Callable[..., Result], *args, **kwargs) -> Result:
        """fn(*args, **kwargs) on the compute thread; its result or its exception here."""
        if threading.get_ident() == self._thread_id:
            return fn(*args, **kwargs)
        context = contextvars.copy_context()
        return self._executor().submit(context.run, fn, *args, **kwargs).result()

    @property
    def thread_id(self) -> int | None:
        """The compute thread's identifier once it has started (for tests and diagnostics)."""
        return self._thread_id

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None or self._pid != os.getpid():     # first use, or a forked child
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name,
                                                initializer=self._remember_thread)
                self._pid = os.getpid()
                self._thread_id = None
            return self._pool

    def _remember_thread(self) -> None:
        self._thread_id = threading.get_ident()


class StepsOnComputeThread:
    """A Generation whose steps (and trace building) run on the compute thread (app.py hands these to the UI)."""

    def __init__(self, generation: "Generation", compute: ComputeThread):
        self._generation = generation
        self._compute = compute

    @property
    def is_done(self) -> bool:
        return self._generation.is_done

    @property
    def pair(self) -> Any:
        """The (shared, read-only) model pair the generation runs on."""
        return self._generation.pair

    def step(self) -> "StepRecord":
        return self._compute.run(self._generation.step)

    def trace(self) -> "Trace":
        return self._compute.run(self._generation.trace)
