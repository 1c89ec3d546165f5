"""A vLLM server's own speculative counters over one run (docs/architecture.md §10, "Counters").

A server that handles other traffic counts every request in `/metrics`; read before the page joins
the run and after it ends, the difference is what the whole server speculated meanwhile: this run and
whatever else it served. The Run tab draws that interval's acceptance by position beside the run's
own (specviz/figures/acceptance.py `position_figure`), saying it covers the whole server. The counters
are a bonus view: a server whose /metrics cannot be read leaves the run as it is, with one sentence.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.vllm.counters import SpecCounters, read_counters
from engine.vllm.transport import VllmError, parse_address
from specviz.serving.runner import ModelChoice

COUNTER_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ServerShare:
    """The interval's acceptance at each draft position, in the by-position chart's terms: accepted at
    d(i+1) among the verify steps that accepted every draft before it (`reached`)."""

    rates: tuple[float | None, ...]
    reached: tuple[int, ...]
    steps: int                            # verify steps with drafts, over the whole server
    note: str                             # what the interval covers, one sentence


def read_before(models: ModelChoice) -> SpecCounters | str | None:
    """The server's counters now (None for a run that is not on a server; a sentence when they cannot be read)."""
    if not models.server:
        return None
    try:
        return read_counters(parse_address(models.server), COUNTER_TIMEOUT_S)
    except VllmError as error:
        return f"The server's /metrics counters could not be read, so only this run's own counts are drawn: {error}"


def share_since(models: ModelChoice, before: SpecCounters | str | None) -> ServerShare | str | None:
    """The interval since `before` as a ServerShare; a sentence when it cannot be had; None when nothing to say."""
    if before is None or isinstance(before, str):
        return before
    try:
        interval = read_counters(parse_address(models.server), COUNTER_TIMEOUT_S).minus(before)
    except VllmError as error:
        return f"The server's /metrics counters could not be read after the run: {error}"
    return share(interval)


def share(interval: SpecCounters) -> ServerShare | None:
    """The conditional acceptance by position of an interval's counts (None when no step drafted in it)."""
    if interval.num_drafts <= 0:
        return None
    reached = (interval.num_drafts, *interval.accepted_per_pos[:-1])
    rates = tuple(accepted / seen if seen else None for accepted, seen in zip(interval.accepted_per_pos, reached))
    note = (f"The server's /metrics counters over this run: {interval.num_drafts} verify steps of every request the "
            f"whole server ran meanwhile, this run's and any other traffic's.")
    return ServerShare(rates, tuple(reached), interval.num_drafts, note)
