"""A vLLM trace's numbers are vLLM's own (issue #32, docs/architecture.md §10 "One quantity, one number").

Every stream recorded from a real vLLM 0.32.0 server (tests/data/vllm/: a draft-model server and an
n-gram server, greedy, sampled and long) is replayed over real HTTP (tests/vllm_replay.py) and run
through the Run tab's source (engine/vllm/source.py); the oracle is the server's own final
`metrics.speculative_decoding`: mean_acceptance_length, draft_acceptance_rate, acceptance_histogram.
SpecViz's summary (engine/metrics.py), and every view drawn from it, must give the same numbers. The
definition, checked by hand on SpecViz's own traces: τ and the histogram count the steps that verified
drafts; a step that drafted nothing is left out and the τ card says so.
"""

from __future__ import annotations

import dataclasses
import html
import re

import pytest

from engine.cli.report import format_summary
from engine.config import SpecConfig
from engine.formats.trace import Trace
from engine.metrics import running_tokens_per_step
from engine.vllm.source import start_generation
from records_factory import make_trace
from specviz.explore.server_sweep import run_result
from specviz.figures.acceptance import histogram_figure, per_step_figure
from specviz.quantities import TOKENS_PER_STEP
from specviz.run.output_view import metrics_html
from vllm_replay import ReplayServer, load_recording

RECORDINGS = {"tiny_draft_k3": ("draft_model", (5, 5)), "tiny_ngram_k3": ("ngram", (1, 3))}
CASES = [(name, stream) for name in RECORDINGS for stream in sorted(load_recording(name)["streams"])]


@pytest.fixture(scope="module", params=sorted(RECORDINGS))
def replayed(request):
    """(recording name, its recording, a replay server) for one recorded vLLM server."""
    recording = load_recording(request.param)
    server = ReplayServer(recording)
    yield request.param, recording, server
    server.close()


def server_metrics(recording: dict, stream: str) -> dict:
    """The server's own speculative-decoding metrics for the recorded stream."""
    return next(event["metrics"]["speculative_decoding"] for event in recording["streams"][stream]["events"]
                if not event.get("choices"))


def replay_trace(name: str, recording: dict, url: str, stream: str) -> Trace:
    """The recorded stream as the Run tab gets it: probe, tokenize, stream, split by the server's arrays."""
    body = recording["streams"][stream]["body"]
    prompt = next(text for text, ids in recording["tokenize"].items() if ids == body["prompt"])
    method, lookup = RECORDINGS[name]
    config = SpecConfig(k=3, temperature=body["temperature"], max_new_tokens=body["max_tokens"], seed=body["seed"],
                        raw=True)
    generation = start_generation(url, prompt, config, method=method, ngram_lookup=lookup)
    while not generation.is_done:
        generation.step()
    return generation.trace()


def test_every_recorded_stream_gives_the_servers_own_numbers(replayed) -> None:
    name, recording, server = replayed
    for stream in sorted(recording["streams"]):
        own = server_metrics(recording, stream)
        trace = replay_trace(name, recording, server.url, stream)
        summary = trace.summary
        where = f"{name}/{stream}"
        assert summary.mean_accepted_length == pytest.approx(own["mean_acceptance_length"]), where
        assert summary.acceptance_rate == pytest.approx(own["draft_acceptance_rate"]), where
        assert summary.accepted_length_histogram == tuple(own["acceptance_histogram"]), where
        assert summary.verify_steps == own["num_spec_steps"], where
        assert (summary.drafted, summary.accepted) == (own["num_draft_tokens"], own["num_accepted_draft_tokens"]), where
        # the steps left out: the prefill, and (n-gram) the lookups that found no match; all still emitted a token
        assert summary.undrafted_steps == summary.steps - own["num_spec_steps"] >= 1, where
        assert summary.new_tokens == len(trace.output.token_ids), where
        views_agree(trace, own, where)


def views_agree(trace: Trace, own: dict, where: str) -> None:
    """The τ card, the per-step chart's running τ, the histogram's bars and Explore's server-sweep row."""
    value, note = tau_card(metrics_html(trace))
    assert value == f"{own['mean_acceptance_length']:.2f}", where
    left_out = trace.summary.undrafted_steps
    assert f"{left_out} step{'s' * (left_out != 1)} that drafted nothing" in note, where
    running = per_step_figure(trace).to_dict()["data"]
    line = next(series for series in running if series.get("meta") == "running")
    assert line["y"][-1] == pytest.approx(own["mean_acceptance_length"]), where
    bars = next(series for series in histogram_figure(trace).to_dict()["data"] if series.get("meta") == "measured")
    assert list(bars["customdata"]) == own["acceptance_histogram"], where
    assert sum(bars["y"]) == pytest.approx(1.0), where        # shares of the verify steps, not of every step
    row = run_result(trace, 0, 0)
    assert row.mean_accepted_length == pytest.approx(own["mean_acceptance_length"]), where
    assert row.acceptance_rate == pytest.approx(own["draft_acceptance_rate"]), where


def tau_card(cards: str) -> tuple[str, str]:
    """The τ card's value and note, as the page shows them."""
    found = re.search(rf"data-quantity='{TOKENS_PER_STEP.key}'><div class='sv-card-label'>[^<]*</div>"
                      r"<div class='sv-card-value'>([^<]*)</div><div class='sv-card-note'>([^<]*)</div>", cards)
    assert found is not None, "no τ card"
    return found.group(1), html.unescape(found.group(2))


def test_spec_viz_traces_keep_their_numbers_when_every_step_drafted() -> None:
    """SpecViz's own first step prefills and verifies: no step is left out, τ = emitted tokens / steps."""
    trace = make_trace([(4, 4), (4, 1), (4, 0), (2, 2)], wall_s=2.0)
    summary = trace.summary
    assert summary.verify_steps == summary.steps == 4 and summary.undrafted_steps == 0
    assert summary.mean_accepted_length == pytest.approx(11 / 4)          # 5 + 2 + 1 + 3 tokens in 4 steps
    assert summary.accepted_length_histogram == (1, 1, 1, 0, 1)
    value, note = tau_card(metrics_html(trace))
    assert value == "2.75" and "drafted nothing" not in note


def test_a_step_that_drafted_nothing_is_left_out_and_counted_on_the_card() -> None:
    """An n-gram lookup without a match (or the budget's last token): one token, no verification."""
    trace = make_trace([(4, 4), (0, 0), (4, 1), (0, 0)], wall_s=2.0)
    summary = trace.summary
    assert (summary.steps, summary.target_forwards, summary.new_tokens) == (4, 4, 5 + 1 + 2 + 1)
    assert summary.verify_steps == 2 and summary.undrafted_steps == 2
    assert summary.mean_accepted_length == pytest.approx(1 + 5 / 2)       # (5 + 2) tokens in 2 verify steps
    assert summary.accepted_length_histogram == (0, 1, 0, 0, 1)
    assert summary.acceptance_rate == pytest.approx(5 / 8)
    assert running_tokens_per_step(trace.steps) == pytest.approx([5.0, 5.0, 3.5, 3.5])
    assert tau_card(metrics_html(trace))[0] == "3.50"
    assert "2 steps that drafted nothing (the token budget's last token) are left out" in tau_card(metrics_html(trace))[1]
    assert "mean length  3.50 tokens per step" in format_summary(trace)
    assert "2 step(s) that drafted nothing left out" in format_summary(trace)          # the CLI says it too
    # τ − 1 = r × drafts per verify step, exactly (the accepted drafts are counted once for both)
    assert summary.mean_accepted_length - 1 == pytest.approx(summary.acceptance_rate * summary.drafted / 2)


def test_no_step_drafted_yet_gives_no_tau() -> None:
    prefill = make_trace([(0, 0)])
    assert prefill.summary.mean_accepted_length is None and prefill.summary.accepted_length_histogram == (0,)
    assert running_tokens_per_step(prefill.steps) == [None]
    assert dataclasses.replace(prefill, steps=()).summary.mean_accepted_length is None
