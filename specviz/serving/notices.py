"""The Run tab's lines about the queue and shared runs, and the durations they (and the sweep) speak in.

- `queue_line`: where a waiting request stands and about how long it will wait.
- `shared_notice`: the one line that says a request was served by another request's identical run.
- `told_wait_s`: the wait a queue line told, read back (the load test and the tests compare it with the real one).
"""

from __future__ import annotations

import re

from specviz.serving.run_queue import Place, Seat
from specviz.serving.shared_run import DONE, QUEUED

SAME = "the same models, prompt, settings and seed as"
TOLD = re.compile(r"about ([^,]+), from this server's measured speed")     # queue_line's estimate
UNIT_S = {"h": 3600, "min": 60, "s": 1}                                       # duration's units


def duration(seconds: float) -> str:
    """'45 s', '2 min 5 s', '1 h 3 min'."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def queue_line(place: Place) -> str:
    """'Waiting in the queue: place 2 (2 runs ahead of yours) · about 1 min 5 s, from this server's measured speed'."""
    runs = f"{place.ahead} run{'s' if place.ahead != 1 else ''} ahead of yours"
    wait = ("the wait is estimated once this server has timed a few steps" if place.wait_s is None else
            "less than a second, from this server's measured speed" if place.wait_s < 0.5 else
            f"about {duration(place.wait_s)}, from this server's measured speed")
    return f"Waiting in the queue: **place {place.place}** ({runs}) · {wait}"


def told_wait_s(line: str) -> float | None:
    """The estimated wait in seconds that a `queue_line` told: 0 for 'less than a second', None when it
    told none (not yet estimated, or no queue line)."""
    if "less than a second, from this server's measured speed" in line:
        return 0.0
    told = TOLD.search(line)
    if told is None:
        return None
    return sum(int(amount) * UNIT_S[unit] for amount, unit in re.findall(r"(\d+) (h|min|s)\b", told.group(1)))


def shared_notice(seat: Seat, phase: str) -> str:
    """The line for a request that joined another's run (`phase`: that run's phase when it joined); '' otherwise."""
    if not seat.shared:
        return ""
    ago = f"{duration(seat.age_s)} ago"
    if phase == DONE:
        return f"**Shared run**: {SAME} a run {ago} on this server: its trace, step by step."
    if phase == QUEUED:
        return f"**Shared run**: {SAME} a request {ago} on this server: one run in the queue serves both."
    return f"**Shared run**: {SAME} a run started {ago} on this server: its steps as they arrive."


def with_notice(status: str, notice: str) -> str:
    """The status line, then the shared-run notice on a line of its own."""
    return f"{status}\n\n{notice}" if notice else status
