"""A vLLM stream as SpecViz's trace: one StepRecord per engine step (docs/architecture.md §10).

Step 0 is the prefill's token (k = 0, a bonus: the target's own token with nothing drafted);
each later step is one entry of the server's per-step arrays (engine/vllm/split.py places them):
its accepted drafts, then the target's own token (bonus when every draft was accepted, else
recovered). The run's last step may be cut by the budget or a stop: vLLM counts the drafts it
accepted before it truncates, so the step keeps the server's count (its verdicts, τ and the
acceptance rate are vLLM's), emits only the tokens that exist, and its cache keeps only those; the
accepted drafts past the cut were never returned (origin "unknown"). Before the final chunk brings
the arrays each chunk stands in for one step (`Trace.split == "provisional"`); a run whose arrays
never came or did not split is kept as its tokens alone (`"unsplit"`: no verdicts).

vLLM does not return drafted-but-rejected tokens: they stay unknown (id None, origin "unknown"),
unless vLLM's n-gram rule rebuilds them consistently with what the server emitted (origin
"reconstructed"). p, q, draws and phase times are not reported: None, None, None and 0.
"""

from __future__ import annotations

from typing import Callable, Sequence

from engine.config import NGRAM_DRAFTER, SpecConfig
from engine.formats.trace import TextTokens, Trace
from engine.records import CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming, TargetToken
from engine.vllm.ngram import MAX_LOOKUP, lookup_rule
from engine.vllm.server_info import ServerInfo
from engine.vllm.split import StepTokens, split_steps, unsplit_steps
from engine.vllm.stream import SpecMetrics, StreamChunk
from engine.vllm.transport import VllmError

Decode = Callable[[Sequence[int]], Sequence[str]]     # token ids -> each token's text
UNKNOWN = ""                                          # the text of a token the server did not return


def external_config(info: ServerInfo, config: SpecConfig, ngram_lookup: tuple[int, int] | None = None) -> SpecConfig:
    """The request's config as the server ran it: its k, method, model, dtype and engine."""
    lookup = ngram_lookup or (config.ngram_min, config.ngram_max)
    return config.replace(k=info.k or config.k, drafter=info.drafter, target=info.root, draft="",
                          device=f"vLLM server {info.address}", draft_dtype=info.dtype, target_dtype=info.dtype,
                          engine=info.engine, engine_note=info.method_note, cache="dynamic", adaptive_k=False,
                          tree_nodes=0, confidence_threshold=0.0, ngram_min=lookup[0], ngram_max=lookup[1],
                          draft_kernel="", target_kernel="")


def build_trace(info: ServerInfo, config: SpecConfig, prompt: TextTokens, chunks: Sequence[StreamChunk],
                metrics: SpecMetrics | None, started_s: float, decode: Decode, complete: bool,
                finish_reason: str | None = None, proposals: dict[int, tuple[int, ...]] | None = None,
                unsplit: bool = False) -> Trace:
    """The trace of what arrived so far (`complete` once the final chunk's arrays are in).

    `config` is external_config's; with its drafter "ngram" the rejected drafts are rebuilt by vLLM's
    lookup rule (its ngram_min/ngram_max) where that agrees with every token the server emitted;
    `proposals` keeps the rule's answers by context length across calls (a live run rebuilds often).
    Without `metrics` the steps are provisional (one per chunk); `unsplit`: the tokens alone, no verdicts."""
    if unsplit:
        steps_tokens, split = unsplit_steps(chunks), "unsplit"
    else:
        config, steps_tokens = engine_steps(info, config, chunks, metrics, prompt.token_ids, proposals)
        split = "provisional" if metrics is None else None
    context = list(prompt.token_ids)
    steps: list[StepRecord] = []
    kv_before, last_s = 0, started_s
    for index, tokens in enumerate(steps_tokens):
        rebuilt = _reconstructed(tokens)
        last = index == len(steps_tokens) - 1
        eos = complete and last and finish_reason == "stop"
        record = step_record(index, context, tokens, kv_before, (tokens.time_s - last_s) * 1000.0, decode, rebuilt,
                             eos)
        steps.append(record)
        context += [token.id for token in record.emitted]
        kv_before, last_s = record.kv_target.after_cutoff, tokens.time_s
    emitted = tuple(token for step in steps for token in step.emitted)
    text = "".join(chunk.text for chunk in chunks)
    return Trace(config=config, prompt=prompt, output=TextTokens(text, tuple(token.id for token in emitted)),
                 steps=tuple(steps), wall_s=max(last_s - started_s, 0.0), complete=complete, split=split)


def engine_steps(info: ServerInfo, config: SpecConfig, chunks: Sequence[StreamChunk], metrics: SpecMetrics | None,
                 prompt_ids: Sequence[int], proposals: dict[int, tuple[int, ...]] | None = None
                 ) -> tuple[SpecConfig, list[StepTokens]]:
    """The run's engine steps (`config` is external_config's) and the config as the server ran it: a draft
    model's by the per-step arrays alone, an n-gram server's with its lookup rule (`_ngram_steps`)."""
    if config.drafter == NGRAM_DRAFTER:
        return _ngram_steps(config, info, chunks, metrics, prompt_ids, proposals)
    return config, split_steps(chunks, metrics, config.k, None, prompt_ids)


def _ngram_steps(config: SpecConfig, info: ServerInfo, chunks: Sequence[StreamChunk], metrics: SpecMetrics | None,
                 prompt_ids: Sequence[int], proposals: dict[int, tuple[int, ...]] | None
                 ) -> tuple[SpecConfig, list[StepTokens]]:
    """An n-gram run's steps under the lookup SpecViz was told (vLLM's default unless set). vLLM does not
    publish its prompt_lookup_min/max, so once the final counts are in, a told lookup under which they
    do not split the tokens, or rebuild drafts that disagree with what the server emitted, gives way to
    the first lookup (every min <= max up to MAX_LOOKUP) under which all of it agrees; the config then
    names that lookup. None agrees: the told lookup's steps where they split (the drafts it cannot
    rebuild stay unknown), else VllmError. A run in which no step drafted is one token a step, whatever
    the lookup (its config claims none)."""
    if metrics is not None and not metrics.per_step_drafted:       # no step drafted: each emitted one token
        times = [(token, chunk.time_s) for chunk in chunks for token in chunk.token_ids]
        return config, [StepTokens((token,), 0, 0, time_s) for token, time_s in times]
    told = lookup_rule(config.ngram_min, config.ngram_max, config.k, info.max_model_len, proposals)
    try:
        steps = split_steps(chunks, metrics, config.k, told, prompt_ids, preemptions=False)
    except VllmError as error:
        steps, failure = None, error
    if metrics is None or (steps is not None and _all_rebuilt(steps)):
        if steps is None:
            raise failure
        return config, steps
    for preemptions in (False, True):       # a preempted step explains the counts only where no lookup does
        for low in range(1, MAX_LOOKUP + 1):
            for high in range(low, MAX_LOOKUP + 1):
                rule = lookup_rule(low, high, config.k, info.max_model_len)
                try:
                    candidate = split_steps(chunks, metrics, config.k, rule, prompt_ids, preemptions)
                except VllmError:
                    continue
                if any(step.drafted for step in candidate) and _all_rebuilt(candidate):
                    return config.replace(ngram_min=low, ngram_max=high), candidate
    if steps is None:
        steps = split_steps(chunks, metrics, config.k, told, prompt_ids)     # raises VllmError when none fits
    return config, steps


def _all_rebuilt(steps: Sequence[StepTokens]) -> bool:
    """Every step that verified drafts has rebuilt drafts that agree with its counts and tokens."""
    return all(_reconstructed(step) for step in steps if step.drafted)


def _reconstructed(tokens: StepTokens) -> tuple[int, ...]:
    """The rule's drafts for this step when they agree with its counts and emitted tokens; else ()."""
    drafts, emitted, accepted = tokens.proposal, tokens.token_ids, tokens.accepted
    agrees = (len(drafts) == tokens.drafted and drafts[:min(accepted, len(emitted))] == emitted[:accepted]
              and (accepted == len(drafts) or len(emitted) <= accepted or drafts[accepted] != emitted[accepted]))
    return drafts if agrees else ()


def step_record(index: int, context: Sequence[int], tokens: StepTokens, kv_before: int, gap_ms: float,
                decode: Decode, reconstructed: Sequence[int] = (), eos: bool = False) -> StepRecord:
    """One engine step as a StepRecord; step 0 (k = 0) is the prefill over the prompt. A step the output
    ended in (`tokens.cut`) keeps the server's accepted count, emits only its tokens, and its cache keeps
    only those: the accepted drafts past the cut are unknown (or the rule's rebuilt ones), not emitted."""
    ids, k, accepted = tokens.token_ids, tokens.drafted, tokens.accepted
    kept = min(accepted, len(ids))          # accepted drafts that are in the output
    extra = list(reconstructed[kept:])
    texts = list(decode(list(ids) + extra))
    known = dict(zip(list(ids) + extra, texts))
    draft = []
    for position in range(k):
        if position < kept:
            draft.append(DraftToken(ids[position], known[ids[position]], None))
        elif position < len(reconstructed):
            draft.append(DraftToken(reconstructed[position], known.get(reconstructed[position], UNKNOWN), None,
                                    origin="reconstructed"))
        else:
            draft.append(DraftToken(None, UNKNOWN, None, origin="unknown"))
    target = [TargetToken(ids[position], known[ids[position]], None) if position < len(ids)
              else TargetToken(None, UNKNOWN, None) for position in range(k + 1)]
    last_kind = "bonus" if accepted == k else "recovered"
    kinds = ["accepted"] * accepted + [last_kind]
    emitted = tuple(EmittedToken(token, known[token], kind) for token, kind in zip(ids, kinds))
    if index == 0:          # the prefill: the prompt goes into the cache, its token is pending
        kv = CacheLengths(0, len(context), 0, len(context), 0)
    else:                   # the pending token and k drafts in; the drafts not in the output out
        kv = CacheLengths(kv_before, kv_before + 1 + k, k - kept, kv_before + 1 + kept, 0)
    return StepRecord(
        index=index, context_len=len(context), k=k, carryover=(), draft=tuple(draft), target=tuple(target),
        verdicts=tuple((["accepted"] * accepted + ["rejected"] + ["unverified"] * k)[:k]),
        accept_prob=(None,) * k, draws=(None,) * k, num_accepted=accepted, emitted=emitted,
        kv_target=kv, kv_draft=None, timing=StepTiming(0.0, 0.0, max(gap_ms, 0.0)), eos=eos)
