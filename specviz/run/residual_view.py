"""A sampled rejection drawn as a small bar chart: the residual norm(max(0, p − q)) the recovered
token was drawn from, its top tokens with p and q where recorded, the drawn token marked.

docs/architecture.md §2 (phase 3): at the first rejection the target draws from the mass the
draft under-covered, max(0, p − q), renormalised by its total 1 − Σ min(p, q) (the step's
`overlap` at that position). The rejected draft itself has p < q there, so its residual is 0.
"""

from __future__ import annotations

from html import escape

from engine.records import Alternative, StepRecord
from specviz.tokens import number, visible


def residual_html(step: StepRecord, position: int) -> str:
    """The rejection at draft `position` (0-based) of a sampled step, with its residual bars."""
    draft, recovered = step.draft[position], step.target[position]
    ratio, draw = step.accept_prob[position], step.draws[position]
    test = ("" if ratio is None or draw is None
            else f": u = {draw:.3f} ≥ min(1, p/q) = {ratio:.3f}, so the draft is rejected and the step stops")
    lead = (f"<b>Rejected at d{position + 1}</b> {_code(draft.text)}{escape(test)}. The recovered token "
            f"{_code(recovered.text)} was drawn from the residual norm(max(0, p − q)): the target's probability "
            f"where it exceeds the draft's, ")
    overlap = step.overlap[position] if position < len(step.overlap) else None
    lead += (f"divided by its total 1 − Σ min(p, q) = 1 − {overlap:.3f} = {1 - overlap:.3f}. "
             if overlap is not None and overlap < 1 else "renormalised to sum to 1. ")
    lead += (f"The rejected {_code(draft.text)} has p = {number(recovered.p)} < q = {number(draft.q)} there, "
             f"so its residual is 0: it cannot be drawn again.")
    if not step.residual:
        return (f"<div class='sv-row sv-residual'>{lead} "
                f"<span class='sv-muted'>(this trace did not record the residual)</span></div>")
    rank = next((i for i, alt in enumerate(step.residual) if alt.id == recovered.id), None)
    where = (f"The drawn token is the residual's {_ordinal(rank + 1)}most likely one "
             f"({step.residual[rank].prob:.3f})." if rank is not None
             else f"The drawn token is not among the residual's top {len(step.residual)}: an unlikely draw.")
    bars = "".join(_bar(alt, alt.id == recovered.id, step, position) for alt in step.residual)
    return (f"<div class='sv-row sv-residual'>{lead}<div class='sv-residual-chart' role='img' "
            f"aria-label='residual distribution, top {len(step.residual)} tokens'>"
            f"<div class='sv-muted'>residual norm(max(0, p − q)) at d{position + 1}, top tokens "
            f"(p and q where the top lists recorded them)</div>{bars}</div>{escape(where)}</div>")


def _bar(alt: Alternative, picked: bool, step: StepRecord, position: int) -> str:
    p = _prob(step.target[position].top, alt.id)
    q = _prob(step.draft[position].top, alt.id)
    mark = " <b class='sv-picked-mark'>◀ drawn: the recovered token</b>" if picked else ""
    return (f"<div class='sv-bar-row{' sv-picked' if picked else ''}'><span class='sv-bar-label'>"
            f"{_code(alt.text)}</span><span class='sv-bar' style='width:{max(1.0, 60 * alt.prob):.1f}%'></span>"
            f"<span class='sv-bar-value'>{alt.prob:.3f}</span><span class='sv-muted sv-bar-pq'>p {number(p)} · "
            f"q {number(q)}</span>{mark}</div>")


def _prob(top: tuple[Alternative, ...], token_id: int) -> float | None:
    return next((alt.prob for alt in top if alt.id == token_id), None)


def _ordinal(n: int) -> str:
    """'' for 1 (the most likely), '2nd ', '3rd ', '4th ' ..."""
    return "" if n == 1 else {2: "2nd ", 3: "3rd "}.get(n, f"{n}th ")


def _code(text: str) -> str:
    return f"<code class='sv-code'>{escape(visible(text))}</code>"
