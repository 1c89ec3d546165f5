"""Why a step went the way it did, in short sentences: each draft's verdict, the carryover the
draft model is fed first, the step's k, and why the run ends there.

Greedy verdicts compare with the target's argmax; sampled ones compare the draw u with
min(1, p/q) (docs/architecture.md §2, phase 3). All numbers come from the step record.
"""

from __future__ import annotations

from engine.config import NGRAM_DRAFTER
from engine.records import StepRecord
from engine.formats.trace import Trace
from specviz.run.cache_story import quoted


def greedy_rule() -> str:
    return "greedy: accept while the draft token is the target's argmax; the first mismatch is replaced by the argmax"


def outcome(step: StepRecord) -> str:
    """'3 of 5 drafts accepted', 'all 5 drafts accepted', 'no drafts (plain target step)'."""
    if step.k == 0:
        return "no drafts (plain target step)"
    accepted = f"all {step.k} drafts accepted" if step.num_accepted == step.k else \
        f"{step.num_accepted} of {step.k} drafts accepted"
    if step.num_kept < step.num_accepted:
        accepted += f", {step.num_kept} kept (the output ends at {'an EOS' if step.eos else 'the token budget'})"
    return accepted


def after_eos(step: StepRecord, position: int) -> bool:
    """True when draft d(position + 1) comes after an accepted end-of-sequence draft: the output ended
    there, so whatever the verify forward decided at this position is never emitted."""
    return step.eos and bool(step.emitted) and step.emitted[-1].kind == "accepted" and position >= step.num_kept


def verdict_reason(step: StepRecord, position: int, greedy: bool) -> str:
    """Why draft d(position + 1) got its verdict, with the numbers that decided it."""
    verdict = step.verdicts[position]
    if verdict == "unverified":
        return "never checked: an earlier draft was rejected"
    target = step.target[position]
    if greedy:
        if verdict == "accepted":
            reason = "= the target's argmax" + ("" if target.p is None else f" (p = {target.p:.3f})")
        else:
            best = target.top[0].prob if target.top and target.top[0].id == target.id else None
            reason = (f"≠ the target's argmax {quoted(target.text)}"
                      + ("" if best is None else f" (p = {best:.3f})"))
    else:
        reason = _sampled_reason(step, position)
    if after_eos(step, position):
        reason += "; after the EOS, so not kept" if verdict == "accepted" else "; after the EOS, so nothing is emitted"
    elif verdict == "accepted" and position >= step.num_kept:     # another engine's budget cut inside the step
        reason += "; past the token budget, so not emitted"
    return reason


def _sampled_reason(step: StepRecord, position: int) -> str:
    """'u = 0.384 < 1.000: accept' (the columns beside it give p, q and min(1, p/q))."""
    ratio, draw = step.accept_prob[position], step.draws[position]
    accepted = step.verdicts[position] == "accepted"
    if ratio is None or draw is None:
        return "accept" if accepted else "reject"
    point_mass = " (n-gram guess: q = 1)" if step.draft[position].q is None else ""
    return f"u = {draw:.3f} {'<' if accepted else '≥'} {ratio:.3f}: {'accept' if accepted else 'reject'}{point_mass}"


def ends_run(trace: Trace, step: StepRecord) -> str:
    """Why nothing follows this step ('' when the run goes on or was stopped)."""
    if step.eos:
        return "the run ends at this end-of-sequence token"
    generated = step.context_len + step.num_emitted - len(trace.prompt.token_ids)
    if step is trace.steps[-1] and trace.complete and generated >= trace.config.max_new_tokens:
        return f"the run ends here, at its budget of {trace.config.max_new_tokens} new tokens"
    return ""


def tokens_left(trace: Trace, step: StepRecord) -> int:
    """How many of the run's new tokens were left before this step."""
    return trace.config.max_new_tokens - (step.context_len - len(trace.prompt.token_ids))


def tree_depth_limit(trace: Trace, step: StepRecord) -> int:
    """How deep this step's tree could be: k, or fewer when the token budget had room for fewer (a step emits
    at most depth + 1 tokens). The budget note and the walk's stop reason both use it, so they agree."""
    return max(0, min(trace.config.k, tokens_left(trace, step) - 1))


def budget_note(trace: Trace, step: StepRecord) -> str:
    """Why this step drafted fewer than the configured k ('' when it drafted k)."""
    config = trace.config
    remaining = tokens_left(trace, step)
    if step.tree is not None:          # a tree's k is its depth limit; the chain fields' k is only its main line
        limit = tree_depth_limit(trace, step)
        if limit >= config.k:
            return ""
        left = f"only {remaining} of the {config.max_new_tokens} new tokens {'was' if remaining == 1 else 'were'} left"
        return f"The tree was at most {limit} deep this step, not k = {config.k}: {left}, and a step emits at most k + 1."
    if step.k >= config.k and not config.adaptive_k:
        return ""
    if step.k == max(0, remaining - 1) and step.k < config.k:
        left = f"only {remaining} of the {config.max_new_tokens} new tokens {'was' if remaining == 1 else 'were'} left"
        return f"k = {step.k} this step, not {config.k}: {left}, and a step emits at most k + 1."
    if config.is_external and step.k == 0:
        # vLLM's first step is the prompt's prefill (one token, no drafts); a later step without drafts is a
        # preempted request's recomputation, or an n-gram lookup that found nothing (engine/vllm/to_trace.py)
        return (f"k = 0 this step, not {config.k}: the server's first step reads the prompt and gives the first "
                "token alone (drafting starts at the next step)." if step.index == 0 else
                f"k = 0 this step, not {config.k}: the server verified no drafts in this step (a request it "
                "preempted is recomputed first, and a lookup that matches nothing proposes nothing).")
    if config.drafter == NGRAM_DRAFTER:
        return (f"k = {step.k} this step, not {config.k}: prompt lookup proposes only what followed the latest "
                "earlier match of the text's last words (nothing when there is no match).")
    if config.adaptive_k:
        return f"k = {step.k} this step: adaptive k picks each step's k for the most expected tokens per second."
    if config.confidence_threshold > 0:
        return (f"k = {step.k} this step, not {config.k}: the draft stopped early when its top probability fell "
                f"below the confidence threshold {config.confidence_threshold:g}.")
    return f"k = {step.k} this step, not {config.k}: the model's context window had no room for more."


def carryover_sentence(step: StepRecord, previous: StepRecord | None) -> str:
    """What the draft model is fed before it drafts, named from where each token came from."""
    if step.kv_draft is None:
        return "none: the n-gram drafter has no model to feed."
    if not step.carryover:
        if previous is None:
            return "none: the first step feeds the prompt instead."
        return "none: the draft model does not run this step." if step.k == 0 else "none this step."
    count = len(step.carryover)
    tail = previous.emitted[-count:] if previous is not None and count <= len(previous.emitted) else ()
    if [token.id for token in tail] != [token.id for token in step.carryover]:
        return (f"the {count} token{'s' * (count != 1)} committed since the draft model last ran, fed before it drafts.")
    named = []
    for token in tail:
        if token.kind == "accepted" and previous.tree is not None:
            named.append(f"{quoted(token.text)}, the previous step's last accepted node (the draft feeds a node only "
                         "to draft its children, and nothing was drafted after this one)")
        elif token.kind == "accepted":
            named.append(f"{quoted(token.text)}, the previous step's last draft d{previous.k} (accepted, but the "
                         "draft never feeds its own last draft)")
        elif token.kind == "bonus":
            named.append(f"{quoted(token.text)}, the previous step's bonus token")
        elif previous.tree is not None:
            named.append(f"{quoted(token.text)}, the token the target recovered where the previous step's walk "
                         "stopped")
        else:
            named.append(f"{quoted(token.text)}, the token the target chose where the previous step rejected "
                         f"d{previous.num_accepted + 1}")
    return ("the token" if count == 1 else f"the {count} tokens") + " the draft has not seen yet, fed before it drafts: " \
        + "; ".join(named) + "."
