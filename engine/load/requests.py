"""One streamed completion under load: its clock readings and, on a speculative server, what its
trace is built from. The trace itself is built after the level ends (`finish_trace`, through
engine/vllm/to_trace.py's build_trace, as a live run's VllmGeneration builds it), so asking the
server for each token's text never loads it while other requests still run."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.config import SpecConfig
from engine.formats.trace import TextTokens, Trace
from engine.vllm.server_info import ServerInfo
from engine.vllm.source import TokenTexts, tokenize
from engine.vllm.stream import CompletionStream, SpecMetrics, StreamChunk, completion_body
from engine.vllm.to_trace import build_trace, external_config
from engine.vllm.transport import DEFAULT_READ_TIMEOUT_S, Session, VllmError


@dataclass
class Prepared:
    """A request ready to send: the prompt tokenized by the server (as a live run sends it)."""

    prompt_index: int
    prompt: TextTokens
    body: dict


@dataclass
class Finished:
    """A request that ran: perf_counter readings and what arrived."""

    prepared: Prepared
    sent_s: float
    first_token_s: float
    done_s: float
    chunks: list[StreamChunk] = field(default_factory=list)
    metrics: SpecMetrics | None = None
    finish_reason: str | None = None

    @property
    def output_tokens(self) -> int:
        return sum(len(chunk.token_ids) for chunk in self.chunks)


def prepare(info: ServerInfo, session: Session, prompt_index: int, prompt: str, config: SpecConfig) -> Prepared:
    ids = tokenize(info, session, prompt, config.raw)
    return Prepared(prompt_index, TextTokens(prompt, ids), completion_body(info.model, list(ids), config))


def send(info: ServerInfo, prepared: Prepared, read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> Finished:
    """Stream the request to its end; VllmError (one sentence) when the server fails it or sends no token."""
    stream = CompletionStream(info, prepared.body, read_timeout_s)
    chunks = list(stream)
    if not chunks:
        raise VllmError(f"The vLLM server at {info.address} finished a request without a token.")
    if info.speculative and (stream.metrics is None or not stream.metrics.per_step):
        raise VllmError(f"The vLLM server at {info.address} finished a request without its per-step counts: start it "
                        "with --per-request-spec-decode-metrics detailed.")
    return Finished(prepared, stream.started_s, chunks[0].time_s, chunks[-1].time_s, chunks, stream.metrics,
                    stream.finish_reason)


def finish_trace(info: ServerInfo, config: SpecConfig, finished: Finished, session: Session) -> Trace:
    """The request's whole trace, split by the server's per-step arrays (a speculative server only)."""
    return build_trace(info, external_config(info, config), finished.prepared.prompt, finished.chunks,
                       finished.metrics, finished.sent_s, TokenTexts(info, session), True, finished.finish_reason, {})

