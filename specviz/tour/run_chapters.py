"""Chapters 1-5, on the Run tab's recorded runs: a greedy step, the bonus and the carryover, the two caches' cut,
a sampled step's test, and the residual's sum. Each picks the first step of its trace that shows its idea, and
returns None when the trace has none (docs/architecture.md §2)."""

from __future__ import annotations

from typing import Callable

from engine.formats.trace import Trace
from engine.records import StepRecord
from specviz.tour.chapter import Chapter, View, prob, quoted

TABLE = "#sv-detail .sv-table-wrap"
REJECTED_ROW = f"{TABLE} tr.sv-rejected"                    # the row a greedy or sampled chapter turns on
BEFORE_REJECTED = f"{TABLE} tr:has(+ tr.sv-rejected)"       # the draft just before it
# A sampled chapter reads the draft before the rejection (its test, the question) and the rejected one (its test and
# verdict, the text): from the first's min(1, p/q) to the second's verdict, one span on screen even where each row
# is a stack of lines (a phone: the rows' whole stacks did not fit above the tour's sheet, and d3's verdict was under it).
TEST_BEFORE_REJECTED, REJECTED_VERDICT = f"{BEFORE_REJECTED} td.sv-ratio", f"{REJECTED_ROW} td.sv-verdict"
# A greedy chapter asks how many tokens the step emitted: from the rejected draft's verdict down to the Emitted line
# (at a phone's and a projector's sizes the line sat under the sheet, below the table's bonus row).
EMITTED = "#sv-detail .sv-emitted"


def _first(trace: Trace | None, wanted: Callable[[StepRecord], bool]) -> StepRecord | None:
    return next((step for step in trace.steps if wanted(step)), None) if trace is not None else None


def _rejected_at(step: StepRecord) -> int | None:
    return step.verdicts.index("rejected") if "rejected" in step.verdicts else None


def greedy_step(trace: Trace | None, name: str) -> Chapter | None:
    """(1) One greedy step: drafts kept while they equal the target's argmax, the first mismatch replaced."""
    step = _first(trace, lambda s: s.tree is None and 0 < s.num_accepted < s.k and _rejected_at(s) is not None)
    if step is None:
        return None
    at = _rejected_at(step)
    return Chapter(
        "One greedy step", View("run", TABLE, recorded=name, step=step.index, focus=REJECTED_VERDICT,
                                focus_end=EMITTED),
        "At step {step} the draft model proposed {k} tokens, and the target checked all of them in one forward "
        "pass. Greedy decoding keeps a draft only while it equals the target's argmax: the first {accepted} match, "
        "d{position} {draft} does not, so the target's own {target} takes its place{rest}.",
        "How many tokens did step {step} emit in all?",
        "{emitted}: the {accepted} accepted drafts, then the target's recovered token {target}.",
        {"step": str(step.index), "k": str(step.k), "accepted": str(step.num_accepted), "position": str(at + 1),
         "draft": quoted(step.draft[at].text), "target": quoted(step.target[at].text),
         "emitted": str(len(step.emitted)),
         "rest": ", and the drafts after it go unchecked" if at + 1 < step.k else ""})


def bonus_and_carryover(trace: Trace | None, name: str) -> Chapter | None:
    """(2) A fully accepted step's bonus token, and the next step's carryover: its last draft and the bonus."""
    if trace is None:
        return None
    pairs = zip(trace.steps, trace.steps[1:])
    found = next(((step, after) for step, after in pairs if step.tree is None and step.k > 0
                  and step.num_accepted == step.k and len(after.carryover) == 2), None)
    if found is None:
        return None
    step, after = found
    return Chapter(
        "The bonus token and the carryover", View("run", "#sv-detail .sv-carry", recorded=name, step=after.index),
        "Step {next} starts with the outlined carryover: tokens the draft model feeds itself before drafting. They "
        "come from step {step}, the step before, where all {k} drafts were accepted, so the target's last row, "
        "computed in the same forward, gave a bonus token {bonus} for free: {emitted} tokens from one target "
        "forward. The draft model had fed neither its last draft nor that bonus to itself, so step {next} feeds "
        "both.",
        "Which tokens does the carryover row of step {next} show, in order?",
        "{first} and then {second}: step {step}'s last draft, then its bonus token.",
        {"step": str(step.index), "k": str(step.k), "bonus": quoted(step.emitted[-1].text),
         "emitted": str(len(step.emitted)), "next": str(after.index), "first": quoted(after.carryover[0].text),
         "second": quoted(after.carryover[1].text)})


def caches_and_cut(trace: Trace | None, name: str) -> Chapter | None:
    """(3) The target's and the draft's cache lengths through one step, and the cut of the rejected rows."""
    step = _first(trace, lambda s: s.tree is None and s.kv_draft is not None and s.kv_target.before > 0
                  and s.kv_target.cutoff > 0
                  and s.kv_draft.cutoff > 0)
    if step is None:
        return None
    target, draft = step.kv_target, step.kv_draft
    return Chapter(
        "Two caches and the cut", View("run", "#sv-detail .sv-caches", recorded=name, step=step.index),
        "Each model keeps a KV cache, one row per token it has read, and the outlined lines tell each one's story. "
        "At step {step} the target's grew from {before} to {forward} rows in the verify forward, then the cut "
        "removed the {cut} rows of drafts it did not keep. "
        "The draft model never feeds its own last draft, so its cut is one row shorter: {draft_cut}.",
        "How many rows does the target's cache hold after step {step}'s cut?",
        "{after}: the {forward} rows after the verify forward, less the {cut} cut.",
        {"step": str(step.index), "before": str(target.before), "forward": str(target.after_forward),
         "cut": str(target.cutoff), "after": str(target.after_cutoff), "draft_cut": str(draft.cutoff)})


def _sampled_rejection(trace: Trace | None) -> StepRecord | None:
    """The first sampled chain step that rejected a draft after accepting one, with its test's numbers."""
    def shows(step: StepRecord) -> bool:
        at = _rejected_at(step)
        return (step.tree is None and at is not None and at > 0 and step.draws[at] is not None
                and step.accept_prob[at] is not None and step.draft[at].q is not None
                and step.target[at].p is not None and step.draws[at - 1] is not None)
    return _first(trace, shows)


def sampled_step(trace: Trace | None, name: str) -> Chapter | None:
    """(4) A sampled step: the draft kept when a uniform draw falls below min(1, p/q)."""
    step = _sampled_rejection(trace)
    if step is None:
        return None
    at = _rejected_at(step)
    return Chapter(
        "A sampled step: min(1, p/q) and the draw", View("run", TABLE, recorded=name, step=step.index,
                                                         focus=TEST_BEFORE_REJECTED, focus_end=REJECTED_VERDICT),
        "At temperature {temperature} a draft is accepted when a uniform draw u falls below min(1, p/q): always "
        "when the target gives the token at least the draft's probability, otherwise with chance p/q. At step "
        "{step}, d{position} {draft} had p = {p} and q = {q}, so min(1, p/q) = {ratio}, and the draw u = {draw} was "
        "not below it: rejected.",
        "Why was d{before}, the draft just before it, accepted?",
        "Its draw u = {before_draw} fell below its min(1, p/q) = {before_ratio}.",
        {"temperature": f"{trace.config.temperature:g}", "step": str(step.index), "position": str(at + 1),
         "draft": quoted(step.draft[at].text), "p": prob(step.target[at].p), "q": prob(step.draft[at].q),
         "ratio": prob(step.accept_prob[at]), "draw": prob(step.draws[at]), "before": str(at),
         "before_draw": prob(step.draws[at - 1]), "before_ratio": prob(step.accept_prob[at - 1])})


def residual_sum(trace: Trace | None, name: str) -> Chapter | None:
    """(5) The residual norm(max(0, p − q)) and why min(p, q) + (1 − Σ min) × residual is p."""
    step = _sampled_rejection(trace)
    if step is None or not step.residual or len(step.overlap) <= _rejected_at(step):
        return None
    at = _rejected_at(step)
    token = step.target[at]
    p = {alt.id: alt.prob for alt in step.target[at].top}
    q = {alt.id: alt.prob for alt in step.draft[at].top}
    residual = {alt.id: alt.prob for alt in step.residual}
    if token.id not in p or token.id not in q or token.id not in residual:
        return None
    rest = 1 - step.overlap[at]
    part = min(p[token.id], q[token.id])
    return Chapter(
        "The residual, and why the sum is p", View("run", "#sv-detail .sv-sum-chart", recorded=name, step=step.index),
        "After the rejection at d{position} the target's token is drawn from the residual norm(max(0, p − q)), not "
        "from p: p minus what the draft already had its chance at. A token x then comes out either as the accepted "
        "draft, with chance min(p(x), q(x)), or as the recovered token, with chance (1 − Σ min) × residual(x). Each "
        "bar stacks the two, and they add up to p(x): the output follows the target's law.",
        "For the recovered token {token}, do its two parts add up to its p?",
        "Yes: {part} + {rest} × {residual} ≈ {total}, and p = {p}: equal up to the stored digits (each number "
        "is printed to three decimals).",
        {"position": str(at + 1), "token": quoted(token.text), "part": prob(part), "rest": prob(rest),
         "residual": prob(residual[token.id]), "total": prob(part + rest * residual[token.id]),
         "p": prob(p[token.id])})
