"""The Run tab's queue against a real vLLM 0.32 server (marker vllm; the tiny pair, tests/vllm_session.py):
distinct runs in the server lane all end, each the server's own answer for its prompt asked alone
(docs/architecture.md §9, "lanes"). That they stream at once is checked on the replayed server
(tests/test_run_queue_lanes.py), whose pace the test sets: the real tiny pair is too fast to show it
(a clean-clone suite run of 2026-11-28 saw the first of three 32-token runs end 0.14 s before the last
one's first step, its server probe and request having come after)."""

from __future__ import annotations

import threading

import pytest

from app import EngineRunner
from engine.config import SpecConfig
from engine.vllm.transport import parse_address, post_json
from specviz.serving.runner import ModelChoice, RunRequest
from specviz.serving.run_queue import RunQueue
from specviz.serving.shared_run import DONE
from vllm_session import K

pytestmark = pytest.mark.vllm
PROMPTS = ("abc", "Hello, world", "def f(x):\n    return x")
TOKENS = 32


def request(url: str, prompt: str, tokens: int) -> RunRequest:
    return RunRequest(ModelChoice(server=url), prompt, SpecConfig(k=K, max_new_tokens=tokens, raw=True))


def test_distinct_runs_in_the_server_lane_are_each_the_servers_answer_alone(tiny_vllm):
    queue = RunQueue(EngineRunner(device="cpu"), server_runs=len(PROMPTS))
    seats = [queue.join(request(tiny_vllm.url, prompt, TOKENS), threading.Event()) for prompt in PROMPTS]
    ended = [seat.run.wait_until_ended(300) for seat in seats]
    assert [end.phase for end in ended] == [DONE] * len(PROMPTS), [end.error for end in ended]
    for end in ended:
        alone = post_json(parse_address(tiny_vllm.url), "/v1/completions",
                          {"model": "target", "prompt": list(end.trace.prompt.token_ids), "max_tokens": TOKENS,
                           "temperature": 0, "return_token_ids": True}, timeout_s=120)["choices"][0]
        assert end.trace.complete and end.trace.output.token_ids == tuple(alone["token_ids"])
    # the class log (Explore's "your class" star) kept each run with the tokens the page drew
    assert sorted(served.times.output_tokens for served in queue.class_log.runs()) == \
        sorted(len(end.trace.output.token_ids) for end in ended)


# Stop closing the server's request is checked on the replayed server (tests/test_run_queue_lanes.py), which
# streams at a pace the test sets. Against the real tiny pair it cannot be: on a quiet machine vLLM generated all
# 400 tokens before the page had read its third step (clean-clone suite run, 2026-11-28), so nothing was left to stop.
