"""Reading a tree step's `tree` strictly (docs/architecture.md §3, `tree`): `parse_tree` and `check_tree`.

A tree is refused with the path of its first bad field (`steps[3].tree.nodes[2].parent`):
node ids count from 0, a parent comes earlier, depth = the parent's depth + 1 (1 at the root),
the path is a root-first line of accepted nodes, verdicts agree with the path (accepted exactly
on it, unreached under any node off it, every child of the node the walk stopped at rejected),
the chain fields follow the main line (path, then the first rejected child at the stop), and
the KV lengths add up (the target fed the pending tokens and every node, kept the path).
"""

from __future__ import annotations

from engine.config import MAX_K, SpecConfig
from engine.records import TREE_VERDICTS, StepRecord, Token, TreeNode, TreeRecord
from engine.formats.trace import TraceFormatError
from engine.formats.trace_fields import WHOLE, FieldReader, Kind

TREE_VERDICT = Kind(lambda v: isinstance(v, str) and v in TREE_VERDICTS, f"one of {', '.join(TREE_VERDICTS)}")
PARENT = Kind(lambda v: v is None or WHOLE.test(v), "a node id or null")


def parse_tree(reader: FieldReader | None) -> TreeRecord | None:
    """The step's `tree`, field types checked (structure: check_tree); None when absent (a chain)."""
    if reader is None:
        return None
    nodes = []
    for n in reader.items("nodes"):
        token = n.obj("token")
        nodes.append(TreeNode(id=n.int("id"), parent=n.get("parent", PARENT, optional=True), depth=n.int("depth"),
                              token=Token(token.int("id"), token.str("text")), q=n.prob("q", optional=True),
                              p=n.prob("p"), verdict=n.get("verdict", TREE_VERDICT),
                              accept_prob=n.prob("accept_prob", optional=True), draw=n.prob("draw", optional=True)))
    return TreeRecord(tuple(nodes), reader.values("path", WHOLE))


def check_tree(step: StepRecord, config: SpecConfig, where: str) -> None:
    """One step's tree against its config, itself, its chain fields and its KV records."""
    tree = step.tree
    if tree is None:
        if config.is_tree:
            raise TraceFormatError(f"missing field {where}.tree (the run drafted trees: config.tree_nodes is "
                                   f"{config.tree_nodes})")
        return
    if not config.is_tree:
        raise TraceFormatError(f"{where}.tree is set but config.tree_nodes is 0 (a chain run records no tree)")
    where = f"{where}.tree"
    if len(tree.nodes) > config.tree_nodes:      # SpecConfig holds it to MAX_TREE_NODES
        raise TraceFormatError(f"{where}.nodes has {len(tree.nodes)} nodes, over the budget config.tree_nodes "
                               f"= {config.tree_nodes}")
    _check_nodes(tree.nodes, f"{where}.nodes")
    _check_path(tree, where)
    _check_main_line(step, tree, where)


def _check_nodes(nodes: tuple[TreeNode, ...], where: str) -> None:
    for index, node in enumerate(nodes):
        if node.id != index:
            raise TraceFormatError(f"{where}[{index}].id must be {index} (nodes count from 0), got {node.id}")
        if node.parent is not None and node.parent >= index:
            raise TraceFormatError(f"{where}[{index}].parent must name an earlier node (below {index}) or be "
                                   f"null, got {node.parent}")
        depth = 1 if node.parent is None else nodes[node.parent].depth + 1
        if node.depth != depth or depth > MAX_K:
            raise TraceFormatError(f"{where}[{index}].depth must be {depth} (its parent's depth + 1, at most "
                                   f"{MAX_K}), got {node.depth}")


def _check_path(tree: TreeRecord, where: str) -> None:
    nodes, path = tree.nodes, tree.path
    parent = None
    for position, node in enumerate(path):
        if node >= len(nodes) or nodes[node].parent != parent:
            raise TraceFormatError(f"{where}.path[{position}] must be a child of "
                                   f"{'the root' if parent is None else f'node {parent}'}, got {node}")
        parent = node
    on_path = set(path)
    reached = {None} | on_path
    for node in nodes:
        if (node.verdict == "accepted") != (node.id in on_path):
            raise TraceFormatError(f"{where}.nodes[{node.id}].verdict is {node.verdict} but the node is "
                                   f"{'' if node.id in on_path else 'not '}on the path")
        if node.parent not in reached and node.verdict != "unreached":
            raise TraceFormatError(f"{where}.nodes[{node.id}].verdict must be unreached: its parent "
                                   f"{node.parent} was not accepted")
        if node.parent == parent and node.verdict != "rejected":
            raise TraceFormatError(f"{where}.nodes[{node.id}].verdict must be rejected: the walk stopped at its "
                                   f"parent, so every child there was rejected")


def _check_main_line(step: StepRecord, tree: TreeRecord, where: str) -> None:
    stop = tree.path[-1] if tree.path else None
    rejected = next((node.id for node in tree.nodes if node.parent == stop), None)
    line = list(tree.path) + ([] if rejected is None else [rejected])
    if step.num_accepted != len(tree.path):
        raise TraceFormatError(f"{where}.path has {len(tree.path)} nodes but the step accepted {step.num_accepted}")
    if [token.id for token in step.draft] != [tree.nodes[node].token.id for node in line]:
        raise TraceFormatError(f"{where.removesuffix('.tree')}.draft must follow the tree's main line (nodes "
                               f"{line}: the path, then the first child rejected where it stopped)")
    context, kept = step.context_len, step.num_kept
    target = step.kv_target
    if target.after_forward != context + len(tree.nodes) or target.cutoff != len(tree.nodes) - kept:
        raise TraceFormatError(f"{where.removesuffix('.tree')}.kv.target must grow to context_len + nodes "
                               f"({context + len(tree.nodes)}) and remove the {len(tree.nodes) - kept} nodes off the "
                               f"kept path, got after_forward {target.after_forward}, cutoff {target.cutoff}")
    draft = step.kv_draft
    if draft is not None and tree.nodes and not context <= draft.after_cutoff <= context + kept:
        raise TraceFormatError(f"{where.removesuffix('.tree')}.kv.draft.after_cutoff must be between context_len "
                               f"({context}) and context_len + kept ({context + kept}), got {draft.after_cutoff}")
