"""An audited trace (issue #38 item 8, engine/formats/trace_audit.py): the audit saved in the trace, read back
strictly, cut with the trace, and drawn where its tokens are.

Oracles: `python -m engine.audit TRACE --write OUT` on a real tiny-pair run saves, for every emitted token, the
target's probability from a forward over that token's prefix alone (tests/test_audit.py's oracle); the timeline's
marks sit on the cells an independent walk of the steps finds (an accepted draft's row, else the target's row); a
mark is planted one token off and the walk catches it."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.audit.marks import RARE
from engine.config import SpecConfig
from engine.decode.sampling import SamplingParams
from engine.decode.speculative import SpeculativeEngine
from engine.formats.trace import Trace, TraceFormatError, first_steps
from engine.formats.trace_audit import TraceAudit
from engine.loading.tiny import build_tiny_pair
from specviz.figures.timeline import AUDIT_CORNER, audit_cells, timeline_figure
from specviz.other_engine import audit_step, audit_summary
from specviz.run.step_detail import step_detail_html
from test_audit import prefix_probs
from trace_factory import make_trace

ROOT = Path(__file__).resolve().parent.parent


def audited(trace: Trace, marked: tuple[int, ...], temperature: float = 0.7) -> Trace:
    """`trace` with an audit whose marked tokens get 1e-9 and every other 0.5."""
    tokens = len(trace.output.token_ids)
    probabilities = tuple(1e-9 if i in marked else 0.5 for i in range(tokens))
    return dataclasses.replace(trace, audit=TraceAudit("a test target (float32)", temperature, 0, 1.0, RARE, 0.001,
                                                       probabilities, marked))


def cells_by_walk(trace: Trace, marked: set[int]) -> list[tuple[int, int]]:
    """The oracle: each emitted token's (step, row), walking every step's verdicts (drafts accepted in order, then
    the target's own token above the largest k)."""
    target_row = max(step.k for step in trace.steps) + 1
    cells, position = [], 0
    for step in trace.steps:
        for j in range(len(step.emitted)):
            if position in marked:
                cells.append((step.index, j + 1 if j < step.num_accepted else target_row))
            position += 1
    return cells


def test_an_audit_is_saved_and_read_back_whole():
    trace = audited(make_trace([2, 4, 0, 1]), (1, 5))
    again = Trace.from_json(trace.to_json())
    assert again.audit == trace.audit
    assert "audit" not in make_trace([2, 4]).to_dict()          # a trace not audited reads as before


@pytest.mark.parametrize("change, words", [
    (lambda a: a | {"probabilities": a["probabilities"][:-1]}, "one each"),
    (lambda a: a | {"marked": [5, 1]}, "each once, in order"),
    (lambda a: a | {"marked": [1]}, "exactly the tokens whose probability is below"),
    (lambda a: a | {"marked": [1, 5, 99]}, "each once, in order"),
    (lambda a: a | {"threshold": 0}, "threshold in (0, 1)"),
    (lambda a: a | {"probabilities": [2.0] * len(a["probabilities"])}, "audit.probabilities"),
])
def test_an_audit_that_does_not_fit_its_trace_is_refused_in_one_sentence(change, words):
    document = audited(make_trace([2, 4, 0, 1]), (1, 5)).to_dict()
    document["audit"] = change(document["audit"])
    with pytest.raises(TraceFormatError, match="audit") as error:
        Trace.from_dict(document)
    assert words in str(error.value)


def test_the_marks_sit_on_the_cells_of_their_tokens_and_a_mark_one_token_off_is_caught():
    trace = make_trace([2, 4, 0, 1, 3], k=4)
    tokens = len(trace.output.token_ids)
    marked = (0, 2, 3, 7, tokens - 1)
    figure = timeline_figure(audited(trace, marked))
    (marks,) = [t for t in figure.data if t.meta == "audit"]
    drawn = [(round(x - AUDIT_CORNER[0]), round(y - AUDIT_CORNER[1])) for x, y in zip(marks.x, marks.y)]
    assert drawn == cells_by_walk(trace, set(marked))
    assert drawn != cells_by_walk(trace, {position + 1 for position in marked})     # the plant: one token off
    assert [c[:2] for c in audit_cells(audited(trace, marked), 5)] == drawn
    assert not any(t.meta == "audit" for t in timeline_figure(trace).data)


def test_a_cut_trace_keeps_the_audit_of_its_tokens():
    trace = audited(make_trace([2, 4, 0, 1]), (1, 9))
    cut = first_steps(trace, 2)
    assert len(cut.audit.probabilities) == len(cut.output.token_ids) and cut.audit.marked == (1,)
    Trace.from_json(cut.to_json())                           # and it reads back


def test_the_page_says_what_the_audit_found_for_the_run_and_the_step():
    trace = audited(make_trace([2, 4, 0, 1]), (1,))
    assert "1 of" in audit_summary(trace) and "is marked ✕" in audit_summary(trace)
    assert "would be marked on average" in audit_summary(trace)
    assert audit_step(trace, 0).startswith("Audit ✕: “") and "p = 1e-09" in audit_step(trace, 0)
    clean = audit_step(trace, 1)                 # a step with nothing marked: each token's p, for comparison
    assert clean.startswith("Audit: nothing marked in this step") and clean.count(" 0.5") == \
        len(trace.steps[1].emitted)
    assert audit_step(make_trace([1]), 0) == "" and audit_summary(make_trace([1])) == ""
    assert "Audit ✕" in step_detail_html(trace, 0) and "Audit ✕" not in step_detail_html(trace, 1)
    assert "Audit: nothing marked" in step_detail_html(trace, 1)
    greedy = audited(make_trace([2, 4, 0, 1]), (1,), temperature=0.0)
    assert "not the target's argmax" in audit_step(greedy, 0)


def test_the_cli_writes_the_trace_with_each_tokens_probability_under_the_target(tmp_path):
    pair = build_tiny_pair()
    trace = SpeculativeEngine(pair).generate("abc", SpecConfig(k=3, temperature=0.7, max_new_tokens=12, seed=3))
    path, out = tmp_path / "run.json", tmp_path / "audited.json"
    trace.save(path)
    result = subprocess.run([sys.executable, "-m", "engine.audit", str(path), "--preset", "tiny-random", "--write",
                             str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    again = Trace.load(out)
    assert again.steps == trace.steps and again.output == trace.output
    rows = prefix_probs(pair, list(trace.prompt.token_ids), list(trace.output.token_ids), SamplingParams(0.7))
    expected = [float(row[token]) for row, token in zip(rows, trace.output.token_ids)]
    assert again.audit.probabilities == pytest.approx(expected, rel=1e-4, abs=1e-7)
    assert again.audit.marked == tuple(i for i, p in enumerate(again.audit.probabilities) if p < RARE)
    assert again.audit.scored_by.endswith("(SpecViz, float32, stock kernels)")


def test_write_refuses_an_emitted_tokens_document(tmp_path):
    document = tmp_path / "emitted.json"
    document.write_text(json.dumps({"schema": "specviz.emitted/1", "runs": []}))
    result = subprocess.run([sys.executable, "-m", "engine.audit", str(document), "--write", str(tmp_path / "o")],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "--write takes a trace" in result.stderr
