"""A streamed completion from a vLLM server: token-bearing chunks as they arrive, and the final
chunk's `metrics.speculative_decoding` (the per-step arrays, docs/architecture.md §12)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from engine.config import SpecConfig
from engine.vllm.server_info import ServerInfo
from engine.vllm.transport import DEFAULT_READ_TIMEOUT_S, VllmError, stream_post


@dataclass(frozen=True)
class StreamChunk:
    time_s: float                     # time.perf_counter() when it arrived
    token_ids: tuple[int, ...]
    text: str
    finish_reason: str | None


@dataclass(frozen=True)
class SpecMetrics:
    """vLLM's per-request speculative-decoding metrics (`--per-request-spec-decode-metrics detailed`)."""

    num_spec_tokens: int
    per_step_accepted: tuple[int, ...]
    per_step_drafted: tuple[int, ...]
    num_draft_tokens: int
    num_accepted_draft_tokens: int
    acceptance_histogram: tuple[int, ...] = ()
    mean_acceptance_length: float = 0.0
    draft_acceptance_rate: float = 0.0

    @classmethod
    def from_json(cls, data: Any) -> "SpecMetrics": ...


def completion_body(model: str, prompt: list[int] | str, config: SpecConfig) -> dict[str, Any]: ...


class CompletionStream:
    """Iterate it for `StreamChunk`s; afterwards `metrics`, `usage` and `finish_reason` are set."""

    def __init__(self, info: ServerInfo, body: dict[str, Any], read_timeout_s: float = DEFAULT_READ_TIMEOUT_S):
        self.info, self.body, self.read_timeout_s = info, body, read_timeout_s
        self.metrics: SpecMetrics | None = None
        self.usage: dict[str, Any] | None = None
        self.started_s: float = 0.0

    def __iter__(self) -> Iterator[StreamChunk]: ...
