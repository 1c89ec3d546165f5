"""The drafted token tree: nodes in the order the verify forward feeds them.

Node ids follow depth, then cumulative draft probability, so a parent always comes before
its children and siblings come most probable first (the order the sampling walk tries them).
`ROOT` (-1) stands for the committed text the root's children follow.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

ROOT = -1


@dataclass
class DraftTree:
    tokens: list[int]                     # per node
    parents: list[int]                    # parent node id, ROOT for the root's children
    depths: list[int]                     # 1 for the root's children
    q: list[float]                        # draft probability of the node's token after its ancestors
    draft_rows: dict[int, int]            # node id (or ROOT) -> row of draft_probs: the draft's law after it
    draft_probs: torch.Tensor | None      # (expanded + 1, V); None for an empty tree
    fed: list[int | None]                 # per draft-cache slot fed this step: its node id (None: expanded, not chosen)
    carryover: list[int] = field(default_factory=list)   # committed tokens fed to the draft first
    cache_before: int = 0
    cache_after_forward: int = 0

    @property
    def size(self) -> int:
        return len(self.tokens)

    def children(self) -> list[list[int]]:
        """children()[0] are the root's children, children()[i + 1] node i's, each in id order."""
        table: list[list[int]] = [[] for _ in range(self.size + 1)]
        for node, parent in enumerate(self.parents):
            table[parent + 1].append(node)
        return table

    def ancestry(self) -> torch.Tensor:
        """(N, N) bool: [i, j] is True when node j is node i or one of its ancestors."""
        table = torch.eye(self.size, dtype=torch.bool)
        for node, parent in enumerate(self.parents):
            if parent != ROOT:
                table[node] |= table[parent]
        return table

    def line(self, node: int) -> list[int]:
        """The node ids from the root's child down to `node` (root first)."""
        nodes = []
        while node != ROOT:
            nodes.append(node)
            node = self.parents[node]
        return nodes[::-1]


def empty_tree(carryover: list[int], cache_length: int) -> DraftTree:
    """No drafting this step (the token budget leaves no room): the target decodes one token."""
    return DraftTree([], [], [], [], {}, None, [], carryover, cache_length, cache_length)
