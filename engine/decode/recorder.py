"""Turns one step's values into a StepRecord of plain values.

The detailed recorder keeps p and q at each draft, each position's top alternatives, the
residual's top at a sampled rejection and each position's overlap sum min(p, q); the light
recorder keeps ids, verdicts and counts only (what the summary needs), so turning detail off
costs next to nothing. The tensor work happens on the device (`request_details`) and comes
back in the step's one copy (readout.py); the record is built on the host from those values.
A tree step's record also holds its whole tree (`TreeRecord`, docs/architecture.md §3), texts
only when detailed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from engine.decode.drafters import Proposal
from engine.decode.readout import Readout, ids
from engine.decode.tree.accept import TreeData
from engine.decode.verify import Acceptance
from engine.records import (Alternative, CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming, TargetToken,
                            Token, TreeNode, TreeRecord)

NUM_ALTERNATIVES = 5


@dataclass
class StepData:
    """Everything one step produced, on the host, before it becomes a record."""

    index: int
    context_len: int
    proposal: Proposal                  # its token_ids read back
    target_ids: list[int]               # k + 1: the token the target emits at each position if reached, else its argmax
    acceptance: Acceptance
    emitted: list[EmittedToken]
    kv_target: CacheLengths
    kv_draft: CacheLengths | None
    timing: StepTiming
    eos: bool
    details: StepDetails | None = None  # the detailed recorder's values
    tree: TreeData | None = None        # a tree step: the fields above follow its main line


@dataclass(frozen=True)
class StepDetails:
    """What the detailed record adds, read back from the device."""

    p_of_draft: list[float]                             # (k,) the target's probability of each draft
    q_of_draft: list[float | None]                      # (k,) the draft's (None: a point-mass drafter)
    draft_top: list[list[tuple[int, float]]]            # (k,) each draft row's top alternatives
    target_top: list[list[tuple[int, float]]]           # (k + 1,) each target row's
    residual_top: list[tuple[int, float]]               # the top of the law the next token was drawn from
    overlap: list[float]                                # (k,) sum min(p, q), or () where not computed


def request_details(readout: Readout, drafts: torch.Tensor, draft_probs: torch.Tensor | None,
                    target_probs: torch.Tensor, residual: torch.Tensor | None, is_greedy: bool, overlap: bool) -> None:
    """Queue the detailed record's values on the device. drafts: (k,); draft_probs: (k, V) or
    None; target_probs: (k + 1, V); residual: (V,) or None."""
    k = drafts.shape[0]
    index = torch.arange(k, device=target_probs.device)
    readout.add("p", target_probs[index, drafts])                                        # (k,)
    _top(readout, "target", target_probs)                                               # (k + 1, n)
    if draft_probs is not None:
        readout.add("q", draft_probs[index, drafts])                                     # (k,)
        _top(readout, "draft", draft_probs)                                             # (k, n)
    if residual is not None:
        _top(readout, "residual", residual[None])                                       # (1, n)
    if overlap and k:
        readout.add("overlap", _overlap(drafts, draft_probs, target_probs[:k], is_greedy))


def read_details(values: dict[str, list[float]], k: int) -> StepDetails:
    """The detailed record's values from the step's copy (`request_details` asked for them)."""
    target_top = _tops(values, "target", k + 1)
    has_draft = "q" in values
    return StepDetails(
        p_of_draft=values["p"], q_of_draft=values["q"] if has_draft else [None] * k,
        draft_top=_tops(values, "draft", k) if has_draft else [[] for _ in range(k)], target_top=target_top,
        residual_top=_tops(values, "residual", 1)[0] if "residual.id" in values else [],
        overlap=values.get("overlap", []))


def _top(readout: Readout, name: str, probs: torch.Tensor) -> None:
    values, token_ids = torch.topk(probs, min(NUM_ALTERNATIVES, probs.shape[-1]), dim=-1)       # (rows, n)
    readout.add(f"{name}.id", token_ids)
    readout.add(f"{name}.prob", values)


def _tops(values: dict[str, list[float]], name: str, rows: int) -> list[list[tuple[int, float]]]:
    token_ids, probs = ids(values[f"{name}.id"]), values[f"{name}.prob"]
    width = len(token_ids) // rows if rows else 0
    return [list(zip(token_ids[row * width:(row + 1) * width], probs[row * width:(row + 1) * width]))
            for row in range(rows)]


def _overlap(drafts: torch.Tensor, draft_probs: torch.Tensor | None, target_probs: torch.Tensor,
             is_greedy: bool) -> torch.Tensor:
    """(k,) per draft position, sum_x min(p(x), q(x)): the probability a draft token is accepted.
    Greedy is the temperature -> 0 limit: 1 when both argmaxes agree, else 0.
    draft_probs: (k, V) or None (point mass on the draft token); target_probs: (k, V)."""
    if is_greedy:
        draft_choice = torch.argmax(draft_probs, dim=-1) if draft_probs is not None else drafts
        return (torch.argmax(target_probs, dim=-1) == draft_choice).float()
    if draft_probs is None:
        return target_probs[torch.arange(drafts.shape[0], device=drafts.device), drafts]
    return torch.minimum(target_probs, draft_probs).sum(dim=-1)


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
        details = data.details
        if details is not None:
            draft = tuple(DraftToken(token, self.token_text(token), details.q_of_draft[i],
                                     self._alternatives(details.draft_top[i])) for i, token in enumerate(draft_ids))
            target = tuple(TargetToken(token, self.token_text(token), details.p_of_draft[i] if i < k else None,
                                       self._alternatives(details.target_top[i]))
                           for i, token in enumerate(data.target_ids))
            residual = self._alternatives(details.residual_top) if acceptance.residual is not None else ()
            overlap = tuple(details.overlap)
        else:
            draft = tuple(DraftToken(token, "", None) for token in draft_ids)
            target = tuple(TargetToken(token, "", None) for token in data.target_ids)
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

    def _alternatives(self, top: list[tuple[int, float]]) -> tuple[Alternative, ...]:
        return tuple(Alternative(token, self.token_text(token), prob) for token, prob in top if prob > 0)
