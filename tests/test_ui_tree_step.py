"""A tree step reads as a tree step (issue #27): the step panel counts nodes drafted and tried and the path
accepted, lists the walk's trials in order with the node ids the tree figure shows, says why the walk stopped,
and never guesses a chain's reason for the main line's length; the run's cards count nodes and path tokens;
the next step's carryover is stated in one order wherever it is stated.

The walk oracle is written from the TreeRecord alone (the children of the committed text and of each accepted
node, in id order, that the target checked); a planted bug in the walk's order is caught.
"""

from __future__ import annotations

import dataclasses
import re
from html import unescape

import pytest

from engine.formats.trace import Trace
from engine.metrics import tree_counts
from engine.records import StepRecord
from specviz.assets import ASSETS_DIR
from specviz.run.output_view import metrics_html
from specviz.run.step_detail import step_detail_html
from specviz.run.step_reasons import budget_note
from specviz.tokens import visible
from trace_factory import make_trace
from tree_factory import FIRST_CHOICES, NOTHING, RESCUE, make_tree_trace


def text(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", " ", html)).replace("  ", " ")


def walk_rows(html: str) -> list[tuple[int, str]]:
    """(node id, verdict) of each row of the walk table, in order."""
    return [(int(node), verdict) for node, verdict in
            re.findall(r"<tr class='sv-(?:accepted|rejected)'><td[^>]*>\d+</td><td[^>]*><span class='sv-node-id'>(\d+)</span>"
                       r".*?<td[^>]*class='sv-verdict'>. (accepted|rejected)</td>", html)]


def expected_walk(step: StepRecord) -> list[tuple[int, str]]:
    tree = step.tree
    return [(node.id, node.verdict) for parent in (None, *tree.path) for node in tree.nodes
            if node.parent == parent and node.verdict != "unreached"]


def real_tree() -> Trace:
    return Trace.load(ASSETS_DIR / "traces" / "lab-T.json")          # the default pair, greedy, 16 nodes


@pytest.mark.parametrize("sampling", [False, True])
def test_the_step_panel_walks_the_tree_in_order_with_node_ids(sampling):
    trace = make_tree_trace(sampling=sampling)
    for step in trace.steps:
        html = step_detail_html(trace, step.index)
        tried = sum(node.verdict != "unreached" for node in step.tree.nodes)
        head = text(html.split("</div>")[0])
        assert (f"tree: {len(step.tree.nodes)} nodes drafted, {tried} tried by the walk, path of "
                f"{len(step.tree.path)} accepted → emitted {step.num_emitted} token") in head
        assert "drafts accepted" not in head and "context window" not in html
        assert walk_rows(html) == expected_walk(step)
        assert f"the {tried} of {len(step.tree.nodes)} nodes the target checked" in text(html)
        if sampling:
            assert all(f"u = {node.draw:.3f}" in unescape(html) for node in step.tree.nodes if node.draw is not None)


def test_real_tree_steps_walk_as_recorded_and_their_header_counts_nodes():
    trace = real_tree()
    for step in trace.steps:
        html = step_detail_html(trace, step.index)
        assert walk_rows(html) == expected_walk(step)
        assert "Draft vs target" not in html and "Why the walk stopped there:" in html


def test_why_the_walk_stopped_there():
    trace = make_tree_trace()                                  # step 0: node 6's one child (8) refused
    assert ("The walk stopped at node 6 ‘:’: its one child (8 ‘)’) was tried and rejected, so no branch goes on. "
            "The target's own token ‘1’ is recovered instead: its argmax there.") in text(step_detail_html(trace, 0))
    leafy = make_tree_trace(shapes=(FIRST_CHOICES,))            # the path ends in a leaf at the depth limit k = 3
    leaf = text(step_detail_html(leafy, 0))
    assert "The walk stopped at node 4 ‘" in leaf and "depth 3, because it is a leaf: the tree is at most k = 3 deep" \
        in leaf and "so the target adds the bonus token" in leaf
    nothing = text(step_detail_html(trace, 2))
    assert "The walk stopped at the committed text: its 3 children (0 ‘" in nothing and "each tried and rejected" in nothing
    deep = dataclasses.replace(leafy, config=leafy.config.replace(k=6))   # a leaf above the limit: the budget
    assert "because it is a leaf: its children scored below the 6 candidates the node budget kept" in \
        text(step_detail_html(deep, 0))


def test_a_tree_step_never_guesses_a_chains_reason_for_its_length():
    trace = make_tree_trace(shapes=(NOTHING, RESCUE))
    assert budget_note(trace, trace.steps[0]) == ""              # main line of 1, no budget cut: no note at all
    cut = dataclasses.replace(trace, config=trace.config.replace(max_new_tokens=3))
    note = budget_note(cut, cut.steps[1])                        # 1 of 3 tokens emitted before: at most 1 deep
    assert note == ("The tree was at most 1 deep this step, not k = 4: only 2 of the 3 new tokens were left, and a "
                    "step emits at most k + 1.")
    assert "at most 1 deep" in text(step_detail_html(cut, 1))


def test_a_tree_runs_cards_count_nodes_and_path_tokens():
    trace = real_tree()
    counts = tree_counts(trace.steps)
    assert counts.nodes == sum(len(s.tree.nodes) for s in trace.steps)
    assert counts.tried == sum(n.verdict != "unreached" for s in trace.steps for n in s.tree.nodes)
    assert counts.accepted == sum(len(s.tree.path) for s in trace.steps) == trace.summary.accepted
    html = text(metrics_html(trace))
    assert f"{counts.nodes} nodes in {counts.steps} steps, every one checked by its step's one target forward; the " \
           f"walk tried {counts.tried} of them" in html
    assert f"{counts.accepted} path tokens accepted of {counts.nodes} nodes drafted" in html
    assert f"{100 * counts.accepted / counts.nodes:.1f}%" in html and "drafted tokens accepted" not in html
    assert tree_counts(make_trace([2, 4]).steps) is None
    assert "drafted tokens accepted" in text(metrics_html(make_trace([2, 4])))


def test_the_next_carryover_is_said_in_one_order_in_both_places():
    chain = make_trace([4, 2])                                   # step 0: all 4 accepted, then the bonus
    step = chain.steps[0]
    order = f"d4 “{visible(step.draft[-1].text)}” and then the bonus token “{visible(step.emitted[-1].text)}”"
    html = unescape(step_detail_html(chain, 0))
    emitted = html.split("<b>Emitted</b>")[1].split("</div>")[0]
    caches = html.split("Why the caches have these lengths")[1]
    assert f"Next step, {order} are fed to the draft model first, as carryover" in emitted
    assert f"Next step, {order} are fed to the draft model first, as carryover" in caches
    assert "D4" not in html                                     # a draft's name keeps its lower case (issue #33)
    tree = make_tree_trace()
    leaf = unescape(step_detail_html(tree, 1))                   # a bonus after an unfed leaf
    node = tree.steps[1].tree.nodes[tree.steps[1].tree.path[-1]]
    order = (f"the accepted node {node.id} “{visible(node.token.text)}” and then the bonus token "
             f"“{visible(tree.steps[1].emitted[-1].text)}”")
    assert leaf.count(f"Next step, {order} are fed") == 2


def test_a_planted_walk_order_bug_is_caught(monkeypatch):
    """The planted bug: the walk lists every node, tried or not."""
    monkeypatch.setattr("specviz.run.tree_walk.walk_order", lambda tree: list(tree.nodes))
    with pytest.raises(AssertionError):
        test_the_step_panel_walks_the_tree_in_order_with_node_ids(False)


def test_a_leaf_at_the_budgets_depth_has_the_budgets_reason_only():
    """Issue #33 item 1: a step whose tree the token budget cut to 3 deep said so in its note, while the walk's
    stop reason blamed the node budget for the leaf at depth 3. One reason per stop: the budget's."""
    leafy = make_tree_trace(shapes=(FIRST_CHOICES,))            # a path of 3 ending in a leaf at depth 3
    cut = dataclasses.replace(leafy, config=leafy.config.replace(k=6, max_new_tokens=4))
    html = text(step_detail_html(cut, 0))
    assert budget_note(cut, cut.steps[0]).startswith("The tree was at most 3 deep this step, not k = 6")
    assert "node budget" not in html
    assert ("because it is a leaf: this step's tree could be at most 3 deep, not k = 6, since the run's token budget "
            "had room for only 4 more tokens") in html


def test_the_fed_candidates_add_up_and_never_outnumber_the_tree_nodes_that_were_fed():
    """Issue #33 item 1: '8 tree nodes it expanded (... the deepest level never is)' on a tree of 8 nodes 4 deep.
    The draft cache's count of fed candidates is split into the tree nodes that must have been fed (those with
    children in the tree) and the rest, and the split adds up; no sentence calls more tree nodes fed."""
    trace = real_tree()
    for step in trace.steps:
        caches = text(step_detail_html(trace, step.index)).split("Why the caches have these lengths")[1]
        cache = step.kv_draft
        pending = step.context_len if cache.before == 0 else len(step.carryover)
        fed = cache.after_forward - cache.before - pending
        parents = len({node.parent for node in step.tree.nodes} - {None})
        assert f"then the {fed} candidates it expanded" in caches
        claimed = [int(n) for n in re.findall(r"(\d+) (?:of them are the )?tree nodes? (?:with children|it expanded)",
                                              caches)]
        assert claimed and all(n <= parents for n in claimed), (step.index, claimed, parents)
        if fed > parents:
            assert f"{parents} + {fed - parents} = {fed}" in caches
