"""How long a run will take on this server, from the runs it has already finished (docs/architecture.md §9).

The unit is seconds per *requested* token (a run's time from its models being ready to its end,
baseline included, over its `max_new_tokens`): a waiting request knows only how many tokens it asks
for, not where EOS will stop it, so the runs that stopped early count in the mean as they do in the
queue. Runs are grouped by kind (the model pair and whether a target-only baseline follows); a kind
this server has not finished yet borrows the mean of every kind.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from typing import Hashable

WINDOW = 8                 # finished runs remembered per kind: recent enough to follow a busier machine


class SpeedLog:
    """Seconds per requested token of this server's recent finished runs, by kind."""

    def __init__(self, window: int = WINDOW):
        self._window = window
        self._by_kind: dict[Hashable, deque[float]] = {}
        self._lock = threading.Lock()

    def record(self, kind: Hashable, seconds: float, requested_tokens: int) -> None:
        """A run of `kind` asked for `requested_tokens` and took `seconds` once its models were ready."""
        if requested_tokens <= 0 or seconds < 0:
            return
        with self._lock:
            self._by_kind.setdefault(kind, deque(maxlen=self._window)).append(seconds / requested_tokens)

    def per_token(self, kind: Hashable) -> float | None:
        """The mean for `kind`, else over every kind, else None (no run has finished here yet)."""
        with self._lock:
            own = list(self._by_kind.get(kind, ()))
            every = [value for values in self._by_kind.values() for value in values]
        values = own or every
        return statistics.fmean(values) if values else None


def run_seconds(per_token: float | None, requested_tokens: int) -> float | None:
    """The expected time of a run asking for `requested_tokens` at `per_token` seconds each."""
    return None if per_token is None else per_token * requested_tokens
