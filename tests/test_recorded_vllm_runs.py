"""The Run tab's recorded sampled vLLM runs (issue #38 item 8): each asset is the run its saved record describes
(benchmarks/data/vllm-sampled-runs-*.json, scripts/record_vllm_sampled.py), with the audit the record counted,
and the page offers both, labelled with their server and their marks.

The audit itself is checked against the target's own probabilities in tests/test_trace_audit.py; this test ties the
shipped files to the record that docs/benchmark.md quotes (its block regenerates from that record:
tests/test_figures_traced.py)."""

from __future__ import annotations

import json

import pytest

from engine.formats.trace import Trace
from engine.vllm.server_info import FIX_NAME
from specviz.assets import ASSETS_DIR, load_demo_trace
from specviz.run.recorded import choice_label, status_for

ROOT = ASSETS_DIR.parent
RECORD = sorted((ROOT / "benchmarks" / "data").glob("vllm-sampled-runs-*.json"))[-1]
SAVED = json.loads(RECORD.read_text(encoding="utf-8"))


@pytest.mark.parametrize("run", SAVED["runs"], ids=[run["asset"] for run in SAVED["runs"]])
def test_each_asset_is_the_recorded_run_with_its_audit(run):
    trace = Trace.load(ASSETS_DIR / "traces" / run["asset"])
    assert trace.config.engine == run["engine"] and (FIX_NAME in trace.config.engine) == run["fixed_sampler"]
    assert trace.prompt.text == SAVED["prompt"] and trace.config.temperature == SAVED["temperature"]
    assert trace.config.k == SAVED["k"] and trace.split is None and trace.complete
    assert (len(trace.steps), len(trace.output.token_ids)) == (run["steps"], run["tokens"])
    audit = trace.audit
    assert audit.scored_by == SAVED["scored_by"] and audit.temperature == SAVED["temperature"]
    assert len(audit.marked) == run["marked"] and audit.expected_marked == pytest.approx(run["expected_marked"])
    position, steps = 0, set()
    for step in trace.steps:
        steps |= {step.index for _ in range(len(step.emitted)) if (position := position + 1) - 1 in audit.marked}
    assert sorted(steps) == run["marked_steps"]


def test_the_page_offers_both_runs_labelled_with_their_server_and_marks():
    offered = dict(load_demo_trace().offered())
    for run in SAVED["runs"]:
        trace = offered[run["asset"]]
        label = choice_label(trace)
        assert label.startswith("vLLM 0.32.0" + (", CPU sampler fixed" if run["fixed_sampler"] else " ·"))
        assert label.endswith(f"{run['marked']} tokens marked by the audit")
        status = status_for(run["asset"], trace)
        assert f"{run['marked']} of {run['tokens']} tokens" in status
        # the shipped server's recovered tokens are put down to its known bug; the fixed server's run is not
        assert ("vLLM issue #55005" in status) == (not run["fixed_sampler"])
        assert ("with SpecViz's CPU sampler fix" in status) == run["fixed_sampler"]


@pytest.mark.parametrize("asset", sorted(path.name for path in (ASSETS_DIR / "traces").glob("*vllm*.json")))
def test_the_servers_first_step_says_it_is_the_prompts_prefill(asset):
    """vLLM's first step reads the prompt and gives one token without drafts: the page says so, not that the
    context window was full (a student saw 'had no room for more' beside a 41-token context)."""
    from specviz.run.step_detail import step_detail_html
    from specviz.run.step_reasons import budget_note
    trace = Trace.load(ASSETS_DIR / "traces" / asset)
    first = trace.steps[0]
    assert first.k == 0 and len(first.emitted) == 1
    note = budget_note(trace, first)
    assert note.startswith(f"k = 0 this step, not {trace.config.k}: the server's first step reads the prompt")
    assert "context window" not in note
    assert all("context window" not in budget_note(trace, step) for step in trace.steps)
    assert "coloured like a bonus: the target&#x27;s own token, with nothing drafted" in step_detail_html(trace, 0)
