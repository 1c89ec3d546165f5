"""The tree drafter: the draft model expands a token tree level by level (EAGLE-2's dynamic
draft tree, Li et al. 2024), one draft forward per level.

From the committed text, each expanded node offers its `branch` most probable next tokens
(the draft's law through the run's temperature / top-k / top-p) as children; a child's score
is its cumulative draft probability (the product of q along its line). After each level the
new nodes that rank among the best `budget` candidates so far are expanded, best first, at
most `branch` of them, all in one forward with a 4D ancestor mask (mask.py); a level with
none worth expanding ends the drafting early (a child never outscores its parent). The tree
is the best `budget` candidates; since a child scores at most its parent (ties broken by
depth) that set always holds every chosen node's ancestors.

The draft cache feeds the pending committed tokens and then every expanded node; after
verification `on_verified` keeps only the accepted path's expanded nodes, gathered into place
(KVCache.gather). Nothing about correctness depends on q: the target decides every token.
"""

from __future__ import annotations

import torch

from engine.decode.drafters import unfed
from engine.decode.kv import KVCache
from engine.decode.sampling import SamplingParams, to_probs
from engine.decode.tree.mask import level_mask
from engine.decode.tree.shape import ROOT, DraftTree, empty_tree
from engine.records import CacheLengths


class Candidates:
    """Every token offered so far: its parent (a candidate index or ROOT), depth, q and score."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.parents: list[int] = []
        self.depths: list[int] = []
        self.q: list[float] = []
        self.scores: list[float] = []

    def offer(self, parents: list[int], q_rows: list[list[float]], token_rows: list[list[int]], depth: int) -> None:
        for parent, q_row, token_row in zip(parents, q_rows, token_rows):
            score = 1.0 if parent == ROOT else self.scores[parent]
            for q, token in zip(q_row, token_row):
                if q > 0:           # a token the filters (top-k / top-p) removed is no candidate
                    self.tokens.append(token)
                    self.parents.append(parent)
                    self.depths.append(depth)
                    self.q.append(q)
                    self.scores.append(score * q)

    def best(self, budget: int) -> list[int]:
        """The best `budget` candidates by score (ancestor-closed: ties go to the shallower one)."""
        order = sorted(range(len(self.tokens)), key=lambda c: (-self.scores[c], self.depths[c], c))
        return order[:budget]

    def worth_expanding(self, depth: int, budget: int, branch: int) -> list[int]:
        """This depth's candidates among the best `budget`, best first, at most `branch`."""
        return [c for c in self.best(budget) if self.depths[c] == depth][:branch]


class TreeDrafter:
    """A draft model with its own KV cache that proposes token trees."""

    def __init__(self, kv: KVCache, params: SamplingParams, prompt_len: int, branch: int):
        self.kv = kv
        self.params = params
        self.prompt_len = prompt_len
        self.branch = branch
        self._fed_from = 0          # cache position of the first expanded node this step

    def propose(self, committed: list[int], depth: int, budget: int) -> DraftTree:
        """A tree of at most `budget` nodes and `depth` levels after `committed`."""
        pending, carryover = unfed(committed, self.kv, self.prompt_len)
        before = self.kv.length
        self._fed_from = before
        if depth == 0 or budget == 0:
            return empty_tree(carryover, before)
        law = to_probs(self.kv.forward(pending, num_logits=1).logits, self.params)        # (1, V): after the text
        self.kv.commit(len(pending))
        context = self._fed_from = self.kv.length
        candidates = Candidates()
        rows, row_of = [law], {ROOT: 0}
        frontier, fed = [ROOT], []
        for level in range(1, depth + 1):
            q_rows, token_rows = torch.topk(law, min(self.branch, law.shape[-1]), dim=-1)  # (F, branch)
            candidates.offer(frontier, q_rows.tolist(), token_rows.tolist(), level)
            frontier = candidates.worth_expanding(level, budget, self.branch) if level < depth else []
            if not frontier:
                break
            law = self._feed_level(frontier, candidates, fed, context)                      # (F, V)
            first_row = sum(len(block) for block in rows)
            row_of.update({candidate: first_row + i for i, candidate in enumerate(frontier)})
            rows.append(law)
        return self._tree(candidates, candidates.best(budget), row_of, torch.cat(rows), fed, carryover, before)

    def on_verified(self, tree: DraftTree, kept_path: list[int]) -> CacheLengths:
        """Keep the kept path's expanded nodes (gathered into place), remove every other node fed."""
        slot = {node: index for index, node in enumerate(tree.fed)}
        kept_slots = [slot[node] for node in kept_path if node in slot]     # a prefix of the path: ancestors expand first
        removed = self.kv.gather(self._fed_from, kept_slots) if tree.fed else 0
        self.kv.commit(len(kept_slots))
        return self.kv.lengths(tree.cache_before, tree.cache_after_forward, removed)

    def _feed_level(self, frontier: list[int], candidates: Candidates, fed: list[int], context: int) -> torch.Tensor:
        """One draft forward over a level's expanded nodes, each seeing its fed ancestors and itself."""
        slots = {candidate: index for index, candidate in enumerate(fed)}
        fed.extend(frontier)
        visible = torch.zeros((len(frontier), len(fed)), dtype=torch.bool)
        for row, candidate in enumerate(frontier):
            visible[row, len(fed) - len(frontier) + row] = True
            parent = candidates.parents[candidate]
            while parent != ROOT:
                visible[row, slots[parent]] = True
                parent = candidates.parents[parent]
        depth = candidates.depths[frontier[0]]
        positions = torch.full((1, len(frontier)), context + depth - 1, dtype=torch.long, device=self.kv.device)
        logits = self.kv.forward([candidates.tokens[c] for c in frontier], num_logits=len(frontier),
                                 position_ids=positions,
                                 attention_mask=level_mask(context, visible.to(self.kv.device), self.kv.dtype)).logits
        return to_probs(logits, self.params)

    def _tree(self, candidates: Candidates, chosen: list[int], row_of: dict[int, int], draft_probs: torch.Tensor,
              fed: list[int], carryover: list[int], before: int) -> DraftTree:
        """The chosen candidates as a DraftTree, ids by depth then score."""
        ordered = sorted(chosen, key=lambda c: (candidates.depths[c], -candidates.scores[c], c))
        node_of = {candidate: node for node, candidate in enumerate(ordered)}
        node_of[ROOT] = ROOT
        return DraftTree(
            tokens=[candidates.tokens[c] for c in ordered],
            parents=[node_of[candidates.parents[c]] for c in ordered],
            depths=[candidates.depths[c] for c in ordered],
            q=[candidates.q[c] for c in ordered],
            draft_rows={node_of[c]: row for c, row in row_of.items() if c in node_of},
            draft_probs=draft_probs,
            fed=[node_of.get(c, None) for c in fed],
            carryover=carryover, cache_before=before, cache_after_forward=self.kv.length)
