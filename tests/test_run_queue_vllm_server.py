"""The Run tab's queue against a real vLLM 0.32 server (marker vllm; the tiny pair, tests/vllm_session.py):
distinct runs in the server lane stream at once and each is the server's own answer for its prompt asked
alone; a stopped run's closed stream makes the server stop generating it (docs/architecture.md §9, "lanes")."""

from __future__ import annotations

import re
import threading
import time

import pytest

from app import EngineRunner
from engine.config import SpecConfig
from engine.vllm.transport import get_text, parse_address, post_json
from specviz.serving.runner import ModelChoice, RunRequest
from specviz.serving.run_queue import RunQueue
from specviz.serving.shared_run import DONE, STOPPED
from vllm_session import K

pytestmark = pytest.mark.vllm
PROMPTS = ("abc", "Hello, world", "def f(x):\n    return x")
TOKENS = 32
LONG = 400          # a run long enough to be stopped half way on any machine


def generated_tokens(url: str) -> float:
    """The server's count of tokens it has generated, from /metrics."""
    text = get_text(parse_address(url), "/metrics")
    return sum(float(value) for value in re.findall(r"^vllm:generation_tokens_total\{[^}]*\} (\S+)$", text, re.M))


def request(url: str, prompt: str, tokens: int) -> RunRequest:
    return RunRequest(ModelChoice(server=url), prompt, SpecConfig(k=K, max_new_tokens=tokens, raw=True))


def test_distinct_runs_stream_at_once_and_each_is_the_servers_answer_alone(tiny_vllm):
    queue = RunQueue(EngineRunner(device="cpu"), server_runs=len(PROMPTS))
    seats = [queue.join(request(tiny_vllm.url, prompt, TOKENS), threading.Event()) for prompt in PROMPTS]
    ended = [seat.run.wait_until_ended(300) for seat in seats]
    assert [end.phase for end in ended] == [DONE] * len(PROMPTS), [end.error for end in ended]
    runs = [seat.run for seat in seats]
    assert max(run.running_since for run in runs) < min(run.finished_at for run in runs)      # at once
    for end in ended:
        alone = post_json(parse_address(tiny_vllm.url), "/v1/completions",
                          {"model": "target", "prompt": list(end.trace.prompt.token_ids), "max_tokens": TOKENS,
                           "temperature": 0, "return_token_ids": True}, timeout_s=120)["choices"][0]
        assert end.trace.complete and end.trace.output.token_ids == tuple(alone["token_ids"])


def test_a_stopped_run_stops_generating_on_the_server(tiny_vllm):
    queue = RunQueue(EngineRunner(device="cpu"))
    before = generated_tokens(tiny_vllm.url)
    seat = queue.join(request(tiny_vllm.url, "abc", LONG), threading.Event())
    while (trace := seat.run.snapshot().trace) is None or len(trace.steps) < 3:
        assert seat.run.snapshot().phase not in (DONE, STOPPED), "the run ended before it could be stopped"
        time.sleep(0.01)
    queue.leave(seat)
    ended = seat.run.wait_until_ended(60)
    assert ended.phase == STOPPED and not ended.trace.complete
    time.sleep(3.0)                                   # long enough for hundreds of tokens, had it gone on
    generated = generated_tokens(tiny_vllm.url) - before
    assert generated < LONG / 2, generated
