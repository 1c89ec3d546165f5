"""One generation in progress: the step loop draft -> verify -> accept -> cutoff -> emit.

`Generation.step()` runs exactly one step and returns its record, so a caller (the
UI's generator, the CLI, a test) decides when to continue and can stop between
any two steps with a valid partial trace in hand.

A chain step keeps its tensors on the device from the first draft forward to the acceptance
rule and reads back what the host needs in one copy (readout.py), so on a GPU the whole step
is queued without a wait; its phases are timed with device events (engine/runtime/step_clock.py).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

import torch

from engine.config import MAX_K, NGRAM_DRAFTER, SpecConfig, resolve_cache
from engine.decode.adaptive import AdaptiveDraftLength
from engine.decode.drafters import Drafter, ModelDrafter, NgramDrafter, Proposal
from engine.decode.kv import KVCache
from engine.decode.pair import ModelPair
from engine.decode.readout import Readout, ids
from engine.decode.recorder import StepData, StepRecorder, read_details, request_details
from engine.decode.sampling import SamplingParams, to_probs
from engine.runtime.step_clock import StepClock
from engine.decode.tree.draft import TreeDrafter
from engine.decode.tree.step import TreeStep
from engine.decode.verify import Decision, decide_greedy, decide_sampling
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


class Generation:
    """State between steps: committed tokens, the target cache, the drafter and its cache."""

    def __init__(self, pair: ModelPair, prompt_text: str, prompt_ids: list[int], config: SpecConfig,
                 detailed: bool = True, drafter: Drafter | None = None):
        self.pair = pair
        self.config = config.replace(cache=resolve_cache(config.cache, pair.device.type))
        self.prompt = TextTokens(prompt_text, tuple(prompt_ids))
        self.committed = list(prompt_ids)
        self.params = SamplingParams(config.temperature, config.top_k, config.top_p)
        self.generator = torch.Generator(device=pair.device).manual_seed(config.seed)
        self.clock = StepClock(pair.device)
        self.target = self.cache_for(pair.target, "target")
        self.tree = TreeStep() if config.is_tree else None      # token trees: engine/decode/tree/
        self.drafter = drafter or self._make_drafter()
        self.recorder = StepRecorder(pair.token_text, detailed)
        self.records: list[StepRecord] = []
        self.adaptive = (AdaptiveDraftLength(config.k, min(2 * config.k, MAX_K),
                                             pair.step_costs.for_drafter(config.drafter))
                         if config.adaptive_k else None)
        self.is_done = False
        self.elapsed_s = 0.0
        self.eager_reason = self._eager_reason()     # read now: a finished run gives its runners back

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
            total = (time.perf_counter() - started) * 1000
            data.timing = dataclasses.replace(data.timing, total=total,
                                              engine=max(0.0, total - data.timing.draft - data.timing.verify))
            record = self.recorder.record(data)
        self.elapsed_s += time.perf_counter() - started
        self.records.append(record)
        if self.is_done:
            self.release()
        return record

    def release(self) -> None:
        """Give back the static caches' runners (a finished or abandoned run); nothing for dynamic ones."""
        self.target.release()
        kv = getattr(self.drafter, "kv", None)
        if kv is not None:
            kv.release()

    def _chain_step(self) -> StepData:
        """A chain step: the five phases of docs/architecture.md §2 (a tree step: tree/step.py)."""
        context_len = len(self.committed)
        start = self.clock.mark()
        pending = self.pending_ids()                        # copied to the device now, while it is idle
        proposal = self.drafter.propose(self.committed, self.draft_length())             # 1. draft
        drafted = self.clock.mark()
        drafts = proposal.drafts(self.pair.device)                                       # (k,) on the device
        verification = self.verify(drafts, pending_ids=pending)                          # 2. verify
        verified = self.clock.mark()
        decision = self._decide(drafts, proposal, verification)                          # 3. accept (on the device)
        readout = self._readout(drafts, proposal, verification, decision)
        values = readout.fetch()                                                         # the step's one copy
        proposal.token_ids = ids(values["drafts"])
        acceptance = decision.acceptance(int(values["accepted"][0]), int(values["next"][0]),
                                         values.get("accept_probs"), values.get("uniforms"))
        proposal.elapsed_ms = self.clock.between(start, drafted)
        verify_ms = self.clock.between(drafted, verified)
        kept = self.kept_run(proposal.token_ids[:acceptance.num_accepted], acceptance.next_token, acceptance.next_kind)
        kv_target, kv_draft = self._cutoff(proposal, kept, verification)                 # 4. cutoff
        emitted, eos = self.emit(kept)                                                   # 5. emit
        if self.adaptive is not None:
            self.adaptive.observe(proposal.num_tokens, acceptance.num_accepted, proposal.elapsed_ms,
                                  verify_ms, verification.rows, timed=bool(self.records))
        return StepData(
            index=len(self.records), context_len=context_len, proposal=proposal,
            target_ids=self.target_ids(proposal.token_ids, acceptance.num_accepted, acceptance.next_token,
                                       ids(values["choice"])),
            acceptance=acceptance, emitted=emitted, kv_target=kv_target, kv_draft=kv_draft,
            timing=StepTiming(proposal.elapsed_ms, verify_ms, 0.0), eos=eos,
            details=read_details(values, proposal.num_tokens) if self.recorder.detailed else None)

    def _readout(self, drafts: torch.Tensor, proposal: Proposal, verification: Verification,
                 decision: Decision) -> Readout:
        """What the host needs of this step, queued on the device for one copy."""
        readout = Readout()
        readout.add("drafts", drafts)
        readout.add("choice", decision.target_choice)
        readout.add("accepted", decision.num_accepted)
        readout.add("next", decision.next_token)
        if decision.accept_probs is not None:
            readout.add("accept_probs", decision.accept_probs)
            readout.add("uniforms", decision.uniforms)
        if self.recorder.detailed:
            request_details(readout, drafts, proposal.probs, verification.probs, decision.next_law,
                            self.params.is_greedy, overlap=True)
        return readout

    @staticmethod
    def target_ids(draft_ids: list[int], num_accepted: int, next_token: int, choice: list[int]) -> list[int]:
        """(k + 1) the token the target emits at each position if reached (the accepted drafts, then
        the next token), else its argmax there."""
        return [draft_ids[i] if i < num_accepted else next_token if i == num_accepted else choice[i]
                for i in range(len(draft_ids) + 1)]

    def trace(self) -> Trace:
        """A valid trace of everything so far (complete=False until generation ends)."""
        new_ids = self.committed[len(self.prompt.token_ids):]
        return Trace(config=self.config, prompt=self.prompt,
                     output=TextTokens(self.pair.decode(new_ids), tuple(new_ids)),
                     steps=tuple(self.records), wall_s=self.elapsed_s, complete=self.is_done,
                     device_costs=self.pair.device_costs, eager_reason=self.eager_reason)

    def _eager_reason(self) -> str | None:
        """Why this run's static caches run without their graphs: the sentence of each runner lent to
        it whose capture failed at Run time, named by role (docs/architecture.md §7); None if none did."""
        caches = (("target", self.target), ("draft", getattr(self.drafter, "kv", None)))
        reasons = [f"the {role}'s {kv.lease.runner.eager_reason.removeprefix('the ')}" for role, kv in caches
                   if kv is not None and kv.lease is not None and kv.lease.runner.eager_reason is not None]
        return "; ".join(reasons) or None

    # -- phases ---------------------------------------------------------------------------

    def cache_for(self, model: torch.nn.Module, role: str) -> KVCache:
        """A KV cache of the run's kind for `model`: a static one is lent from the pair's pool of
        runners, with room for the prompt, every new token and the largest overhang past them."""
        if self.config.cache != "static":
            return KVCache(model, self.pair.vocab_size)
        return KVCache(model, self.pair.vocab_size, self.pair.runner_pool(role), self.rows_needed())

    def rows_needed(self) -> int:
        """The most rows a cache of this run can hold at once: prompt + new tokens + the forward that
        goes furthest past them (k drafts, a tree, its draft's expanded nodes), and in the lab modes
        that keep rejected rows, every row drafted."""
        config = self.config
        k = min(2 * config.k, MAX_K) if config.adaptive_k else config.k
        overhang = max(k, config.tree_nodes, config.tree_branch * k if config.is_tree else 0) + 1
        kept = config.max_new_tokens * (k + 1) if config.cutoff_mode != "truncate" else 0
        return len(self.prompt.token_ids) + config.max_new_tokens + overhang + kept

    def _make_drafter(self) -> Drafter:
        config = self.config
        if config.drafter == NGRAM_DRAFTER:
            return NgramDrafter(config.ngram_min, config.ngram_max)
        if self.pair.draft is None:
            raise ValueError(f"the {self.pair.target_name} pair has no draft model; use the n-gram drafter")
        kv = self.cache_for(self.pair.draft, "draft")
        if config.is_tree:
            return TreeDrafter(kv, self.params, len(self.prompt.token_ids), config.tree_branch)
        draft_params = self.params
        if config.draft_temperature >= 0:    # lab: sampled drafting, greedy verification
            draft_params = SamplingParams(config.draft_temperature, config.top_k, config.top_p)
        return ModelDrafter(kv, draft_params, self.generator, len(self.prompt.token_ids),
                            config.confidence_threshold, config.carryover, config.cutoff_mode)

    def draft_length(self) -> int:
        """The k (a tree's depth limit) for this step: adaptive or fixed, never past the token budget or the context."""
        remaining = self.config.max_new_tokens - self.num_new_tokens
        room = self.pair.max_context - len(self.committed) - 1
        k = self.adaptive.k if self.adaptive is not None else self.config.k
        return max(0, min(k, remaining - 1, room))

    def pending_ids(self) -> torch.Tensor:
        """(P,) the committed tokens the target has not fed yet, on the device. A copy from the host
        waits for the device, so a chain step makes it before queuing its drafts."""
        return torch.tensor(self.committed[self.target.num_committed:], dtype=torch.long, device=self.pair.device)

    def verify(self, drafts: torch.Tensor | list[int], layout: TreeLayout | None = None,
               pending_ids: torch.Tensor | None = None) -> Verification:
        """One target forward over its pending tokens and the drafts: k+1 distributions. The drafts
        may be on the device (a chain's, never read back first, with `pending_ids` from
        `pending_ids()`) or host ids (a tree's nodes). A token tree passes `layout`, which gives
        (position ids, 4D attention mask) for (cached length, pending count) (engine/decode/tree/mask.py)."""
        pending = self.committed[self.target.num_committed:]
        k = len(drafts)
        placed = {} if layout is None else dict(zip(("position_ids", "attention_mask"),
                                                     layout(self.target.length, len(pending))))
        if isinstance(drafts, torch.Tensor):
            fed = torch.cat([self.pending_ids() if pending_ids is None else pending_ids, drafts])   # (P + k,)
        else:
            fed = pending + drafts
        result = self.target.forward(fed, num_logits=k + 1, **placed)
        self.target.commit(len(pending))
        target_probs = to_probs(result.logits, self.params)                             # (k+1, V)
        return Verification(result.logits, target_probs, len(pending) + k, result.length_before,
                            result.length_after)

    def _decide(self, drafts: torch.Tensor, proposal: Proposal, verification: Verification) -> Decision:
        if self.params.is_greedy:
            return decide_greedy(drafts, verification.logits)
        return decide_sampling(drafts, proposal.probs, verification.probs, self.generator)

    def _cutoff(self, proposal: Proposal, kept: list[tuple[int, str]],
                verification: Verification) -> tuple[CacheLengths, CacheLengths | None]:
        """Retire the drafts the output does not keep: the target loses k - kept, the draft
        max(0, k - kept - 1) (kept = accepted, fewer when an EOS ends the run early)."""
        num_kept = sum(kind == "accepted" for _, kind in kept)
        removed = self.target.cutoff(proposal.num_tokens - num_kept, self.config.cutoff_mode)
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
