"""One step of a tree run (docs/architecture.md §2, "Token trees"): draft a tree, verify every
node in one target forward, walk it, gather both caches to the accepted path, emit.

The step is reported in the chain's terms (StepData) along its *main line*: the accepted
path, then (when the walk stopped at a rejection) the first child rejected at the stop node.
So every chain figure and invariant keeps working, and `TreeData` carries the whole tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from engine.decode.drafters import Proposal
from engine.decode.readout import Readout
from engine.decode.recorder import StepData, read_details, request_details
from engine.decode.tree.accept import TreeData, TreeWalk, walk_greedy, walk_sampling
from engine.decode.tree.mask import tree_positions, verify_mask
from engine.decode.tree.shape import DraftTree
from engine.decode.verify import Acceptance
from engine.records import StepTiming

if TYPE_CHECKING:
    from engine.decode.generation import Generation


class TreeStep:
    """Runs a generation's steps as token trees; the generation holds all state."""

    def run(self, generation: Generation) -> StepData:
        committed, target, config, clock = generation.committed, generation.target, generation.config, generation.clock
        context_len = len(committed)
        budget = min(config.tree_nodes, generation.pair.max_context - context_len)
        start = clock.mark()
        tree = generation.drafter.propose(committed, generation.draft_length(), budget)         # 1. draft
        drafted = clock.mark()
        verified = generation.verify(tree.tokens, lambda past, pending: (                          # 2. verify
            tree_positions(past, pending, tree.depths, target.device),
            verify_mask(past, pending, tree.ancestry(), target.dtype, target.device)))
        verify_end = clock.mark()
        target_probs = verified.probs                                                               # (N + 1, V)
        walk = self._walk(tree, verified.logits, target_probs, generation)                          # 3. accept
        kept = generation.kept_run([tree.tokens[node] for node in walk.path], walk.next_token, walk.next_kind)
        kept_path = list(walk.path[:sum(kind == "accepted" for _, kind in kept)])
        first_node = verified.cache_before + verified.rows - tree.size          # the pending rows come first
        removed = target.gather(first_node, kept_path)                                              # 4. gather
        target.commit(len(kept_path))
        kv_target = target.lengths(verified.cache_before, verified.cache_after_forward, removed)
        kv_draft = generation.drafter.on_verified(tree, kept_path)
        emitted, eos = generation.emit(kept)                                                        # 5. emit
        proposal, main_probs, acceptance = self._main_line(tree, walk, target_probs)
        proposal.elapsed_ms = clock.between(start, drafted)
        details = None
        if generation.recorder.detailed:
            readout = Readout()
            request_details(readout, proposal.drafts(target_probs.device), proposal.probs, main_probs,
                            acceptance.residual, generation.params.is_greedy, overlap=False)
            details = read_details(readout.fetch(), proposal.num_tokens)
        target_ids = generation.target_ids(proposal.token_ids, acceptance.num_accepted, acceptance.next_token,
                                           torch.argmax(main_probs, dim=-1).tolist())
        return StepData(index=len(generation.records), context_len=context_len, proposal=proposal,
                        target_ids=target_ids, acceptance=acceptance, emitted=emitted, kv_target=kv_target,
                        kv_draft=kv_draft, timing=StepTiming(proposal.elapsed_ms, clock.between(drafted, verify_end), 0.0),
                        eos=eos, details=details, tree=TreeData(tree, walk, target_probs))

    @staticmethod
    def _walk(tree: DraftTree, logits: torch.Tensor, target_probs: torch.Tensor, generation: Generation) -> TreeWalk:
        if generation.params.is_greedy:
            return walk_greedy(tree.children(), tree.tokens, torch.argmax(logits, dim=-1).tolist())
        return walk_sampling(tree.children(), tree.tokens, target_probs, generation.generator)

    @staticmethod
    def _main_line(tree: DraftTree, walk: TreeWalk,
                   target_probs: torch.Tensor) -> tuple[Proposal, torch.Tensor, Acceptance]:
        """The step in the chain's terms, along the main line: its drafts with the draft's law
        before each, the target's k + 1 rows along it, and its acceptance."""
        line = list(walk.path) + ([walk.stop_rejected] if walk.stop_rejected is not None else [])
        parent_rows = [tree.parents[node] + 1 for node in line]                      # target row before each node
        rows = torch.tensor(parent_rows + [line[-1] + 1 if line else 0], dtype=torch.long)
        draft_probs = None
        if line:
            draft_rows = torch.tensor([tree.draft_rows[tree.parents[node]] for node in line], dtype=torch.long)
            draft_probs = tree.draft_probs[draft_rows.to(tree.draft_probs.device)]             # (k, V)
        proposal = Proposal([tree.tokens[node] for node in line], draft_probs, tree.carryover, tree.cache_before,
                            tree.cache_after_forward)
        sampled = walk.draws[line[0]] is not None if line else False
        acceptance = Acceptance(len(walk.path), walk.next_token, walk.next_kind,
                                tuple(walk.accept_probs[node] for node in line) if sampled else None,
                                tuple(walk.draws[node] for node in line) if sampled else None,
                                walk.residual)
        return proposal, target_probs[rows.to(target_probs.device)], acceptance

