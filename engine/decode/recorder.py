"""Turns one step's tensors into a StepRecord of plain values.

The detailed recorder decodes token texts and keeps each position's top
alternatives; the light recorder keeps ids, verdicts and counts only (what the
summary needs), so turning detail off costs next to nothing. A tree step's record also
holds its whole tree (`TreeRecord`, docs/architecture.md §3), texts only when detailed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from engine.decode.drafters import Proposal
from engine.decode.tree.accept import TreeData
from engine.decode.verify import Acceptance
from engine.records import (Alternative, CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming, TargetToken,
                            Token, TreeNode, TreeRecord)

NUM_ALTERNATIVES = 5


@dataclass
class StepData:
    """Everything one step produced, before it is reduced to plain values."""

    index: int
    context_len: int
    proposal: Proposal
    target_probs: torch.Tensor          # (k+1, V)
    acceptance: Acceptance
    emitted: list[EmittedToken]
    kv_target: CacheLengths
    kv_draft: CacheLengths | None
    timing: StepTiming
    eos: bool
    is_greedy: bool
    tree: TreeData | None = None        # a tree step: the proposal and target rows above follow its main line


class StepRecorder:
    def __init__(self, token_text: Callable[[int], str], detailed: bool = True):
        self.token_text = token_text
        self.detailed = detailed

    def record(self, data: StepData) -> StepRecord:
        draft_ids = data.proposal.token_ids
        k = len(draft_ids)
        acceptance = data.acceptance
        verdicts = tuple("accepted" if i < acceptance.num_accepted else "rejected" if i == acceptance.num_accepted
                         else "unverified" for i in range(k))
        target_choice = torch.argmax(data.target_probs, dim=-1).tolist()       # (k+1,)
        target_ids = [draft_ids[i] if i < acceptance.num_accepted else
                      acceptance.next_token if i == acceptance.num_accepted else target_choice[i]
                      for i in range(k + 1)]
        if self.detailed:
            draft, target, residual, overlap = self._details(data, target_ids)
        else:
            draft = tuple(DraftToken(token, "", None) for token in draft_ids)
            target = tuple(TargetToken(token, "", None) for token in target_ids)
            residual, overlap = (), ()
        return StepRecord(
            index=data.index, context_len=data.context_len, k=k,
            carryover=tuple(Token(t, self._text(t)) for t in data.proposal.carryover),
            draft=draft, target=target, verdicts=verdicts,
            accept_prob=acceptance.accept_probs or (None,) * k,
            draws=acceptance.draws or (None,) * k,
            num_accepted=acceptance.num_accepted,
            emitted=tuple(data.emitted),
            kv_target=data.kv_target, kv_draft=data.kv_draft, timing=data.timing, eos=data.eos,
            residual=residual, overlap=overlap,
            tree=self._tree(data.tree) if data.tree is not None else None,
        )

    def _tree(self, data: TreeData) -> TreeRecord:
        tree, walk = data.tree, data.walk
        p = data.target_p()
        nodes = tuple(TreeNode(id=node, parent=None if tree.parents[node] < 0 else tree.parents[node],
                               depth=tree.depths[node], token=Token(tree.tokens[node], self._text(tree.tokens[node])),
                               q=tree.q[node], p=p[node], verdict=walk.verdicts[node],
                               accept_prob=walk.accept_probs[node], draw=walk.draws[node])
                      for node in range(tree.size))
        return TreeRecord(nodes, walk.path)

    def _text(self, token_id: int) -> str:
        return self.token_text(token_id) if self.detailed else ""

    def _details(self, data: StepData, target_ids: list[int]):
        draft_ids = data.proposal.token_ids
        k = len(draft_ids)
        target_probs = data.target_probs.cpu()                                     # (k+1, V)
        draft_probs = data.proposal.probs.cpu() if data.proposal.probs is not None else None   # (k, V)
        p_of_draft = target_probs[torch.arange(k), torch.tensor(draft_ids, dtype=torch.long)].tolist() if k else []
        q_of_draft = (draft_probs[torch.arange(k), torch.tensor(draft_ids, dtype=torch.long)].tolist()
                      if draft_probs is not None and k else [None] * k)
        draft = tuple(DraftToken(token, self.token_text(token), q_of_draft[i],
                                 self._top(draft_probs[i]) if draft_probs is not None else ())
                      for i, token in enumerate(draft_ids))
        target = tuple(TargetToken(token, self.token_text(token), p_of_draft[i] if i < k else None,
                                   self._top(target_probs[i]))
                       for i, token in enumerate(target_ids))
        residual = self._top(data.acceptance.residual.cpu()) if data.acceptance.residual is not None else ()
        if data.tree is not None:      # sum min(p, q) is no acceptance chance for top-b nodes: not computed
            return draft, target, residual, ()
        return draft, target, residual, self._overlap(data.proposal.token_ids, draft_probs, target_probs[:k],
                                                        data.is_greedy)

    def _top(self, probs: torch.Tensor) -> tuple[Alternative, ...]:
        values, ids = torch.topk(probs, NUM_ALTERNATIVES)
        return tuple(Alternative(int(i), self.token_text(int(i)), float(v))
                     for v, i in zip(values.tolist(), ids.tolist()) if v > 0)

    @staticmethod
    def _overlap(draft_ids: list[int], draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
                 is_greedy: bool) -> tuple[float, ...]:
        """Per draft position, sum_x min(p(x), q(x)): the probability a draft token is accepted.
        Greedy is the temperature -> 0 limit: 1 when both argmaxes agree, else 0.
        draft_probs: (k, V) or None (point mass on the draft token); target_probs: (k, V)."""
        k = len(draft_ids)
        if k == 0:
            return ()
        ids = torch.tensor(draft_ids, dtype=torch.long)
        if is_greedy:
            draft_choice = torch.argmax(draft_probs, dim=-1) if draft_probs is not None else ids
            return tuple(float(x) for x in (torch.argmax(target_probs, dim=-1) == draft_choice).tolist())
        if draft_probs is None:
            return tuple(target_probs[torch.arange(k), ids].tolist())
        return tuple(torch.minimum(target_probs, draft_probs).sum(dim=-1).tolist())
