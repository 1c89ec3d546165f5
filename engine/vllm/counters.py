"""vLLM's speculative-decoding counters from /metrics (Prometheus text), for an interval's
acceptance by position on a server that handles other traffic (the counts cover the whole server)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.vllm.transport import DEFAULT_TIMEOUT_S, ServerAddress


@dataclass(frozen=True)
class SpecCounters:
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    accepted_per_pos: tuple[int, ...]

    def minus(self, earlier: "SpecCounters") -> "SpecCounters": ...

    @property
    def acceptance_by_position(self) -> tuple[float, ...]: ...


def parse_counters(text: str) -> SpecCounters: ...


def read_counters(address: ServerAddress, timeout_s: float = DEFAULT_TIMEOUT_S) -> SpecCounters: ...
