"""vLLM's speculative-decoding counters from /metrics (Prometheus text), for an interval's
acceptance by position on a server that handles other traffic: read before and after, subtract,
and the result covers every request the server ran meanwhile, not one run."""

from __future__ import annotations

import re
from dataclasses import dataclass

from engine.vllm.transport import DEFAULT_TIMEOUT_S, ServerAddress, VllmError, get_text

PREFIX = "vllm:spec_decode_"
_SAMPLE = re.compile(r'^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>[^}]*)\})?\s+(?P<value>\S+)')
_POSITION = re.compile(r'position="(\d+)"')


@dataclass(frozen=True)
class SpecCounters:
    num_drafts: int                     # verify steps that had drafts
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: tuple[int, ...]   # accepted drafts at each draft position (0-based)

    def minus(self, earlier: "SpecCounters") -> "SpecCounters":
        """The counts of the interval since `earlier` (a restarted server's counters would fall: refused)."""
        positions = max(len(self.accepted_per_pos), len(earlier.accepted_per_pos))
        now = self.accepted_per_pos + (0,) * (positions - len(self.accepted_per_pos))
        before = earlier.accepted_per_pos + (0,) * (positions - len(earlier.accepted_per_pos))
        interval = SpecCounters(self.num_drafts - earlier.num_drafts, self.num_draft_tokens - earlier.num_draft_tokens,
                                self.num_accepted_tokens - earlier.num_accepted_tokens,
                                tuple(a - b for a, b in zip(now, before)))
        if min(interval.num_drafts, interval.num_draft_tokens, interval.num_accepted_tokens,
               *interval.accepted_per_pos, 0) < 0:
            raise VllmError("The server's speculative counters went down: it restarted between the two readings.")
        return interval

    @property
    def acceptance_by_position(self) -> tuple[float, ...]:
        """The share of verify steps whose draft at each position was accepted (0 when none ran)."""
        return tuple(count / self.num_drafts if self.num_drafts else 0.0 for count in self.accepted_per_pos)

    @property
    def acceptance_rate(self) -> float:
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0


def parse_counters(text: str) -> SpecCounters:
    """The counters in a /metrics page, summed over engines; VllmError when it has none (no speculation)."""
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if not match or not match["name"].startswith(PREFIX) or not match["name"].endswith("_total"):
            continue
        name, value = match["name"][len(PREFIX):-len("_total")], float(match["value"])
        if name == "num_accepted_tokens_per_pos":
            position = _POSITION.search(match["labels"] or "")
            if position:
                per_pos[int(position[1])] = per_pos.get(int(position[1]), 0.0) + value
        else:
            totals[name] = totals.get(name, 0.0) + value
    if "num_drafts" not in totals:
        raise VllmError("The server's /metrics has no speculative-decoding counters: it runs without speculation.")
    return SpecCounters(int(totals["num_drafts"]), int(totals.get("num_draft_tokens", 0)),
                        int(totals.get("num_accepted_tokens", 0)),
                        tuple(int(per_pos.get(i, 0)) for i in range(max(per_pos, default=-1) + 1)))


def read_counters(address: ServerAddress, timeout_s: float = DEFAULT_TIMEOUT_S) -> SpecCounters:
    return parse_counters(get_text(address, "/metrics", timeout_s))
