"""Hand-built tree steps for UI tests: consistent `StepRecord.tree` records without any model.

A tree is given by its parents (`parents[i]` is node i's parent id, None for the root's
children; siblings in id order are the draft's ranking, first choice first) and the accepted
path (node ids, root-first). Everything else follows the rules of issue #19 / docs/architecture.md §3:
at each accepted node (and the root) the children are tried in rank order until one is accepted,
those tried before it are rejected, the rest unreached; at the node where the walk stops every
child is rejected and the target's own token is *recovered*, or, at a leaf, the target adds a
*bonus* token. The chain fields describe the main line (the path, then the first child rejected
at the stop node); the target cache grows by 1 pending row + the node count and keeps the path.
With `sampling` each tried child carries the acceptance probability of the tree rule (its p after
the siblings tried before it are removed and the rest renormalised) and a draw on the right side.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from engine.records import (Alternative, CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming,
                            TargetToken, Token, TreeNode, TreeRecord)
from engine.formats.trace import Trace
from trace_factory import WORDS, trace_from_steps

P_ACCEPTED, P_REJECTED = 0.7, 0.1          # target probability of an accepted / a rejected candidate
RECOVERED_P = 0.5

# Step 0: the draft's first choice is accepted, its first choice rejected, the second-ranked sibling
# (node 3) rescues the step, then node 6 is accepted and its only child rejected: recovered token.
RESCUE = ((None, None, 0, 0, 1, 2, 3, 3, 6), (0, 3, 6))
# The draft's first choices all the way to a leaf: a bonus token after a path of 3.
FIRST_CHOICES = ((None, None, 0, 1, 2, 2), (0, 2, 4))
# Every child of the root rejected: nothing accepted, the target's token recovered at depth 1.
NOTHING = ((None, None, None, 0, 1), ())
SHAPES = (RESCUE, FIRST_CHOICES, NOTHING)


def _word(seed: int) -> tuple[int, str]:
    return 2000 + seed, WORDS[seed % len(WORDS)]


def _depths(parents: Sequence[int | None]) -> list[int]:
    depths: list[int] = []
    for parent in parents:
        depths.append(1 if parent is None else depths[parent] + 1)
    return depths


def _verdicts(parents: Sequence[int | None], path: Sequence[int]) -> dict[int, str]:
    verdicts = {node: "unreached" for node in range(len(parents))}
    for parent in (None, *path):
        children = [node for node, p in enumerate(parents) if p == parent]
        for child in children:
            if child in path:
                verdicts[child] = "accepted"
                break
            verdicts[child] = "rejected"
    return verdicts


def make_tree_step(index: int, context_len: int, parents: Sequence[int | None], path: Sequence[int],
                   sampling: bool = False, carryover: Sequence[Token] = (), first: bool = False) -> StepRecord:
    """One tree step of `len(parents)` nodes whose accepted path is `path` (see the module doc)."""
    seed = index * 37
    depths, verdicts = _depths(parents), _verdicts(parents, path)
    nodes = []
    for node, parent in enumerate(parents):
        rank = sum(1 for other in range(node) if parents[other] == parent)
        verdict = verdicts[node]
        p = P_ACCEPTED if verdict == "accepted" else P_REJECTED
        tried_before = sum(1 for other in range(node) if parents[other] == parent and verdicts[other] == "rejected")
        accept_prob = draw = None
        if sampling and verdict != "unreached":
            accept_prob = p / (1.0 - P_REJECTED * tried_before)
            draw = accept_prob * 0.5 if verdict == "accepted" else min(0.99, accept_prob + 0.1)
        nodes.append(TreeNode(node, parent, depths[node], Token(*_word(seed + node)), q=0.55 * 0.5 ** rank, p=p,
                              verdict=verdict, accept_prob=accept_prob, draw=draw))
    stop = path[-1] if path else None
    rejected_here = [n for n in nodes if n.parent == stop]
    main = [nodes[i] for i in path] + rejected_here[:1]
    k = len(main)
    extra_id, extra_text = _word(seed + 90)
    kind = "recovered" if rejected_here else "bonus"
    drafts = tuple(DraftToken(n.token.id, n.token.text, n.q, (Alternative(n.token.id, n.token.text, n.q),))
                   for n in main)
    targets = [TargetToken(n.token.id, n.token.text, n.p) for n in nodes if n.id in path]
    if rejected_here:
        targets.append(TargetToken(extra_id, extra_text, rejected_here[0].p,
                                   (Alternative(extra_id, extra_text, RECOVERED_P),)))
        targets.append(TargetToken(*_word(seed + 91), None))
    else:
        targets.append(TargetToken(extra_id, extra_text, None, (Alternative(extra_id, extra_text, RECOVERED_P),)))
    emitted = tuple(EmittedToken(nodes[i].token.id, nodes[i].token.text, "accepted") for i in path) + \
        (EmittedToken(extra_id, extra_text, kind),)
    before = 0 if first else context_len - 1
    kv_target = CacheLengths(before, context_len + len(nodes), len(nodes) - len(path), context_len + len(path), 0)
    deepest = max(depths)
    fed = [n for n in nodes if n.depth < deepest]                 # the draft never feeds its deepest nodes
    fed_path = [i for i in path if depths[i] < deepest]
    draft_before = 0 if first else context_len - len(carryover)
    kv_draft = CacheLengths(draft_before, context_len + len(fed), len(fed) - len(fed_path),
                            context_len + len(fed_path), 0)
    return StepRecord(
        index=index, context_len=context_len, k=k, carryover=tuple(carryover), draft=drafts, target=tuple(targets),
        verdicts=tuple("accepted" if n.id in path else "rejected" for n in main),
        accept_prob=tuple(n.accept_prob for n in main), draws=tuple(n.draw for n in main), num_accepted=len(path),
        emitted=emitted, kv_target=kv_target, kv_draft=kv_draft,
        timing=StepTiming(draft=8.0 * deepest, verify=55.0, total=8.0 * deepest + 60.0), eos=False,
        residual=(Alternative(extra_id, extra_text, RECOVERED_P),) if sampling and rejected_here else (),
        overlap=tuple(0.7 for _ in main), tree=TreeRecord(tuple(nodes), tuple(path)))


def make_tree_steps(shapes: Sequence[tuple[Sequence[int | None], Sequence[int]]] = SHAPES, sampling: bool = False,
                    prompt_len: int = 12) -> list[StepRecord]:
    """Consecutive tree steps of the given (parents, path) shapes, each cache starting where it ended."""
    steps, context, carry = [], prompt_len, ()
    for index, (parents, path) in enumerate(shapes):
        step = make_tree_step(index, context, parents, path, sampling=sampling, carryover=carry, first=index == 0)
        steps.append(step)
        context += step.num_emitted
        deepest = max(node.depth for node in step.tree.nodes)
        unfed = [step.tree.nodes[i].token for i in path if step.tree.nodes[i].depth == deepest]
        carry = (*unfed, Token(step.emitted[-1].id, step.emitted[-1].text))
    return steps


def make_tree_trace(shapes: Sequence[tuple[Sequence[int | None], Sequence[int]]] = SHAPES,
                    sampling: bool = False) -> Trace:
    """A tree run's trace of `shapes` (config.tree_nodes and tree_branch as large as its biggest tree)."""
    steps = make_tree_steps(shapes, sampling=sampling)
    trace = trace_from_steps(steps, sampling=sampling)
    config = trace.config.replace(k=max(n.depth for s in steps for n in s.tree.nodes),
                                  tree_nodes=max(len(s.tree.nodes) for s in steps),
                                  tree_branch=max(_branching(step) for step in steps))
    return dataclasses.replace(trace, config=config)


def _branching(step: StepRecord) -> int:
    parents = [node.parent for node in step.tree.nodes]
    return max(parents.count(parent) for parent in set(parents))
