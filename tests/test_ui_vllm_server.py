"""The Run tab on a real vLLM 0.32 server (marker vllm; the session's one server on the tiny random pair,
tests/vllm_session.py): the page's run, through app.py's real EngineRunner, draws the same tokens as a run
asked of the server directly, and its /metrics interval is exactly what the server did meanwhile: this run's
own per-step counts plus the probe the page sends first (measured on its own around a lone probe)."""

from __future__ import annotations

import pytest

from app import EngineRunner
from control_values import controls, progress
from engine.config import SpecConfig
from engine.vllm.counters import SpecCounters, read_counters
from engine.vllm.server_info import probe
from engine.vllm.source import start_generation
from engine.vllm.transport import parse_address
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from specviz.serving.runner import VLLM_SERVER
from specviz.serving.server_interval import share
from vllm_session import K

pytestmark = pytest.mark.vllm
NAMES = Views.names()
TOKENS = 24


def own_counts(trace) -> SpecCounters:
    """A trace's verify steps as /metrics would count them."""
    steps = [step for step in trace.steps if step.k > 0]
    return SpecCounters(len(steps), sum(step.k for step in steps), sum(step.num_accepted for step in steps),
                        tuple(sum(step.num_accepted > i for step in steps) for i in range(K)))


def plus(a: SpecCounters, b: SpecCounters) -> SpecCounters:
    size = max(len(a.accepted_per_pos), len(b.accepted_per_pos))
    pad = lambda c: c.accepted_per_pos + (0,) * (size - len(c.accepted_per_pos))      # noqa: E731
    return SpecCounters(a.num_drafts + b.num_drafts, a.num_draft_tokens + b.num_draft_tokens,
                        a.num_accepted_tokens + b.num_accepted_tokens, tuple(x + y for x, y in zip(pad(a), pad(b))))


def test_the_page_draws_a_real_servers_run_and_the_interval_it_caused(tiny_vllm):
    address = parse_address(tiny_vllm.url)
    before = read_counters(address)
    probe(tiny_vllm.url)                                   # what the page's own probe adds to the counters
    probing = read_counters(address).minus(before)

    handlers = Handlers(EngineRunner(device="cpu"), min_interval=0.0)
    values = controls(preset=VLLM_SERVER, server=tiny_vllm.url, prompt="abc", max_new_tokens=TOKENS, k=K)
    final = [dict(zip(NAMES, out)) for out in handlers.run(None, False, None, *values, progress=progress)][-1]
    trace = final["trace"]
    assert final["status"].startswith("Done") and trace.complete and trace.config.k == K
    assert "vLLM 0.32.0" in final["metrics"] and "vLLM does not return p, q" in final["detail"]

    direct = start_generation(tiny_vllm.url, "abc", SpecConfig(k=K, max_new_tokens=TOKENS))
    while not direct.is_done:
        direct.step()
    assert direct.trace().output.token_ids == trace.output.token_ids        # greedy: the server's own answer

    expected = share(plus(own_counts(trace), probing))
    bars = {bar.meta: bar for bar in final["positions"].data}
    assert list(bars["server"].customdata) == list(expected.reached)
    assert [round(y, 9) for y in bars["server"].y] == [round(rate or 0.0, 9) for rate in expected.rates]
