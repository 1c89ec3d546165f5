"""One generation in progress: the step loop draft -> verify -> accept -> cutoff -> emit.

`Generation.step()` runs exactly one step and returns its record, so a caller (the
UI's generator, the CLI, a test) decides when to continue and can stop between
any two steps with a valid partial trace in hand.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import torch

from engine.config import MAX_K, NGRAM_DRAFTER, SpecConfig
from engine.decode.adaptive import AdaptiveDraftLength
from engine.decode.drafters import Drafter, ModelDrafter, NgramDrafter, Proposal
from engine.decode.kv import KVCache, wait_for
from engine.decode.pair import ModelPair
from engine.decode.recorder import StepData, StepRecorder
from engine.decode.sampling import SamplingParams, to_probs
from engine.decode.tree.draft import TreeDrafter
from engine.decode.tree.step import TreeStep
from engine.decode.verify import Acceptance, accept_greedy, accept_sampling
from engine.records import CacheLengths, EmittedToken, StepRecord, StepTiming
from engine.formats.trace import TextTokens, Trace


TreeLayout = Callable[[int, int], tuple[torch.Tensor, torch.Tensor]]   # (cached, pending) -> (positions, mask)


@dataclass(frozen=True)
class Verification:
    """What one target forward over the pending tokens and the k drafts produced."""

    logits: torch.Tensor          # (k+1, V) float32
    probs: torch.Tensor           # (k+1, V) the target's distributions p_1..p_{k+1}
    rows: int                     # tokens fed: the pending committed ones, then the k drafts
    cache_before: int
    cache_after_forward: int
    elapsed_ms: float


class Generation:
    """State between steps: committed tokens, the target cache, the drafter and its cache."""

    def __init__(self, pair: ModelPair, prompt_text: str, prompt_ids: list[int], config: SpecConfig,
                 detailed: bool = True, drafter: Drafter | None = None):
        self.pair = pair
        self.config = config
        self.prompt = TextTokens(prompt_text, tuple(prompt_ids))
        self.committed = list(prompt_ids)
        self.params = SamplingParams(config.temperature, config.top_k, config.top_p)
        self.generator = torch.Generator(device=pair.device).manual_seed(config.seed)
        self.target = KVCache(pair.target, pair.vocab_size)
        self.tree = TreeStep() if config.is_tree else None      # token trees: engine/decode/tree/
        self.drafter = drafter or self._make_drafter()
        self.recorder = StepRecorder(pair.token_text, detailed)
        self.records: list[StepRecord] = []
        self.adaptive = (AdaptiveDraftLength(config.k, min(2 * config.k, MAX_K),
                                             pair.step_costs.for_drafter(config.drafter))
                         if config.adaptive_k else None)
        self.is_done = False
        self.elapsed_s = 0.0

    @property
    def num_new_tokens(self) -> int:
        return len(self.committed) - len(self.prompt.token_ids)

    def step(self) -> StepRecord:
        """Run one step and return its record."""
        if self.is_done:
            raise RuntimeError("generation already finished")
        started = time.perf_counter()
        with torch.inference_mode():
            data = self.tree.run(self) if self.tree is not None else self._chain_step()
            data.timing = dataclasses.replace(data.timing, total=(time.perf_counter() - started) * 1000)
            record = self.recorder.record(data)
        self.elapsed_s += time.perf_counter() - started
        self.records.append(record)
        return record

    def _chain_step(self) -> StepData:
        """A chain step: the five phases of docs/architecture.md §2 (a tree step: tree/step.py)."""
        context_len = len(self.committed)
        proposal = self.drafter.propose(self.committed, self.draft_length())             # 1. draft
        verification = self.verify(proposal.token_ids)                                   # 2. verify
        acceptance = self._accept(proposal, verification.logits, verification.probs)     # 3. accept
        kept = self.kept_run(proposal.token_ids[:acceptance.num_accepted], acceptance.next_token, acceptance.next_kind)
        kv_target, kv_draft = self._cutoff(proposal, kept, verification)                 # 4. cutoff
        emitted, eos = self.emit(kept)                                                   # 5. emit
        if self.adaptive is not None:
            self.adaptive.observe(len(proposal.token_ids), acceptance.num_accepted, proposal.elapsed_ms,
                                  verification.elapsed_ms, verification.rows, timed=bool(self.records))
        return StepData(
            index=len(self.records), context_len=context_len, proposal=proposal,
            target_probs=verification.probs, acceptance=acceptance, emitted=emitted, kv_target=kv_target,
            kv_draft=kv_draft, timing=StepTiming(proposal.elapsed_ms, verification.elapsed_ms, 0.0),
            eos=eos, is_greedy=self.params.is_greedy)

    def trace(self) -> Trace:
        """A valid trace of everything so far (complete=False until generation ends)."""
        new_ids = self.committed[len(self.prompt.token_ids):]
        return Trace(config=self.config, prompt=self.prompt,
                     output=TextTokens(self.pair.decode(new_ids), tuple(new_ids)),
                     steps=tuple(self.records), wall_s=self.elapsed_s, complete=self.is_done)

    # -- phases ---------------------------------------------------------------------------

    def _make_drafter(self) -> Drafter:
        config = self.config
        if config.drafter == NGRAM_DRAFTER:
            return NgramDrafter(config.ngram_min, config.ngram_max)
        if self.pair.draft is None:
            raise ValueError(f"the {self.pair.target_name} pair has no draft model; use the n-gram drafter")
        if config.is_tree:
            return TreeDrafter(self.pair.draft, self.pair.vocab_size, self.params, len(self.prompt.token_ids),
                               config.tree_branch)
        draft_params = self.params
        if config.draft_temperature >= 0:    # lab: sampled drafting, greedy verification
            draft_params = SamplingParams(config.draft_temperature, config.top_k, config.top_p)
        return ModelDrafter(self.pair.draft, self.pair.vocab_size, draft_params, self.generator, len(self.prompt.token_ids),
                            config.confidence_threshold, config.carryover, config.cutoff_mode)

    def draft_length(self) -> int:
        """The k (a tree's depth limit) for this step: adaptive or fixed, never past the token budget or the context."""
        remaining = self.config.max_new_tokens - self.num_new_tokens
        room = self.pair.max_context - len(self.committed) - 1
        k = self.adaptive.k if self.adaptive is not None else self.config.k
        return max(0, min(k, remaining - 1, room))

    def verify(self, drafts: list[int], layout: TreeLayout | None = None) -> Verification:
        """One target forward over its pending tokens and the drafts: k+1 distributions. A token tree
        passes `layout`, which gives (position ids, 4D attention mask) for (cached length, pending
        count); it is built inside the timer, as part of the verify (engine/decode/tree/mask.py)."""
        started = time.perf_counter()
        pending = self.committed[self.target.num_committed:]
        k = len(drafts)
        placed = {} if layout is None else dict(zip(("position_ids", "attention_mask"),
                                                     layout(self.target.length, len(pending))))
        result = self.target.forward(pending + drafts, num_logits=k + 1, **placed)
        self.target.commit(len(pending))
        target_probs = to_probs(result.logits, self.params)                             # (k+1, V)
        wait_for(target_probs)
        return Verification(result.logits, target_probs, len(pending) + k, result.length_before,
                            result.length_after, (time.perf_counter() - started) * 1000)

    def _accept(self, proposal: Proposal, target_logits: torch.Tensor, target_probs: torch.Tensor) -> Acceptance:
        if self.params.is_greedy:
            return accept_greedy(proposal.token_ids, target_logits)
        return accept_sampling(proposal.token_ids, proposal.probs, target_probs, self.generator)

    def _cutoff(self, proposal: Proposal, kept: list[tuple[int, str]],
                verification: Verification) -> tuple[CacheLengths, CacheLengths | None]:
        """Retire the drafts the output does not keep: the target loses k - kept, the draft
        max(0, k - kept - 1) (kept = accepted, fewer when an EOS ends the run early)."""
        num_kept = sum(kind == "accepted" for _, kind in kept)
        removed = self.target.cutoff(len(proposal.token_ids) - num_kept, self.config.cutoff_mode)
        self.target.commit(num_kept)
        return (self.target.lengths(verification.cache_before, verification.cache_after_forward, removed),
                self.drafter.on_verified(proposal, num_kept))

    def emit(self, kept: list[tuple[int, str]]) -> tuple[list[EmittedToken], bool]:
        """Append the step's run: accepted + 1 tokens, fewer at an EOS or the token budget."""
        emitted = [EmittedToken(token, self.pair.token_text(token) if self.recorder.detailed else "", kind)
                   for token, kind in kept]
        eos = emitted[-1].id in self.pair.eos_token_ids
        self.committed.extend(token.id for token in emitted)
        self.is_done = eos or self.num_new_tokens >= self.config.max_new_tokens
        return emitted, eos

    def kept_run(self, accepted: list[int], next_token: int, next_kind: str) -> list[tuple[int, str]]:
        """(token, kind) of what this step commits: the accepted drafts and the next token, ending
        at the first EOS (inclusive) or at the token budget; drafts after an EOS are not kept."""
        run = [(token, "accepted") for token in accepted]
        run.append((next_token, next_kind))
        run = run[:self.config.max_new_tokens - self.num_new_tokens]
        for end, (token, _) in enumerate(run):
            if token in self.pair.eos_token_ids:
                return run[:end + 1]
        return run
