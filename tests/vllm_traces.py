"""vLLM traces for the page's tests, built by engine/vllm/to_trace.py (the code a live run uses) from the
streams recorded on a real vLLM 0.32.0 server (tests/data/vllm/, tests/vllm_record.py: the tiny random
Llama pair, float32, draft model k = 3, detailed per-request metrics). Arrival times are spaced evenly
(the recording keeps none). An n-gram trace runs the same split with vLLM's n-gram rule rebuilding the
rejected drafts it can (origin "reconstructed") on a hand-made byte-level stream."""

from __future__ import annotations

from typing import Any, Sequence

from engine.config import SpecConfig
from engine.formats.trace import TextTokens, Trace
from engine.vllm.ngram import propose
from engine.vllm.server_info import ServerInfo
from engine.vllm.stream import SpecMetrics, StreamChunk
from engine.vllm.to_trace import build_trace, external_config
from engine.vllm.transport import parse_address
from vllm_replay import load_recording

RECORDING = load_recording()
STEP_GAP_S = 0.05


def recorded_metrics(name: str = "greedy") -> dict[str, Any]:
    """The server's own final `metrics.speculative_decoding` for the recorded stream `name`."""
    return next(e["metrics"]["speculative_decoding"] for e in RECORDING["streams"][name]["events"]
                if not e.get("choices"))


def decode(ids: Sequence[int]) -> list[str]:
    return [RECORDING["detokenize"][token] for token in ids]


def server_info(method: str = "draft_model", k: int = 3) -> ServerInfo:
    card = RECORDING["models"]["data"][0]
    return ServerInfo(parse_address("http://127.0.0.1:8011"), card["id"], card["root"], card.get("max_model_len"),
                      RECORDING["version"]["version"], method, k, True, "float32")


def vllm_trace(name: str = "greedy", complete: bool = True, chunks: int | None = None) -> Trace:
    """The recorded stream `name` ("greedy", "sampled" at T = 0.8, "long") as a trace; `chunks` keeps only the
    first chunks, without the final metrics (a run still streaming, or cut)."""
    stream = RECORDING["streams"][name]
    body = stream["body"]
    info = server_info()
    config = external_config(info, SpecConfig(temperature=body["temperature"], max_new_tokens=body["max_tokens"],
                                              seed=body["seed"], k=5, raw=True))
    choices = [event["choices"][0] for event in stream["events"] if event.get("choices")][:chunks]
    arrived = [StreamChunk(1.0 + STEP_GAP_S * (number + 1), tuple(c["token_ids"]), c["text"], c.get("finish_reason"))
               for number, c in enumerate(choices)]
    metrics = SpecMetrics.from_json(recorded_metrics(name)) if complete else None
    prompt_ids = tuple(body["prompt"])
    prompt = TextTokens("".join(decode(prompt_ids)), prompt_ids)
    return build_trace(info, config, prompt, arrived, metrics, 1.0, decode, complete,
                       arrived[-1].finish_reason if complete else None)


def recorded_trace(recording: dict[str, Any], name: str, method: str = "draft_model",
                   lookup: tuple[int, int] | None = None, tokens: int | None = None) -> Trace:
    """A recorded stream (tests/vllm_record.py) of `recording` as the finished trace engine/vllm/ builds, with
    its real chunk boundaries; `tokens` cuts the output there and keeps the arrays of the steps up to the
    cut (what vLLM reports when its budget cuts a step: it counts before it truncates)."""
    stream = recording["streams"][name]
    body = stream["body"]
    card = recording["models"]["data"][0]
    info = ServerInfo(parse_address("http://127.0.0.1:8011"), card["id"], card["root"], card.get("max_model_len"),
                      recording["version"]["version"], method, 3, True, "float32")
    config = external_config(info, SpecConfig(temperature=body["temperature"], max_new_tokens=tokens or body["max_tokens"],
                                              seed=body["seed"], k=3, raw=True), lookup)
    choices = [event["choices"][0] for event in stream["events"] if event.get("choices")]
    metrics = next(e["metrics"]["speculative_decoding"] for e in stream["events"] if not e.get("choices"))
    arrived = [StreamChunk(1.0 + STEP_GAP_S * (number + 1), tuple(c["token_ids"]), c["text"], c.get("finish_reason"))
               for number, c in enumerate(choices)]
    prompt_ids = tuple(body["prompt"])
    prompt = TextTokens("".join(recording["detokenize"][token] for token in prompt_ids), prompt_ids)
    texts = lambda ids: [recording["detokenize"][token] for token in ids]      # noqa: E731
    whole = build_trace(info, config, prompt, arrived, SpecMetrics.from_json(metrics), 1.0, texts, True,
                        arrived[-1].finish_reason)
    if tokens is None:
        return whole
    arrived, spec = _cut(arrived, whole, tokens)
    return build_trace(info, whole.config, prompt, arrived, spec, 1.0, texts, True, "length")


def _cut(chunks: list[StreamChunk], whole: Trace, tokens: int) -> tuple[list[StreamChunk], SpecMetrics]:
    """The stream as a budget of `tokens` would have ended it: the chunks cut after that many tokens (the last
    marked "length"), the arrays of every verify step that began before the cut, their counts whole."""
    kept, count = [], 0
    for chunk in chunks:
        if count >= tokens:
            break
        ids = chunk.token_ids[:tokens - count]
        count += len(ids)
        kept.append(StreamChunk(chunk.time_s, ids, "", "length" if count >= tokens else None))
    verify, start = [], 0
    for step in whole.steps:
        if start < tokens and step.k:
            verify.append(step)
        start += step.num_emitted
    accepted, drafted = tuple(s.num_accepted for s in verify), tuple(s.k for s in verify)
    return kept, SpecMetrics(whole.config.k, accepted, drafted, sum(drafted), sum(accepted))


def _chunks(text: str, sizes: Sequence[int]) -> list[StreamChunk]:
    chunks, start = [], 0
    for number, size in enumerate(sizes):
        part = text[start:start + size]
        last = start + size >= len(text)
        chunks.append(StreamChunk(1.0 + STEP_GAP_S * (number + 1), tuple(ord(c) for c in part), part,
                                  "length" if last else None))
        start += size
    return chunks


def ngram_trace() -> Trace:
    """An n-gram server's run on a repetitive prompt: the steps' rejected drafts rebuilt by vLLM's rule."""
    info = server_info("ngram", 3)
    config = external_config(info, SpecConfig(max_new_tokens=12), ngram_lookup=(2, 2))
    prompt = "abcdabcdab"
    output = "cdabxcdabyza"          # a match proposes "cdab" twice; x and y break it (rejections)
    return _ngram(info, config, prompt, output)


def _ngram(info: ServerInfo, config: SpecConfig, prompt: str, output: str) -> Trace:
    """Split `output` as an n-gram server with k = 3 would: each step accepts while vLLM's rule's drafts match."""
    context = [ord(c) for c in prompt]
    ids = [ord(c) for c in output]
    sizes, accepted, drafted = [1], [], []
    context.append(ids[0])
    position = 1
    while position < len(ids):
        drafts = propose(context, config.ngram_min, config.ngram_max, config.k, info.max_model_len)
        take = 0
        while take < len(drafts) and position + take < len(ids) and drafts[take] == ids[position + take]:
            take += 1
        size = min(take + 1, len(ids) - position)
        sizes.append(size)
        accepted.append(min(take, size))
        drafted.append(len(drafts))
        context += ids[position:position + size]
        position += size
    verified = [(d, a) for d, a in zip(drafted, accepted) if d]      # vLLM lists only the steps that drafted
    metrics = SpecMetrics(config.k, tuple(a for _, a in verified), tuple(d for d, _ in verified), sum(drafted),
                          sum(accepted))
    stream = _chunks(output, sizes)
    return build_trace(info, config, TextTokens(prompt, tuple(ord(c) for c in prompt)), stream, metrics, 1.0,
                       lambda ids: [chr(token) for token in ids], True, "length")
