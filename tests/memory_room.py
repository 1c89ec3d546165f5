"""Room in memory for a test that needs most of the machine: the default pair's vLLM server holds about
16 GiB at its peak (its worker keeps oneDNN-packed copies beside the float32 weights), and a 24 GiB
machine that still runs the session's tiny vLLM server and a test process whose heap kept every model
an earlier test freed has no such room (CI of 2026-11-28: the worker was killed by the kernel's OOM
killer on its first request, so four tests failed on "EngineCore encountered an issue").

`make_room` stops the servers the session shares (tests marked `needs_most_memory` run after every
other test: tests/conftest.py), returns the freed heap to the system and then checks that the room is
there, failing in one sentence that says how much is missing instead of letting the kernel kill a server
in the middle of a test.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from pathlib import Path
from typing import Callable

GIB = 1024 ** 3


def available_bytes() -> int:
    """What Linux says a new process can take without swapping (/proc/meminfo's MemAvailable)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable line")


def resident_bytes() -> int:
    """This process's resident set (/proc/self/status's VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/self/status has no VmRSS line")


def return_freed_heap() -> bool:
    """Collect garbage and hand the heap's free pages back to the system with glibc's malloc_trim (models
    loaded and freed leave their pages in the heap: 2.4 GiB held after the real-model tests, 0.6 GiB after
    the trim). False where the C library has no malloc_trim (not glibc): the collection alone is done."""
    gc.collect()
    name = ctypes.util.find_library("c")
    library = ctypes.CDLL(name) if name else None
    trim = getattr(library, "malloc_trim", None)
    if trim is None:
        return False
    trim(0)
    return True


def make_room(need_bytes: int, stop_shared: Callable[[], list[str]], what: str) -> None:
    """Stop the session's shared servers, return the freed heap and fail the test unless `need_bytes` are
    available for `what`."""
    import pytest
    stopped = stop_shared()
    return_freed_heap()
    free = available_bytes()
    if free < need_bytes:
        pytest.fail(f"{what} needs about {need_bytes / GIB:.1f} GiB of memory and only {free / GIB:.1f} GiB is "
                    f"available (this test process holds {resident_bytes() / GIB:.1f} GiB"
                    + (f"; stopped first: {', '.join(stopped)}" if stopped else "") + "): the kernel would kill "
                    "it part-way, so it is not started.", pytrace=False)
