"""A tree step in the step panel (issue #27): the nodes the walk tried, in order, and why it stopped there.

A chain step's table lists d1..dk; a tree step has no such line. The walk starts at the committed text
and tries each accepted node's children in the draft's ranking: a child is accepted (the walk moves down
to it) or rejected (the next sibling is tried); where every child is refused, or the node is a leaf, the
walk stops and the target adds its own token (docs/architecture.md §2, "Token trees", step 3). The table
lists exactly those trials with the node ids the tree figure shows, then the target's token; the sentence
under it says why the walk stopped (specviz/figures/tree_text.py stop_reason).
"""

from __future__ import annotations

from html import escape

from engine.records import StepRecord, TreeNode
from specviz.figures.tree_text import extra_token, node_name, ranked_children, stop_node, stop_reason, walk_order
from specviz.run.step_table import column_names, labelled, probability_cell
from specviz.tokens import chip, number, visible

VERDICT_MARK = {"accepted": "✓ accepted", "rejected": "✗ rejected"}


def walk_table(step: StepRecord, greedy: bool) -> str:
    """The walk's trials, one row each (order, node id, its parent, the candidate, q, p, the test, verdict, why),
    then the token the target adds where the walk stopped."""
    tree = step.tree
    assert tree is not None, "walk_table needs a tree step"
    tried = walk_order(tree)
    rule = ("greedy: from the committed text, compare every child with the target's argmax there, accept the one "
            "that matches and move down to it; stop where none does" if greedy else
            "sampled: try the children in the draft's order, accepting x with probability p(x), p renormalised "
            "after each refused sibling; stop where every child is refused")
    sampled_heads = "" if greedy else "<th class='sv-col-test'>accept with</th><th class='sv-col-test'>draw u</th>"
    head = ("<tr><th>try</th><th>node</th><th>after</th><th>candidate</th><th>q<br><small>draft prob</small></th>"
            f"<th>p<br><small>target prob</small></th>{sampled_heads}<th class='sv-verdict'>verdict</th>"
            "<th>why</th></tr>")
    rows = [_trial_row(step, number_, node, greedy) for number_, node in enumerate(tried, start=1)]
    extra = extra_token(step)
    if extra is not None:
        blanks = "<td></td><td></td>" + ("" if greedy else "<td class='sv-col-test'></td><td class='sv-col-test'></td>")
        where = node_name(tree, stop_node(tree))
        why = (f"every child of {where} refused: the target's own token there" if extra.kind == "recovered"
               else f"{where} is a leaf: the target's token after it, from the same forward")
        rows.append(f"<tr class='sv-bonus-row'><td>+1</td><td></td><td>{escape(where)}</td>"
                    f"<td>{chip(extra.text, extra.kind)}</td>{blanks}<td class='sv-verdict'>{extra.kind}</td>"
                    f"<td class='sv-why'>{escape(why)}</td></tr>")
    caption = (f"The walk through this step's tree: the {len(tried)} of {len(tree.nodes)} nodes the target checked, "
               f"level by level, with the node ids of the tree above{_untried(step, tried)} ({rule})")
    kind = "sv-walk sv-stacks" + ("" if greedy else " sv-sampled")
    return (f"<div class='sv-table-wrap'><table class='sv-table {kind}'><caption>{escape(caption)}</caption>"
            f"<thead>{head}</thead><tbody>{labelled(''.join(rows), column_names(head))}</tbody></table></div>")


def _untried(step: StepRecord, tried: list[TreeNode]) -> str:
    """'; the other 4 were never tried: 3 hang under a node that was not accepted, 1 follows an accepted sibling'."""
    tree = step.tree
    on_path = {None, *tree.path}
    untried = [node for node in tree.nodes if node not in tried]
    if not untried:
        return ""
    after_sibling = sum(node.parent in on_path for node in untried)
    under = len(untried) - after_sibling
    reasons = ([f"{under} hang{'s' * (under == 1)} under a node that was not accepted"] if under else []) + \
        ([f"{after_sibling} follow{'s' * (after_sibling == 1)} an accepted sibling"] if after_sibling else [])
    return f"; the other {len(untried)} {'was' if len(untried) == 1 else 'were'} never tried: {', '.join(reasons)}"


def walk_stop_html(step: StepRecord, depth_limit: int, greedy: bool, k: int | None = None) -> str:
    """Why the walk stopped where it did, as the row under the table (`depth_limit`: this step's, `k`: the run's)."""
    return (f"<div class='sv-row sv-walk-stop'><b>Why the walk stopped there:</b> "
            f"{escape(stop_reason(step, depth_limit, greedy, k))}</div>")


def _trial_row(step: StepRecord, order: int, node: TreeNode, greedy: bool) -> str:
    tree = step.tree
    sampled = ("" if greedy else f"<td class='sv-col-test'>{probability_cell(node.accept_prob)}</td>"
                                 f"<td class='sv-col-test'>{number(node.draw)}</td>")
    return (f"<tr class='sv-{node.verdict}'><td>{order}</td><td><span class='sv-node-id'>{node.id}</span></td>"
            f"<td>{escape(node_name(tree, node.parent))}</td><td>{chip(node.token.text, node.verdict)}</td>"
            f"<td class='sv-prob'>{probability_cell(node.q)}</td><td class='sv-prob'>{probability_cell(node.p)}</td>"
            f"{sampled}"
            f"<td class='sv-verdict'>{VERDICT_MARK.get(node.verdict, node.verdict)}</td>"
            f"<td class='sv-why'>{escape(_why(step, node, greedy))}</td></tr>")


def _why(step: StepRecord, node: TreeNode, greedy: bool) -> str:
    """Why the walk accepted or refused this node, with the numbers that decided it."""
    accepted = node.verdict == "accepted"
    if greedy or node.accept_prob is None or node.draw is None:
        if accepted:
            return "= the target's argmax here"
        chosen = _target_choice(step, node)
        return f"≠ the target's argmax ‘{chosen}’" if chosen else "≠ the target's argmax"
    siblings = ranked_children(step.tree).get(node.parent, [])
    renormalised = " (p with the siblings refused before it removed)" if siblings and siblings[0].id != node.id else ""
    return (f"u = {node.draw:.3f} {'<' if accepted else '≥'} {probability_cell(node.accept_prob)}: "
            f"{'accept' if accepted else 'reject'}{renormalised}")


def _target_choice(step: StepRecord, node: TreeNode) -> str:
    """The target's argmax at `node`'s parent (greedy): the accepted sibling's token, or where every sibling
    was refused, the recovered token."""
    for sibling in ranked_children(step.tree).get(node.parent, []):
        if sibling.verdict == "accepted":
            return visible(sibling.token.text)
    extra = extra_token(step)
    return visible(extra.text) if extra is not None and extra.kind == "recovered" else ""
