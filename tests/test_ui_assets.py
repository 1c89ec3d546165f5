"""Shipped assets: example prompts, css, and the recorded trace shown on the first screen."""

from __future__ import annotations

import json
import shutil

from specviz.assets import ASSETS_DIR, DEMO_TRACE, load_demo_trace, load_examples, read_css, trace_paths
from trace_factory import make_trace


def test_examples_cover_code_explanation_and_repetition():
    examples = load_examples()
    assert len(examples) >= 4
    names = " ".join(e.name.lower() for e in examples)
    assert "code" in names and "explanation" in names and "repetition" in names
    assert all(e.prompt.strip() for e in examples)


def test_css_defines_the_token_colours_and_large_text():
    css = read_css()
    for needle in (".sv-tok.sv-accepted", ".sv-tok.sv-rejected", ".sv-out.sv-bonus", "body.sv-large", "@media"):
        assert needle in css


def test_recorded_traces_in_assets_all_load():
    for path in trace_paths():
        assert load_demo_trace(path.parent.parent).trace is not None, path


def test_demo_trace_prefers_the_default_pair_and_falls_back(tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    assert load_demo_trace(tmp_path).trace is None                      # nothing recorded: the page still opens
    (traces / "a-broken.json").write_text("{", encoding="utf-8")
    make_trace([2, 1]).save(traces / "b-other.json")
    fallback = load_demo_trace(tmp_path)
    assert fallback.name == "b-other.json" and "a-broken.json" in fallback.problems[0]
    make_trace([4, 4, 4]).save(traces / DEMO_TRACE)
    preferred = load_demo_trace(tmp_path)
    assert preferred.name == DEMO_TRACE and len(preferred.trace.steps) == 3


def test_unreadable_examples_give_an_empty_list(tmp_path):
    (tmp_path / "examples.json").write_text(json.dumps([{"nam": "x"}]), encoding="utf-8")
    assert load_examples(tmp_path) == []
    shutil.copy(ASSETS_DIR / "examples.json", tmp_path / "examples.json")
    assert load_examples(tmp_path) == load_examples()
