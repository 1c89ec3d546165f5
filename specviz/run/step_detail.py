"""Step detail: one step's drafts against the target's choices, as escaped HTML.

Shows p, q, min(1, p/q) and the random draw per draft position, both models' top
alternatives, the residual distribution max(0, p - q) a rejected position was
resampled from, the carryover fed to the draft, and the cache lengths in words.
"""

from __future__ import annotations

from html import escape

from engine.records import Alternative, CacheLengths, StepRecord
from engine.trace import Trace
from specviz.style import LABELS
from specviz.tokens import number, visible

VERDICT_MARK = {"accepted": "✓ accepted", "rejected": "✗ rejected", "unverified": "– unverified"}


def step_detail_html(trace: Trace | None, step_index: int | None) -> str:
    """The detail of the step whose `index` is `step_index` (clamped into the trace)."""
    if trace is None or not trace.steps:
        return "<div class='sv-empty'>No step to show yet. Press <b>Run</b> or load a trace.</div>"
    step = find_step(trace, step_index)
    greedy = trace.config.is_greedy
    parts = [
        _header(trace, step),
        _carryover(step),
        _table(step, greedy),
        _resolution(step, greedy),
        _emitted(step),
        _caches(trace, step),
    ]
    return "<div class='sv-detail'>" + "".join(parts) + "</div>"


def find_step(trace: Trace, step_index: int | None) -> StepRecord:
    """The step with this index, or the nearest one; the last step for None."""
    if step_index is None:
        return trace.steps[-1]
    return min(trace.steps, key=lambda step: (abs(step.index - step_index), step.index))


def _header(trace: Trace, step: StepRecord) -> str:
    last = trace.steps[-1].index
    outcome = (f"all {step.k} drafts accepted" if step.k and step.num_accepted == step.k
               else "no drafts (plain target step)" if step.k == 0
               else f"{step.num_accepted} of {step.k} drafts accepted")
    return (f"<div class='sv-detail-head'><span class='sv-step-no'>Step {step.index}"
            f"<span class='sv-of'> (steps {trace.steps[0].index}–{last})</span></span>"
            f"<span>{escape(outcome)} → emitted {step.num_emitted} token{'s' * (step.num_emitted != 1)}</span>"
            f"<span class='sv-muted'>context before: {step.context_len} tokens"
            f" · draft {step.timing.draft:.0f} ms · verify {step.timing.verify:.0f} ms"
            f"{' · EOS' if step.eos else ''}</span></div>")


def _carryover(step: StepRecord) -> str:
    if step.carryover:
        chips = "".join(_chip(token.text, "carryover") for token in step.carryover)
        note = ("fed to the draft model before it drafts: tokens it has not seen yet "
                "(after a full accept: its last draft and the bonus token)")
        return f"<div class='sv-row'><b>Carryover</b> {chips} <span class='sv-muted'>{note}</span></div>"
    why = ("the n-gram drafter has no model to feed" if step.kv_draft is None
           else "the first step prefills the prompt instead" if step.index == 0
           else "none fed to the draft this step")
    return f"<div class='sv-row'><b>Carryover</b> <span class='sv-muted'>{why}</span></div>"


def _table(step: StepRecord, greedy: bool) -> str:
    rule = "greedy: accept while draft = target's argmax" if greedy else "accept if u < min(1, p/q)"
    head = ("<tr><th>pos</th><th>draft token</th><th>q<br><small>draft prob</small></th>"
            "<th>p<br><small>target prob</small></th><th>min(1, p/q)</th><th>draw u</th><th>verdict</th>"
            "<th>target's choice</th><th>draft top</th><th>target top</th></tr>")
    rows = []
    for position, draft in enumerate(step.draft):
        target = step.target[position]
        verdict = step.verdicts[position]
        rows.append(
            f"<tr class='sv-{verdict}'><td>d{position + 1}</td><td>{_chip(draft.text, verdict)}</td>"
            f"<td>{number(draft.q)}</td><td>{number(target.p)}</td><td>{number(step.accept_prob[position])}</td>"
            f"<td>{number(step.draws[position])}</td><td class='sv-verdict'>{VERDICT_MARK[verdict]}</td>"
            f"<td>{_token(target.text)}</td><td>{_alternatives(draft.top)}</td><td>{_alternatives(target.top)}</td></tr>")
    bonus = step.target[step.k] if len(step.target) > step.k else None
    if bonus is not None:
        reached = step.num_accepted == step.k
        rows.append(
            f"<tr class='sv-bonus-row{'' if reached else ' sv-unreached'}'><td>+1</td><td class='sv-muted'>"
            f"{'(no draft: bonus position)' if reached else '(not reached)'}</td><td></td><td></td><td></td><td></td>"
            f"<td class='sv-verdict'>{'bonus' if reached else ''}</td><td>{_token(bonus.text)}</td><td></td>"
            f"<td>{_alternatives(bonus.top)}</td></tr>")
    return (f"<div class='sv-table-wrap'><table class='sv-table'><caption>Draft vs target ({escape(rule)})</caption>"
            f"<thead>{head}</thead><tbody>{''.join(rows)}</tbody></table></div>")


def _resolution(step: StepRecord, greedy: bool) -> str:
    position = step.rejected_at
    if position is None:
        if step.k and step.num_accepted == step.k:
            return (f"<div class='sv-row'><b>All {step.k} drafts accepted.</b> The same target forward also gave the "
                    f"distribution after them, so the target adds a bonus token for free.</div>")
        return ""
    draft = step.draft[position]
    replacement = step.target[position]
    if greedy:
        return (f"<div class='sv-row'><b>Rejected at d{position + 1}:</b> the draft proposed {_token(draft.text)} but "
                f"the target's argmax is {_token(replacement.text)}, which is emitted instead (recovered).</div>")
    residual = "".join(
        f"<div class='sv-bar-row'><span class='sv-bar-label'>{_token(alt.text)}</span>"
        f"<span class='sv-bar' style='width:{max(1.0, 100 * alt.prob):.1f}%'></span>"
        f"<span class='sv-bar-value'>{alt.prob:.3f}</span></div>" for alt in step.residual)
    body = residual or "<span class='sv-muted'>(this trace did not record the residual)</span>"
    return (f"<div class='sv-row sv-residual'><b>Rejected at d{position + 1}</b> ({_token(draft.text)}): the "
            f"recovered token {_token(replacement.text)} was sampled from the residual "
            f"norm(max(0, p − q)), the target mass the draft under-covered:{body}</div>")


def _emitted(step: StepRecord) -> str:
    chips = "".join(_chip(token.text, token.kind) for token in step.emitted)
    return f"<div class='sv-row'><b>Emitted</b> {chips}{' <b>EOS</b>' if step.eos else ''}</div>"


def _caches(trace: Trace, step: StepRecord) -> str:
    position = trace.steps.index(step)
    previous = trace.steps[position - 1] if position else None
    mode = trace.config.cutoff_mode
    lines = [cache_sentence("target", step.kv_target, previous.kv_target if previous else None, mode)]
    lines.append(cache_sentence("draft", step.kv_draft, previous.kv_draft if previous else None, mode)
                 if step.kv_draft is not None else "draft: n-gram lookup, no cache")
    return "<div class='sv-row sv-caches'>" + "".join(f"<div>{escape(line)}</div>" for line in lines) + "</div>"


def cache_sentence(model: str, cache: CacheLengths, previous: CacheLengths | None = None,
                   cutoff_mode: str = "truncate") -> str:
    """'target cache 48 → 53 → 50: 3 rejected positions cut', or where a lab mode keeps them
    'target cache 64 → 70: 5 rejected positions left in place, 12 stale in total'.

    `previous` is the step before's record of the same cache (None for the first step): the
    positions left this step are the growth of the cumulative `stale`.
    """
    lengths = f"{model} cache {cache.before} → {cache.after_forward}"
    if cache.cutoff:
        lengths += f" → {cache.after_cutoff}"
    parts = [f"{_rejected(cache.cutoff)} cut"] if cache.cutoff else []
    if cache.stale is None:
        return f"{lengths}: {(parts or ['nothing to cut'])[0]}; stale positions unknown (a specviz.trace/1 record)"
    stale_before = previous.stale if previous is not None and previous.stale is not None else 0
    if cache.stale > stale_before:
        kept = "zero-filled in place" if cutoff_mode == "zero_fill" else "left in place"
        parts.append(f"{_rejected(cache.stale - stale_before)} {kept}")
    parts = parts or ["nothing to cut"]
    if cache.stale:
        parts.append(f"{cache.stale} stale in total")
    return f"{lengths}: {', '.join(parts)}"


def _rejected(count: int) -> str:
    return f"{count} rejected position{'s' * (count != 1)}"


def _chip(text: str, kind: str) -> str:
    return f"<span class='sv-tok sv-{kind}' title='{escape(LABELS.get(kind, kind))}'>{escape(visible(text))}</span>"


def _token(text: str) -> str:
    return f"<code class='sv-code'>{escape(visible(text))}</code>"


def _alternatives(top: tuple[Alternative, ...]) -> str:
    return " ".join(f"<span class='sv-alt'>{escape(visible(alt.text))}&nbsp;<small>{alt.prob:.2f}</small></span>"
                    for alt in top[:5])
