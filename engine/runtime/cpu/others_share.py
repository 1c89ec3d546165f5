"""How much of this machine's CPU time other programs took while SpecViz measured its costs (issue #40 item 2).

The CPU's costs are measured once, when the default pair loads (engine/loading/machine_probe.py), and the page
picks the fastest k from them. On a busy machine they come out high (a load beside a clean clone's installs read a
target token at 583 ms against 152 ms on the quiet machine) and the pick is wrong, so the page must say when they
were measured beside other work. The share is read, not guessed: Linux's /proc/stat counts every CPU's busy time
(user, nice, system, irq, softirq and steal: time a hypervisor gave another machine) and its idle time; this
process's own CPU time (os.times, every thread) is taken out of the busy time; what is left, over all the CPUs'
time in the interval, is the share other programs used. Where there is no /proc/stat (macOS, Windows) it is
unknown (None) and nothing is said.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
PROC_STAT = Path("/proc/stat")
BUSY_FIELDS = (0, 1, 2, 5, 6, 7)      # user nice system . . irq softirq steal (guest time is inside user)
IDLE_FIELDS = (3, 4)                   # idle iowait


@dataclass(frozen=True)
class CpuTimes:
    """Seconds since boot: the machine's busy and idle time over all its CPUs, and this process's own CPU time."""
    busy_s: float
    idle_s: float
    own_s: float


def read_cpu_times(stat_text: str, own_s: float, ticks_per_s: float) -> CpuTimes:
    """`stat_text` is /proc/stat's text (its first line sums every CPU, in clock ticks)."""
    first = stat_text.splitlines()[0].split()
    if not first or first[0] != "cpu":
        raise ValueError("/proc/stat does not start with the all-CPU line")
    ticks = [int(value) for value in first[1:]] + [0] * 8
    return CpuTimes(sum(ticks[i] for i in BUSY_FIELDS) / ticks_per_s, sum(ticks[i] for i in IDLE_FIELDS) / ticks_per_s,
                    own_s)


def others_share(before: CpuTimes, after: CpuTimes) -> float:
    """The share (0 to 1) of all the CPUs' time between two readings that programs other than this one used."""
    capacity = (after.busy_s + after.idle_s) - (before.busy_s + before.idle_s)
    others = (after.busy_s - before.busy_s) - (after.own_s - before.own_s)
    return min(max(others / capacity, 0.0), 1.0) if capacity > 0 else 0.0


def now() -> CpuTimes | None:
    """This moment's reading, or None where the system has no /proc/stat."""
    try:
        text = PROC_STAT.read_text()
    except OSError:
        return None
    times = os.times()
    return read_cpu_times(text, times.user + times.system, os.sysconf("SC_CLK_TCK"))


def while_measuring(measure: Callable[[], T]) -> tuple[T, float | None]:
    """Run `measure`; its result and the share of the CPUs other programs used meanwhile (None: unknown here)."""
    before = now()
    result = measure()
    after = now()
    return result, None if before is None or after is None else others_share(before, after)
