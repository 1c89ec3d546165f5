"""A tree run's trace: written with its trees, read back equal, and refused (one TraceFormatError
naming the field's path) when a hand edit breaks a tree's structure, verdicts, main line or KV
arithmetic. Chain traces carry no `tree` and older files load unchanged."""

from __future__ import annotations

import copy
import json

import pytest

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from engine.formats.trace import Trace, TraceFormatError


@pytest.fixture(scope="module")
def tree_document() -> dict:
    engine = SpeculativeEngine(build_tiny_pair(seed=3, draft_noise=0.05))
    trace = engine.generate("The cache must match", SpecConfig(k=4, tree_nodes=10, tree_branch=3, max_new_tokens=30))
    assert any(step.tree.path and step.rejected_at is not None for step in trace.steps)
    return trace.to_dict()


def test_a_tree_trace_round_trips(tree_document):
    trace = Trace.from_dict(tree_document)
    assert Trace.from_json(trace.to_json()).steps == trace.steps
    assert trace.summary.mean_tree_nodes == pytest.approx(
        sum(len(step["tree"]["nodes"]) for step in tree_document["steps"]) / len(tree_document["steps"]))


def test_a_chain_trace_has_no_tree_and_loads_without_the_tree_fields():
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    document = engine.generate("Hello", SpecConfig(k=3, max_new_tokens=12)).to_dict()
    assert all("tree" not in step for step in document["steps"])
    for name in ("tree_nodes", "tree_branch"):     # a file from before trees
        del document["config"][name]
    trace = Trace.from_dict(document)
    assert trace.config.tree_nodes == 0 and trace.summary.mean_tree_nodes is None


def first_step_with(document: dict, test) -> int:
    return next(i for i, step in enumerate(document["steps"]) if test(step))


def edit(document: dict, change) -> dict:
    broken = copy.deepcopy(document)
    change(broken)
    return broken


def branched(step: dict) -> bool:
    return any(node["parent"] is not None for node in step["tree"]["nodes"]) and bool(step["tree"]["path"])


@pytest.mark.parametrize("change, field", [
    (lambda s: s["tree"]["nodes"][-1].update(parent=len(s["tree"]["nodes"])), "tree.nodes[{last}].parent"),
    (lambda s: s["tree"]["nodes"][-1].update(depth=9), "tree.nodes[{last}].depth"),
    (lambda s: s["tree"]["nodes"][1].update(id=7), "tree.nodes[1].id"),
    (lambda s: s["tree"]["nodes"][0].update(verdict="maybe"), "tree.nodes[0].verdict"),
    (lambda s: s["tree"]["nodes"][0].update(p=1.5), "tree.nodes[0].p"),
    (lambda s: s["tree"]["path"].reverse() if len(s["tree"]["path"]) > 1 else s["tree"]["path"].append(99),
     "tree.path[0]"),
    (lambda s: s["tree"]["nodes"][-1].update(verdict="accepted"), "tree.nodes[{last}].verdict"),
    (lambda s: s["kv"]["target"].update(after_forward=s["kv"]["target"]["after_forward"] + 1,
                                         after_cutoff=s["kv"]["target"]["after_cutoff"] + 1), "kv.target"),
    (lambda s: s["draft"][0].update(id=s["draft"][0]["id"] + 1), ".draft"),
    (lambda s: s.pop("tree"), "tree"),
])
def test_a_broken_tree_is_refused_with_its_path(tree_document, change, field):
    index = first_step_with(tree_document, lambda step: len(step["tree"]["path"]) > 1 and branched(step))
    last = len(tree_document["steps"][index]["tree"]["nodes"]) - 1
    broken = edit(tree_document, lambda d: change(d["steps"][index]))
    with pytest.raises(TraceFormatError) as error:
        Trace.from_dict(json.loads(json.dumps(broken)))
    assert f"steps[{index}]" in str(error.value) and field.format(last=last).lstrip(".") in str(error.value), error.value


def test_a_tree_in_a_chain_run_is_refused(tree_document):
    broken = edit(tree_document, lambda d: d["config"].update(tree_nodes=0))
    with pytest.raises(TraceFormatError, match=r"steps\[0\]\.tree is set but config\.tree_nodes is 0"):
        Trace.from_dict(broken)
