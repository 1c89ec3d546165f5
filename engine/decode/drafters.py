"""Drafters: propose k tokens, then hear how many the target accepted.

One protocol (after transformers' candidate generators) so the draft model, the
n-gram prompt lookup and scripted test drafters plug into the same step loop. The draft
model's tokens stay on the device as it chooses them (each is fed straight into its next
forward); the step reads them back with everything else in one copy (readout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from engine.decode.kv import KVCache
from engine.decode.sampling import SamplingParams, choose, to_probs
from engine.records import CacheLengths


def unfed(committed: list[int], kv: KVCache, prompt_len: int) -> tuple[list[int], list[int]]:
    """What a draft's cache has not seen of the committed text: (pending, carryover). `pending`
    is every committed token past the cache; `carryover` the generated ones among them (the
    last draft token and the bonus, or the recovered token), drawn as the step's carryover."""
    pending = committed[kv.num_committed:]
    generated = len(committed) - prompt_len
    return pending, (pending[-generated:] if generated > 0 else [])


@dataclass
class Proposal:
    token_ids: list[int]                  # d_1..d_k on the host (k may be smaller than asked, even 0); a
                                          # model drafter's are filled in when the step reads them back
    probs: torch.Tensor | None            # (k, V) draft distributions q_i; None for a point-mass drafter
    carryover: list[int] = field(default_factory=list)   # fed to the draft model before drafting
    cache_before: int = 0
    cache_after_forward: int = 0
    elapsed_ms: float = 0.0               # the draft phase, set by the step's clock
    on_device: torch.Tensor | None = None  # (k,) the drafts as chosen on the device, not yet read back

    @property
    def num_tokens(self) -> int:
        """k, known on the host without reading the tokens back."""
        return self.on_device.shape[0] if self.on_device is not None else len(self.token_ids)

    def drafts(self, device: torch.device) -> torch.Tensor:
        """(k,) the drafts on `device`."""
        if self.on_device is not None:
            return self.on_device
        return torch.tensor(self.token_ids, dtype=torch.long, device=device)


class Drafter(Protocol):
    def propose(self, committed: list[int], k: int) -> Proposal: ...

    def on_verified(self, proposal: Proposal, num_kept: int) -> CacheLengths | None:
        """Hear how many drafts the output keeps (the number accepted, fewer when an EOS ended
        the run); roll back the rest and return the cache lengths through the step."""


class ModelDrafter:
    """A small causal LM with its own KV cache.

    After a step whose k drafts were all accepted, the draft cache lacks d_k (the
    draft produced it but never fed it) and the bonus token: both are pending and
    fed first next step. That is the bonus-token carryover (lab problem B). With
    carryover off (lab), d_k is skipped instead: its position is missing, not stale.
    """

    def __init__(self, kv: KVCache, params: SamplingParams, generator: torch.Generator | None,
                 prompt_len: int, confidence_threshold: float = 0.0, carryover: bool = True,
                 cutoff_mode: str = "truncate"):
        self.kv = kv
        self.params = params
        self.generator = generator
        self.prompt_len = prompt_len
        self.confidence_threshold = confidence_threshold
        self.carryover = carryover
        self.cutoff_mode = cutoff_mode
        self._skip_last_draft = False

    def propose(self, committed: list[int], k: int) -> Proposal:
        """Feed the pending tokens, then draft up to k tokens one forward each, all on the device
        (a confidence threshold reads each draft's probability back to decide whether to go on)."""
        if self._skip_last_draft:        # lab mode "no carryover": d_k is never fed
            self.kv.commit(1)
            self._skip_last_draft = False
        pending, carryover = unfed(committed, self.kv, self.prompt_len)
        before = self.kv.length
        if k == 0:
            return Proposal([], None, [], before, before)
        tokens: list[torch.Tensor] = []
        rows: list[torch.Tensor] = []
        feed: list[int] | torch.Tensor = pending
        for _ in range(k):
            logits = self.kv.forward(feed, num_logits=1).logits[0]          # (V,)
            probs = to_probs(logits, self.params)                          # (V,)
            token = choose(logits, probs, self.params, self.generator)     # (1,) on the device
            tokens.append(token)
            rows.append(probs)
            feed = token
            if self.confidence_threshold > 0 and float(probs[token]) < self.confidence_threshold:
                break
        self.kv.commit(len(pending))
        return Proposal([], torch.stack(rows), carryover, before, self.kv.length, on_device=torch.cat(tokens))

    def on_verified(self, proposal: Proposal, num_kept: int) -> CacheLengths:
        k = proposal.num_tokens
        fed = max(k - 1, 0)                     # the draft fed d_1..d_{k-1}, never d_k
        removed = self.kv.cutoff(fed - min(num_kept, fed), self.cutoff_mode)      # max(0, k - kept - 1)
        self.kv.commit(min(num_kept, fed))
        self._skip_last_draft = k > 0 and num_kept == k and not self.carryover
        return self.kv.lengths(proposal.cache_before, proposal.cache_after_forward, removed)


class NgramDrafter:
    """Prompt lookup (vLLM's ngram proposer): find the latest earlier occurrence of the
    longest suffix n-gram (ngram_max down to ngram_min) and propose what followed it."""

    def __init__(self, ngram_min: int = 1, ngram_max: int = 3):
        self.ngram_min = ngram_min
        self.ngram_max = ngram_max

    def propose(self, committed: list[int], k: int) -> Proposal:
        return Proposal(find_continuation(committed, k, self.ngram_min, self.ngram_max) if k > 0 else [], None)

    def on_verified(self, proposal: Proposal, num_kept: int) -> None:
        return None


def find_continuation(tokens: list[int], k: int, ngram_min: int, ngram_max: int) -> list[int]:
    """Up to k tokens that followed the most recent earlier match of the longest suffix n-gram."""
    for n in range(min(ngram_max, len(tokens) - 1), ngram_min - 1, -1):
        suffix = tokens[-n:]
        for start in range(len(tokens) - n - 1, -1, -1):       # latest earlier occurrence first
            if tokens[start:start + n] == suffix:
                return tokens[start + n:start + n + k]
    return []
