"""vLLM 0.32's n-gram (prompt lookup) drafter, to reconstruct the drafts a server does not return.

A port of vllm/v1/spec_decode/ngram_proposer.py `_find_longest_matched_ngram_and_propose_tokens`:
the longest suffix n-gram of the context with min_n <= n <= max_n that occurs earlier (its
earliest occurrence when several tie), and up to k tokens that followed it. SpecViz's own n-gram
drafter (engine/decode/drafters.py) prefers other matches, so it cannot stand in. Drafts built
here are marked `origin="reconstructed"` in the trace (docs/architecture.md §10).
"""

from __future__ import annotations

from typing import Callable, Sequence

DEFAULT_LOOKUP = (5, 5)     # vLLM's (prompt_lookup_min, prompt_lookup_max) when neither is set
MAX_LOOKUP = 8              # the longest n-gram tried when a server's own lookup must be found from its counts


def propose(context_ids: Sequence[int], min_n: int, max_n: int, k: int,
            max_model_len: int | None = None) -> tuple[int, ...]:
    """The draft tokens vLLM's n-gram proposer gives after `context_ids` (prompt + emitted)."""
    total = len(context_ids)
    if total < min_n:
        return ()
    if max_model_len is not None:
        k = min(k, max_model_len - total)
    if k <= 0:
        return ()
    tokens = list(reversed(context_ids))
    lps = [0] * max_n
    longest, position, prev, i = 0, 0, 0, 1
    while i < total:
        if tokens[prev] == tokens[i]:
            prev += 1
            if prev >= longest:
                longest, position = prev, i
            if i < max_n:
                lps[i] = prev
            if prev == max_n:
                prev = lps[max_n - 1]
            i += 1
        elif prev != 0:
            prev = lps[prev - 1]
        else:
            i += 1
    if longest < min_n:
        return ()
    start = total - 1 - position + longest
    return tuple(context_ids[start:start + min(k, total - start)])


def lookup_rule(min_n: int, max_n: int, k: int, max_model_len: int | None = None,
                known: dict[int, tuple[int, ...]] | None = None) -> Callable[[Sequence[int]], tuple[int, ...]]:
    """`propose` with the server's settings fixed, for engine/vllm/to_trace.py's `split_steps(proposer=...)`;
    `known` keeps its answers by context length (a run's context only grows, so the length names it)."""
    answers = {} if known is None else known

    def rule(context: Sequence[int]) -> tuple[int, ...]:
        if len(context) not in answers:
            answers[len(context)] = propose(context, min_n, max_n, k, max_model_len)
        return answers[len(context)]
    return rule
