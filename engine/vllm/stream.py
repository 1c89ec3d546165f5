"""A streamed completion from a vLLM server: token-bearing chunks as they arrive, and the request's
speculative-decoding statistics (the per-step arrays, docs/architecture.md §10) in either form vLLM sends:

- vLLM 0.32 (`--per-request-spec-decode-metrics detailed`): `metrics.speculative_decoding` on the final
  usage chunk (no choices), a dense `acceptance_histogram` list (vllm/v1/metrics/stats.py
  `RequestSpecDecodeMetrics.to_dict` in the 0.32.0 wheel);
- vLLM's main branch (`--per-request-spec-decode-stats detailed`): `speculative_decoding_stats` on the
  terminal chunk's choice (the one with the finish reason), `acceptance_histogram` a sparse map from
  the accepted count (as text) to its steps (docs/features/speculative_decoding/acceptance_metrics.md
  at vllm-project/vllm cd199986df1171c3255ce2e07e2c63be4385ef9f).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterator

from engine.config import SpecConfig
from engine.vllm.server_info import ServerInfo
from engine.vllm.transport import DEFAULT_READ_TIMEOUT_S, DEFAULT_TIMEOUT_S, VllmError, stream_post


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

    @property
    def per_step(self) -> bool:
        """The per-step arrays came (`detailed`), or nothing was drafted (vLLM then leaves them out)."""
        return bool(self.per_step_drafted) or self.num_draft_tokens == 0

    @classmethod
    def from_json(cls, data: Any) -> "SpecMetrics":
        """Read the final chunk's `metrics.speculative_decoding`; VllmError when it is not what vLLM sends."""
        try:
            accepted = tuple(int(n) for n in data.get("per_step_accepted") or ())
            drafted = tuple(int(n) for n in data.get("per_step_drafted") or ())
            k = int(data["num_spec_tokens"])
            metrics = cls(k, accepted, drafted, int(data["num_draft_tokens"]),
                          int(data["num_accepted_draft_tokens"]), _dense(data.get("acceptance_histogram"), k),
                          float(data.get("mean_acceptance_length") or 0.0),
                          float(data.get("draft_acceptance_rate") or 0.0))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise VllmError("The server's speculative-decoding metrics are not in a form vLLM sends (0.32's "
                            "metrics.speculative_decoding or its main branch's speculative_decoding_stats).") from None
        if (len(accepted) != len(drafted) or any(not 0 <= a <= d <= metrics.num_spec_tokens
                                                 for a, d in zip(accepted, drafted))
                or (drafted and (sum(accepted) != metrics.num_accepted_draft_tokens
                                 or sum(drafted) != metrics.num_draft_tokens))):
            raise VllmError("The server's per-step speculative counts contradict its totals.")
        return metrics


def _dense(histogram: Any, k: int) -> tuple[int, ...]:
    """The accepted-count histogram as a dense tuple: 0.32 sends a list, vLLM's main branch a sparse map
    {"j": steps} without its zero counts (padded to k + 1 entries, as 0.32's list)."""
    if not histogram:
        return ()
    if isinstance(histogram, dict):
        counts = {int(key): int(value) for key, value in histogram.items()}
        if min(counts) < 0 or max(counts) > k:
            raise ValueError("an accepted count outside 0..k")
        return tuple(counts.get(j, 0) for j in range(k + 1))
    return tuple(int(n) for n in histogram)


def speculative_payload(data: dict[str, Any]) -> Any:
    """An event's speculative-decoding statistics in either form (module docstring), or None."""
    found = (data.get("metrics") or {}).get("speculative_decoding")
    for choice in data.get("choices") or ():
        found = choice.get("speculative_decoding_stats") or found
    return found


def completion_body(model: str, prompt: list[int] | str, config: SpecConfig,
                    sampler_fixed: bool = False) -> dict[str, Any]:
    """The streamed /v1/completions request for `config` (one sequence; the per-step arrays need it). Top-k goes
    only to a server running SpecViz's CPU sampler fix (`sampler_fixed`: ServerInfo.cpu_sampler_fix)."""
    if config.top_k and not sampler_fixed:
        raise VllmError("Top-k is off for this vLLM server: vLLM 0.32's speculative sampler crashes its engine on "
                        "top_k, unless it runs SpecViz's fix (scripts/vllm.sh start --fix-cpu-sampler); set top-k "
                        "to 0.")
    body = {"model": model, "prompt": prompt, "max_tokens": config.max_new_tokens,
            "temperature": config.temperature, "top_p": config.top_p, "seed": config.seed, "n": 1,
            "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True}
    if config.top_k:
        body["top_k"] = config.top_k
    return body


class CompletionStream:
    """Iterate it for `StreamChunk`s; afterwards `metrics`, `usage` and `finish_reason` are set.

    Each event's first choice brings the tokens of one or more engine steps (vLLM merges steps
    when the client lags); the last event has no choices and carries the usage and metrics."""

    def __init__(self, info: ServerInfo, body: dict[str, Any], read_timeout_s: float = DEFAULT_READ_TIMEOUT_S):
        if body.get("n", 1) != 1:
            raise VllmError("SpecViz draws one sequence at a time: n must be 1 (vLLM reports per-step counts only "
                            "for single-sequence requests).")
        self.info, self.body, self.read_timeout_s = info, body, read_timeout_s
        self.metrics: SpecMetrics | None = None
        self.usage: dict[str, Any] | None = None
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None     # the stop string (or stop token id) that ended the run
        self.prompt_token_ids: tuple[int, ...] = ()
        self.started_s: float = 0.0

    def __iter__(self) -> Iterator[StreamChunk]:
        self.started_s = time.perf_counter()
        for arrival in stream_post(self.info.address, "/v1/completions", self.body, DEFAULT_TIMEOUT_S,
                                   self.read_timeout_s):
            data = arrival.data
            for choice in data.get("choices") or ():
                if choice.get("index", 0) != 0:
                    raise VllmError("The server sent more than one sequence: SpecViz draws one at a time (n = 1).")
                if choice.get("prompt_token_ids"):
                    self.prompt_token_ids = tuple(choice["prompt_token_ids"])
                ids = tuple(choice.get("token_ids") or ())
                self.finish_reason = choice.get("finish_reason") or self.finish_reason
                self.stop_reason = choice.get("stop_reason") if choice.get("stop_reason") is not None else \
                    self.stop_reason
                if ids:
                    yield StreamChunk(arrival.time_s, ids, choice.get("text") or "", choice.get("finish_reason"))
            if data.get("usage"):
                self.usage = data["usage"]
            speculative = speculative_payload(data)
            if speculative is not None:
                self.metrics = SpecMetrics.from_json(speculative)
