"""vLLM traces for the page's tests, built by engine/vllm/to_trace.py (the code a live run uses) from a
stream recorded on a real vLLM 0.32.0 server: the tiny random Llama pair, float32, draft model k = 3,
prompt "abc", 24 greedy tokens (/work/shared/vllm-notes.md, "The stream"). Its chunk sizes and final
metrics are the server's own; its byte-level token ids stand for the tokens. An n-gram trace runs the
same split with vLLM's n-gram rule rebuilding the rejected drafts it can (origin "reconstructed")."""

from __future__ import annotations

from typing import Sequence

from engine.config import SpecConfig
from engine.formats.trace import TextTokens, Trace
from engine.vllm.ngram import propose
from engine.vllm.server_info import ServerInfo
from engine.vllm.stream import SpecMetrics, StreamChunk
from engine.vllm.to_trace import build_trace, external_config
from engine.vllm.transport import parse_address

# The server's chunk sizes: the prefill's one token, then accepted + 1 per verify step.
CHUNK_SIZES = (1, 2, 1, 1, 3, 1, 2, 2, 1, 1, 1, 1, 2, 1, 1, 2, 1)
FINAL_METRICS = {"mean_acceptance_length": 1.4375, "draft_acceptance_rate": 0.1458,
                 "acceptance_histogram": [10, 5, 1, 0], "num_spec_steps": 16, "num_accepted_draft_tokens": 7,
                 "num_draft_tokens": 48, "num_spec_tokens": 3,
                 "per_step_accepted": [1, 0, 0, 2, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 0],
                 "per_step_drafted": [3] * 16}
OUTPUT = "defghijklmnopqrstuvwxyz!"        # 24 byte-level tokens (ids = code points)
STEP_GAP_S = 0.05


def decode(ids: Sequence[int]) -> list[str]:
    return [chr(token) for token in ids]


def server_info(method: str = "draft_model", k: int = 3) -> ServerInfo:
    return ServerInfo(parse_address("http://127.0.0.1:8011"), "target", "/models/tiny-target", 512, "0.32.0",
                      method, k, True, "float32")


def _chunks(text: str, sizes: Sequence[int]) -> list[StreamChunk]:
    chunks, start = [], 0
    for number, size in enumerate(sizes):
        part = text[start:start + size]
        last = start + size >= len(text)
        chunks.append(StreamChunk(1.0 + STEP_GAP_S * (number + 1), tuple(ord(c) for c in part), part,
                                  "length" if last else None))
        start += size
    return chunks


def vllm_trace(temperature: float = 0.0, complete: bool = True, chunks: int | None = None) -> Trace:
    """The recorded draft-model run (the prefill's step 0, then 16 verify steps); `chunks` keeps only the first ones,
    without the final metrics (a run still streaming, or cut)."""
    info = server_info()
    config = external_config(info, SpecConfig(temperature=temperature, max_new_tokens=24, k=5))
    stream = _chunks(OUTPUT, CHUNK_SIZES)[:chunks]
    metrics = SpecMetrics.from_json(FINAL_METRICS) if complete else None
    return build_trace(info, config, TextTokens("abc", (97, 98, 99)), stream, metrics, 1.0, decode, complete,
                       "length" if complete else None)


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
    metrics = SpecMetrics(config.k, tuple(accepted), tuple(drafted), sum(drafted), sum(accepted))
    stream = _chunks(output, sizes)
    return build_trace(info, config, TextTokens(prompt, tuple(ord(c) for c in prompt)), stream, metrics, 1.0,
                       decode, True, "length")
