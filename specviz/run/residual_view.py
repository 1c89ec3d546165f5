"""A sampled rejection, and why drawing from the residual keeps the output's law p (issue #27).

docs/architecture.md §2 (phase 3): at the first rejection the target draws from the mass the
draft under-covered, max(0, p − q), renormalised by its total 1 − Σ min(p, q) (the step's
`overlap` at that position). The rejected draft itself has p < q there, so its residual is 0.
The chart shows, per token x of the step's top lists, the two ways x comes out at that position:
as the accepted draft, with chance min(p(x), q(x)), and as the recovered token, with chance
(1 − Σ min) · residual(x), stacked; the two add up to p(x), which is why sampling is lossless.
Every number comes from the step's record (p, q and residual top lists, overlap); a token whose
q or residual the lists lack is left out rather than guessed. Under the bars, the counter-example with the
step's own numbers: drawn from p instead, the rejected draft and the recovered token would come out with
chance min(p, q) + (1 − Σ min) · p, not p.
"""

from __future__ import annotations

from html import escape

from dataclasses import dataclass

from engine.records import StepRecord
from specviz.quantities import equals_sign, probability_text, ratio_text
from specviz.tokens import chip, visible


def residual_html(step: StepRecord, position: int) -> str:
    """The rejection at draft `position` (0-based) of a sampled step, with the chart that proves it lossless."""
    draft, recovered = step.draft[position], step.target[position]
    ratio, draw = step.accept_prob[position], step.draws[position]
    shown_ratio, rounding = ratio_text(ratio, recovered.p, draft.q)
    test = ("" if ratio is None or draw is None
            else f" u = {draw:.3f} ≥ min(1, p/q) = {shown_ratio}{f' ({rounding})' if rounding else ''}, so the draft "
                 "is rejected and the step stops.")
    lead = (f"<b>Rejected at d{position + 1}</b>, the draft token {chip(draft.text, 'rejected')}:{escape(test)} The "
            f"recovered token {chip(recovered.text, 'recovered')} was drawn from the residual norm(max(0, p − q)): the "
            "target's probability where it exceeds the draft's, ")
    overlap = step.overlap[position] if position < len(step.overlap) else None
    lead += (f"divided by its total 1 − Σ min(p, q) = 1 − {overlap:.3f} = {_rest_text(overlap)}. "
             if overlap is not None and overlap < 1 else "renormalised to sum to 1. ")
    lead += (f"The rejected {chip(draft.text, 'rejected')} has p = {_shown(recovered.p)} &lt; q = {_shown(draft.q)} "
             "there, so its residual is 0: it cannot be drawn again.")
    if not step.residual:
        return (f"<div class='sv-row sv-residual'>{lead} "
                f"<span class='sv-muted'>(this trace did not record the residual)</span></div>")
    rank = next((i for i, alt in enumerate(step.residual) if alt.id == recovered.id), None)
    where = (f"The drawn token is the residual's {_ordinal(rank + 1)}most likely one "
             f"({probability_text(step.residual[rank].prob)})." if rank is not None
             else f"The drawn token is not among the residual's top {len(step.residual)}: an unlikely draw.")
    return f"<div class='sv-row sv-residual'>{lead} {escape(where)}{_sum_chart(step, position, overlap)}</div>"


@dataclass(frozen=True)
class _Share:
    """One token's two ways out at a sampled rejection's position, from the step's own records."""

    id: int
    text: str
    p: float
    q: float
    residual: float

    def accepted(self) -> float:
        """Emitted as the draft: proposed with chance q(x), accepted with min(1, p(x)/q(x))."""
        return min(self.p, self.q)

    def recovered(self, overlap: float) -> float:
        """Emitted as the recovered token: a rejection (chance 1 − Σ min(p, q)), then x drawn from the residual."""
        return (1 - overlap) * self.residual


def _shares(step: StepRecord, position: int) -> list[_Share]:
    """The tokens at `position` whose p, q and residual the record holds: the target's and the draft's top lists,
    the draft token and the residual's top list (a token with p ≤ q has residual 0 whether listed or not)."""
    draft, target = step.draft[position], step.target[position]
    p = {alt.id: alt.prob for alt in target.top} | ({draft.id: target.p} if target.p is not None else {})
    q = {alt.id: alt.prob for alt in draft.top} | ({draft.id: draft.q} if draft.q is not None else {})
    residual = {alt.id: alt.prob for alt in step.residual}
    texts = {alt.id: alt.text for alt in (*target.top, *draft.top, *step.residual)} | {draft.id: draft.text}
    shares = []
    for token_id in dict.fromkeys([*p, *residual]):
        if token_id not in p or token_id not in q:
            continue
        if token_id not in residual and p[token_id] > q[token_id]:
            continue                                 # a residual too small to be listed: left out, not guessed
        shares.append(_Share(token_id, texts[token_id], p[token_id], q[token_id], residual.get(token_id, 0.0)))
    return sorted(shares, key=lambda share: -share.p)


def _sum_chart(step: StepRecord, position: int, overlap: float | None) -> str:
    """Per token, a stacked bar: min(p, q) (emitted as the accepted draft) + (1 − Σ min) · residual (emitted as
    the recovered token) = p: the output's law is the target's. Numbers in each bar's hover and beside it."""
    shares = _shares(step, position)
    if overlap is None or not shares:
        return ""
    recovered_id = step.target[position].id
    rows = "".join(_sum_row(share, overlap, share.id == recovered_id, step.draft[position].id) for share in shares)
    return (f"<div class='sv-sum-chart' role='img' aria-label='why sampling stays lossless: min(p, q) plus "
            f"(1 − Σ min) times the residual equals p, per token'><div class='sv-sum-head'><b>Why drawing from the "
            f"residual keeps the output's law p</b>: at d{position + 1} a token x comes out either as the draft "
            "(proposed with chance q(x), accepted with min(1, p(x)/q(x)): together min(p(x), q(x))) or, after a "
            f"rejection (chance 1 − Σ min = {_rest_text(overlap)}), as the recovered token drawn from the residual. "
            "The two add up to p(x) for every token:</div>"
            "<div class='sv-sum-legend'><span class='sv-sum-part sv-sum-accepted'></span> min(p, q): as the accepted "
            "draft <span class='sv-sum-part sv-sum-recovered'></span> (1 − Σ min) · residual: as the recovered token "
            "<span class='sv-sum-p-mark'></span> p, the target's probability</div>"
            f"{rows}{_why_not_p(shares, overlap, step.draft[position].id, recovered_id)}"
            "<div class='sv-muted sv-sum-note'>Tokens whose q or residual the record's top lists lack are left "
            "out. Each number is rounded (3 decimals, or 3 significant digits below 0.1); where the shown digits do not "
            "give a sum exactly, it is written with ≈: the sums are worked from the record's unrounded numbers, and "
            "match p.</div></div>")


def _sum_row(share: _Share, overlap: float, drawn: bool, draft_id: int) -> str:
    """One token's bar and its sum, each written from the shown digits: '=' where they give the shown result,
    '≈' where rounding does not (issue #33 item 2: '0.143 + 0.194 × 0.949 = 0.328', whose digits give 0.327)."""
    accepted, recovered = share.accepted(), share.recovered(overlap)
    total = accepted + recovered
    rest, residual = _rest_text(overlap), probability_text(share.residual)
    p, q = probability_text(share.p), probability_text(share.q)
    min_text, part_text, total_text = probability_text(accepted), probability_text(recovered), probability_text(total)
    product = equals_sign(float(rest) * float(residual), part_text)
    summed = equals_sign(float(min_text) + float(rest) * float(residual), total_text)
    numbers = f"{min_text} + {rest} × {residual} {summed} {total_text}; p = {p}"
    tip_accepted = (f"{visible(share.text)}: emitted as the accepted draft with chance min(p, q) = "
                    f"min({p}, {q}) = {min_text}")
    tip_recovered = (f"{visible(share.text)}: emitted as the recovered token with chance (1 − Σ min) × residual = "
                     f"{rest} × {residual} {product} {part_text}")
    parts = equals_sign(float(min_text) + float(part_text), total_text)
    tip_row = f"{visible(share.text)}: {min_text} + {part_text} {parts} {total_text}, and p = {p}"
    mark = "\u00a0<b class='sv-picked-mark'>◀ drawn here</b>" if drawn else ""      # no break before it
    return (f"<div class='sv-sum-row{' sv-picked' if drawn else ''}' title='{escape(tip_row)}'>"
            f"<span class='sv-bar-label'>{chip(share.text, _kind(share.id, drawn, draft_id))}</span>"
            f"<span class='sv-sum-bar'><span class='sv-sum-part sv-sum-accepted' style='width:{100 * accepted:.2f}%' "
            f"title='{escape(tip_accepted)}'></span><span class='sv-sum-part sv-sum-recovered' "
            f"style='width:{100 * recovered:.2f}%' title='{escape(tip_recovered)}'></span>"
            f"<span class='sv-sum-p' style='left:{100 * share.p:.2f}%' title='p = {p}'></span></span>"
            # the mark inside the numbers' box, glued to the last number: as a flex item of its own it wrapped onto
            # a line between rows at 390 px and at 1280 px with large text
            f"<span class='sv-bar-value'>{escape(numbers)}{mark}</span></div>")


def _why_not_p(shares: list[_Share], overlap: float, draft_id: int, recovered_id: int) -> str:
    """The counter-example, with this step's numbers: had the recovered token been drawn from p instead of the
    residual, a token x would come out with chance min(p(x), q(x)) + (1 − Σ min) · p(x), not p(x): the rejected
    draft (p < q) too often, and the recovered token as its numbers say. '' when the record lacks both."""
    rest = _rest_text(overlap)
    said = []
    for share in sorted((s for s in shares if s.id in (draft_id, recovered_id)), key=lambda s: s.id != draft_id):
        wrong = share.accepted() + (1 - overlap) * share.p
        min_text, p_text, wrong_text = probability_text(share.accepted()), probability_text(share.p), probability_text(wrong)
        if wrong_text == p_text:
            continue                                           # no difference these digits can show
        sign = equals_sign(float(min_text) + float(rest) * float(p_text), wrong_text)
        how = "too often" if wrong > share.p else "too rarely"
        said.append(f"{chip(share.text, _kind(share.id, share.id == recovered_id, draft_id))} would come out with "
                    f"chance {min_text} + {rest} × {p_text} {sign} {wrong_text}, not its p = {p_text} ({how})")
    if not said:
        return ""
    return ("<div class='sv-sum-why-not'><b>Why not draw the recovered token from p?</b> Then "
            f"{'; and '.join(said)}: the output would no longer follow the target's law.</div>")


def _rest_text(overlap: float) -> str:
    """1 − Σ min(p, q), worked from Σ min's 3 shown decimals, so '1 − 0.806 = 0.194' holds on screen."""
    return f"{1 - round(overlap, 3):.3f}"


def _shown(value: float | None) -> str:
    """A probability as the page writes it; '–' when the record lacks it."""
    return "\u2013" if value is None else probability_text(value)


def _kind(token_id: int, drawn: bool, draft_id: int) -> str:
    """A row's chip: the recovered token drawn here, the rejected draft, or any other token (plain)."""
    return "recovered" if drawn else "rejected" if token_id == draft_id else "plain"


def _ordinal(n: int) -> str:
    """'' for 1 (the most likely), '2nd ', '3rd ', '4th ' ..."""
    return "" if n == 1 else {2: "2nd ", 3: "3rd "}.get(n, f"{n}th ")
