"""The target's forward time against the tokens it takes in at once, timed on the server without speculation
(issue #39 item 3; docs/architecture.md §11): the batch cost model's one measured curve.

A speculative step of N requests makes the target verify N × (k + 1) tokens in one forward; the same server
without speculation decodes N tokens a step. Both are one forward over M tokens, so one curve t(M) prices both.
It is timed as a prefill: a prompt of exactly M token ids and max_tokens = 1 is one forward over M tokens (the
linear layers, which dominate at these lengths, cost the same for M tokens of one request as for one token of
each of M requests). The prompt is the run's own prompts' ids, repeated to M; each request carries its own
`cache_salt` (vLLM's per-request prefix-cache salt, new to each probe), so the prefix cache never serves one
from another, and the server's usage must count exactly M prompt tokens. Every size is timed `repeats` times
after one untimed request per size (a compiled server's first call of a shape can compile). Torch-free."""

from __future__ import annotations

import secrets
import time
from typing import Any, Sequence

from engine.vllm.server_info import ServerInfo
from engine.vllm.transport import Session, VllmError

PROBE_REPEATS = 3


def probe_sizes(most_tokens: int) -> list[int]:
    """Powers of two from 1 up to the first at least `most_tokens` (the largest verify of the grid)."""
    sizes = [1]
    while sizes[-1] < most_tokens:
        sizes.append(sizes[-1] * 2)
    return sizes


def probe_prompt(ids: Sequence[int], size: int) -> list[int]:
    """`size` ids: `ids` repeated as needed."""
    if not ids:
        raise VllmError("The forward probe needs at least one prompt token.")
    return [ids[i % len(ids)] for i in range(size)]


def _timed(session: Session, model: str, prompt: list[int], salt: str) -> float:
    body = {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0, "n": 1, "cache_salt": salt}
    start = time.perf_counter()
    answer = session.post_json("/v1/completions", body)
    seconds = time.perf_counter() - start
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(answer, dict) or not answer.get("choices") or not isinstance(usage, dict):
        raise VllmError(f"The vLLM server at {session.address} answered the forward probe without a completion.")
    if usage.get("prompt_tokens") != len(prompt):
        raise VllmError(f"The vLLM server at {session.address} counted {usage.get('prompt_tokens')!r} prompt tokens "
                        f"for the forward probe's {len(prompt)}: its timings would not be of that many tokens.")
    return seconds


def forward_probe(info: ServerInfo, session: Session, ids: Sequence[int], sizes: Sequence[int],
                  repeats: int = PROBE_REPEATS) -> dict[str, Any]:
    """specviz.load/1 `servers[1].forward_probe`: the sizes and each size's `repeats` timings in seconds."""
    if info.speculative:
        raise VllmError("The forward probe times the target alone: run it on the server without speculation.")
    run = secrets.token_hex(8)         # this probe's own salts: a probe run again on the server is not served
    seconds = []
    for size in sizes:
        prompt = probe_prompt(ids, size)
        _timed(session, info.model, prompt, f"specviz-{run}-{size}-warm")     # untimed: a first call of a shape
        seconds.append([_timed(session, info.model, prompt, f"specviz-{run}-{size}-{r}") for r in range(repeats)])
    return {"sizes": list(sizes), "seconds": seconds}
