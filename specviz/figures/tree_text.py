"""What one tree step did, in sentences a student can check against the tree figure (issue #19).

A tree step (docs/architecture.md §3, `tree`) drafts several candidates per position and verifies
all of them in one target forward. These sentences say how big the tree was, which path the target
accepted and what ended it (a recovered or bonus token), whether a sibling of the draft's first
choice rescued the step (the case where a tree beats a chain), and what the KV gather kept.
Plain text (callers escape it for HTML or Plotly); used by the tree figure, the KV chart's hover
and the step detail.
"""

from __future__ import annotations

from engine.records import CacheLengths, StepRecord, TreeNode, TreeRecord
from specviz.tokens import visible

ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth"}


def ranked_children(tree: TreeRecord) -> dict[int | None, list[TreeNode]]:
    """Each node's children (None: the root's), in the order they were tried: the draft's ranking,
    which is the order the verify forward fed them (node id order, which is list order: a node's id
    is its index, engine/formats/trace_tree.py)."""
    children: dict[int | None, list[TreeNode]] = {None: []}
    for node in tree.nodes:
        children.setdefault(node.id, [])
    for node in tree.nodes:
        children.setdefault(node.parent, []).append(node)
    return children


def stop_node(tree: TreeRecord) -> int | None:
    """The node where the walk stopped: the last accepted one (None: the root, nothing accepted)."""
    return tree.path[-1] if tree.path else None


def sibling_ranks(tree: TreeRecord) -> dict[int, int]:
    """Node id -> 1 for the draft's first choice among its siblings, 2 for the second, ..."""
    return {child.id: position for kids in ranked_children(tree).values()
            for position, child in enumerate(kids, start=1)}


def ordinal(number: int) -> str:
    return ORDINALS.get(number, f"{number}th")


def first_choice_run(tree: TreeRecord) -> int:
    """How many accepted tokens, from the root, were each the draft's first choice."""
    ranks, count = sibling_ranks(tree), 0
    for node_id in tree.path:
        if ranks[node_id] != 1:
            break
        count += 1
    return count


def tree_summary(step: StepRecord) -> str:
    """'16 nodes drafted, depth 5; accepted path of 4 (nodes 0 → 3 → 7 → 12), then the bonus token ‘x’.'"""
    tree = step.tree
    assert tree is not None, "tree_summary needs a tree step"
    depth = max((node.depth for node in tree.nodes), default=0)
    size = f"{len(tree.nodes)} node{'s' * (len(tree.nodes) != 1)} drafted, depth {depth}"
    extra = extra_token(step)
    if not tree.nodes:
        token = f": the target's own token ‘{visible(extra.text)}’ alone" if extra is not None else ""
        return f"No candidates drafted (no room left for drafts: the token limit or the context window){token}."
    if not tree.path:
        then = (f"the target's own token ‘{visible(extra.text)}’ was recovered" if extra is not None
                else "the run ended here")
        return f"{size}; nothing accepted: every candidate for the next token was rejected, so {then}."
    path = " → ".join(str(node_id) for node_id in tree.path)
    length = f"accepted path of {len(tree.path)} (node{'s' * (len(tree.path) != 1)} {path})"
    if extra is None:
        return f"{size}; {length}; the run ended inside the path (EOS or the token limit)."
    if extra.kind == "bonus":
        return f"{size}; {length}, then the bonus token ‘{visible(extra.text)}’ (node {tree.path[-1]} is a leaf)."
    return (f"{size}; {length}, then the recovered token ‘{visible(extra.text)}’ "
            f"(every child of node {tree.path[-1]} was rejected).")


def rescue_sentence(step: StepRecord) -> str:
    """Whether the accepted path left the draft's first choices: the case where a tree beats a chain."""
    tree = step.tree
    assert tree is not None, "rescue_sentence needs a tree step"
    if not tree.nodes:
        return ""
    run = first_choice_run(tree)
    if run == len(tree.path):
        if not tree.path:
            tried = sum(node.depth == 1 for node in tree.nodes)
            return (f"All {tried} candidates at depth 1 were tried and rejected: no sibling could rescue this step."
                    if tried > 1 else "The one candidate at depth 1 was rejected.")
        return ("Every accepted token was the draft's first choice (the top row): a single line of first choices "
                "would have accepted the same tokens, so here the siblings cost verify rows and added nothing.")
    rescuer = tree.nodes[tree.path[run]]
    gained = len(tree.path) - run
    return (f"At depth {run + 1} the draft's first choice was rejected, so a single line of first choices (the top "
            f"row) would have accepted {run} token{'s' * (run != 1)}; its {ordinal(sibling_ranks(tree)[rescuer.id])}-ranked "
            f"sibling "
            f"‘{visible(rescuer.token.text)}’ was accepted instead, and that branch added {gained} accepted "
            f"token{'s' * (gained != 1)}: this is where a tree beats a chain.")


def gather_sentence(model: str, cache: CacheLengths, step: StepRecord) -> str:
    """'target cache 48 → 65 → 53: the verify forward appended 17 rows (1 pending + 16 tree nodes, node i at
    row 49 + i); the gather kept the 1 pending row and the 4 on the accepted path, moved row → row: 49 → 49
    (node 0), 52 → 50 (node 3), ..., and removed the 12 off the path' (gather_moves; the draft's rows are
    not split: its drafter decides what it feeds)."""
    tree = step.tree
    assert tree is not None, "gather_sentence needs a tree step"
    appended = cache.after_forward - cache.before
    kept = cache.after_cutoff - cache.before
    lengths = f"{model} cache {cache.before} → {cache.after_forward} → {cache.after_cutoff}"
    if model != "target":
        return (f"{lengths}: drafting appended {appended} rows (its pending tokens and the nodes it fed); the gather "
                f"kept {kept} (the pending rows and the accepted nodes it fed) and removed {cache.cutoff} off the path")
    pending = pending_rows(cache, tree)
    fed = f"the {pending}-token prompt" if cache.before == 0 else f"{pending} pending"
    moves = gather_moves(cache, step)
    rows = ", ".join(f"{before} → {after} (node {node_id})" for node_id, before, after in moves)
    path = (f"the {len(moves)} on the accepted path, moved row → row: {rows}" if moves else "none of the nodes")
    first = cache.before + pending
    return (f"{lengths}: the verify forward appended {appended} rows ({fed} + {len(tree.nodes)} tree nodes, node i "
            f"at row {first} + i); the gather kept the {pending} pending row{'s' * (pending != 1)} and {path}, and "
            f"removed the {cache.cutoff} off the path")


def extra_token(step: StepRecord):
    """The token the target added after the path (recovered or bonus), or None when the run ended first."""
    return step.emitted[-1] if step.emitted and step.emitted[-1].kind != "accepted" else None


def tree_outcome(step: StepRecord) -> str:
    """The step panel's headline for a tree step: '16 nodes drafted, 3 tried by the walk, path of 0 accepted'."""
    tree = step.tree
    assert tree is not None, "tree_outcome needs a tree step"
    tried = sum(node.verdict != "unreached" for node in tree.nodes)
    return (f"tree: {len(tree.nodes)} node{'s' * (len(tree.nodes) != 1)} drafted, {tried} tried by the walk, "
            f"path of {len(tree.path)} accepted")


def walk_order(tree: TreeRecord) -> list[TreeNode]:
    """The nodes the walk tried, in the order it went: from the root, the children of each node on the path
    that the target checked, in the draft's ranking. A sampled walk tries children one by one until one is
    accepted; a greedy one compares every child with the target's argmax at once, so siblings after the
    accepted one are rejected too. The rest of the tree is unreached."""
    children = ranked_children(tree)
    return [child for parent in (None, *tree.path) for child in children.get(parent, [])
            if child.verdict != "unreached"]


def node_name(tree: TreeRecord, node_id: int | None) -> str:
    """'node 4 ‘def’' (the figure's label), or 'the committed text' for the root."""
    if node_id is None:
        return "the committed text"
    return f"node {node_id} ‘{visible(tree.nodes[node_id].token.text)}’"


def stop_reason(step: StepRecord, depth_limit: int, greedy: bool = True, k: int | None = None) -> str:
    """Why the walk stopped where it did: every child of the stop node refused (a recovered token), the stop
    node a leaf (a bonus token: the tree's depth limit, or its children did not make the node budget), or the
    run ended inside the path. `depth_limit` is this step's maximum depth (specviz/run/step_reasons.py
    tree_depth_limit): the run's `k`, or less where the token budget left room for less; a leaf at that
    depth has one reason, the depth limit (the budget's words when it is below k), never the node budget."""
    tree = step.tree
    assert tree is not None, "stop_reason needs a tree step"
    extra = extra_token(step)
    stop = stop_node(tree)
    where = node_name(tree, stop)
    if extra is None:
        return (f"The walk accepted a path of {len(tree.path)}, but the run ended inside it (an end-of-sequence "
                "token or the token limit), so nothing follows.")
    if extra.kind == "recovered":
        refused = [child for child in ranked_children(tree).get(stop, [])]
        names = ", ".join(f"{child.id} ‘{visible(child.token.text)}’" for child in refused)
        count = f"its {len(refused)} children" if len(refused) != 1 else "its one child"
        how = ("its argmax there" if greedy
               else "drawn from what is left of p there once the refused children are removed")
        return (f"The walk stopped at {where}: {count} ({names}) {'were' if len(refused) != 1 else 'was'} "
                f"{'each ' if len(refused) != 1 else ''}tried and rejected, so no branch goes on. The target's own "
                f"token ‘{visible(extra.text)}’ is recovered instead: {how}.")
    depth = tree.nodes[stop].depth if stop is not None else 0
    if depth < depth_limit:
        why = f"its children scored below the {len(tree.nodes)} candidates the node budget kept"
    elif k is not None and depth_limit < k:
        why = (f"this step's tree could be at most {depth_limit} deep, not k = {k}, since the run's token budget "
               f"had room for only {depth_limit + 1} more tokens")
    else:
        why = f"the tree is at most k = {depth_limit} deep"
    return (f"The walk stopped at {where}, depth {depth}, because it is a leaf: {why}. The same target forward gave "
            f"p after it, so the target adds the bonus token ‘{visible(extra.text)}’ for free.")


def pending_rows(cache: CacheLengths, tree: TreeRecord) -> int:
    """The target cache rows a tree step's verify forward wrote before its nodes: the pending tokens (the
    prompt at the prefill); node i then sits at row before + pending + i."""
    return cache.after_forward - cache.before - len(tree.nodes)


def gather_moves(cache: CacheLengths, step: StepRecord) -> list[tuple[int, int, int]]:
    """The target cache's gather as (node id, row before, row after) for every node it kept: the verify
    forward wrote the pending tokens' rows after `before`, then node i at row before + pending + i; the
    gather copies the kept path's rows to the rows right after the pending ones, in path order, and
    crops the rest (docs/architecture.md §2, "Token trees", step 4). A row that is already in place
    (before == after) is kept without a copy."""
    tree = step.tree
    assert tree is not None, "gather_moves needs a tree step"
    first = cache.before + pending_rows(cache, tree)
    kept = cache.after_cutoff - first
    return [(node_id, first + node_id, first + place) for place, node_id in enumerate(tree.path[:kept])]
