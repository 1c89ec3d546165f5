"""The quantities every tab shows, each with one name, one symbol and one tooltip (issue #27).

A run has three acceptance-like numbers, easily confused: the measured acceptance rate r, the
expected acceptance α the i.i.d. model is built on, and the tokens per step τ they lead to; a tree
run's node acceptance rₙ (path tokens over nodes) is a fourth, under its own name. Every
card, figure title, hover and sentence that shows one of them takes its words from here, so a
student meets the same name, symbol and definition on the Run, Explore and Lab tabs. Definitions:
engine/metrics.py (r and τ from the steps, α from the recorded Σ min(p, q)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape


@dataclass(frozen=True)
class Quantity:
    """One quantity: `name` and `symbol` as every tab writes them, `tip` its one definition."""

    key: str
    name: str
    symbol: str
    tip: str

    @property
    def label(self) -> str:
        """'acceptance rate r': the name with its symbol, as titles and cards write it."""
        return f"{self.name} {self.symbol}"

    @property
    def title(self) -> str:
        """'Acceptance rate r': the label opening a title or a sentence."""
        return self.label[:1].upper() + self.label[1:]

    def html(self, text: str | None = None) -> str:
        """`text` (default: the label) as HTML carrying the quantity's tooltip; tests find every use by
        its `data-quantity`."""
        return (f"<span class='sv-quantity' data-quantity='{self.key}' title='{escape(self.tip)}'>"
                f"{escape(text if text is not None else self.label)}</span>")


ACCEPTANCE_RATE = Quantity(
    "acceptance_rate", "acceptance rate", "r",
    "Acceptance rate r = accepted drafts / drafted tokens, measured. A draft after a rejected one is never "
    "checked but still counts as drafted, so r falls as k grows. A tree run has its own: the node acceptance rₙ.")
ALPHA = Quantity(
    "alpha", "expected acceptance", "α",
    "Expected acceptance α = Σₓ min(p(x), q(x)): the chance that a draft sampled from the draft's law q is "
    "accepted against the target's p, averaged over the drafted positions (greedy: the share of positions where "
    "the two argmaxes agree). The i.i.d. model's parameter: a step of k drafts emits E = (1 − α^(k+1)) / (1 − α) "
    "tokens on average.")
TOKENS_PER_STEP = Quantity(
    "tokens_per_step", "tokens per step", "τ",
    "Tokens per step τ = accepted drafts + 1 (the recovered or bonus token the target adds), averaged over steps: "
    "vLLM's mean acceptance length. As vLLM counts, a step that drafted nothing is left out; each step counted is "
    "one target forward, so τ is also the tokens per verifying target forward; at most k + 1.")
BY_POSITION = Quantity(
    "by_position", "acceptance by position", "P(dᵢ accepted | checked)",
    "Acceptance by position = P(dᵢ accepted | checked): of the steps whose i-th draft the target checked (every "
    "draft before it accepted), the share that accepted it.")
NODE_ACCEPTANCE = Quantity(
    "node_acceptance", "node acceptance", "rₙ",
    "Node acceptance rₙ = accepted path tokens / tree nodes drafted, measured, in a tree run. A tree drafts several "
    "candidates for a position and at most one of them can be accepted, so rₙ falls as the tree widens even when "
    "the path grows: it is not the chain's acceptance rate r.")
SPEED_NOTE = ("A speed is wall-clock time on the machine that ran the run, shared with whatever else ran there: "
              "the same run goes slower on a busy machine, so compare its speedup over target-only timed beside "
              "it, not tokens per second across tabs or runs.")
"""The one sentence beside every speed the page shows (issue #33 item 8: the same chain ran at 8.8 tok/s
recorded, 6.41 in Explore, 1.3 in the Lab and 1.4 live, and only the Lab said the machine's load is why)."""


def speed_note_html(element_id: str = "") -> str:
    """SPEED_NOTE as a muted note (tests find every one by its class)."""
    ident = f" id='{element_id}'" if element_id else ""
    return f"<div class='sv-note sv-speed-note'{ident}>{escape(SPEED_NOTE)}</div>"


ALPHA_DIGITS = 3             # α is shown to 3 decimals, and every model number beside it is computed from those


def shown_alpha(alpha: float) -> float:
    """α as the page shows it. Every E, model speedup or model curve shown beside α is computed from this value,
    so the shown formula reproduces the shown number from the shown digits (issue #33 item 2: 'α 0.96' beside
    'E = 5.37', where 0.96 gives 5.43)."""
    return round(alpha, ALPHA_DIGITS)


def alpha_text(alpha: float) -> str:
    """'0.957': α's digits as every tab writes them."""
    return f"{shown_alpha(alpha):.{ALPHA_DIGITS}f}"


QUANTITIES = (ACCEPTANCE_RATE, ALPHA, TOKENS_PER_STEP, BY_POSITION, NODE_ACCEPTANCE)


def hover_tip(quantity: Quantity, chars: int = 60) -> str:
    """The tooltip for a Plotly hover: the same words, broken into lines of about `chars` characters."""
    lines, current = [], ""
    for word in quantity.tip.split():
        if current and len(current) + 1 + len(word) > chars:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}".strip()
    return "<br>".join(escape(line, quote=False) for line in [*lines, current])


PROBABILITY_DIGITS = 3       # a probability is shown to 3 decimals, or to 3 significant digits when smaller than 0.1


def probability_text(value: float | None) -> str:
    """'0.328', and for a small probability 3 significant digits ('0.00812', '8.12e-05'), so a ratio of two small
    shown probabilities still comes out near the shown ratio (issue #33 item 2: 'q 0.009, p 0.008' beside
    'min(1, p/q) 0.955', where the shown digits give 0.889); None (an n-gram draft's q) -> '–' as `tokens.number`."""
    if value is None:
        return "\u2013"
    if value == 0 or abs(value) >= 0.1:
        return f"{value:.{PROBABILITY_DIGITS}f}"
    if abs(value) < 1e-4:
        return f"{value:.{PROBABILITY_DIGITS - 1}e}"
    decimals = PROBABILITY_DIGITS - 1 - math.floor(math.log10(abs(value)))
    text = f"{value:.{decimals}f}"
    return text if len(text.lstrip("-0.")) <= PROBABILITY_DIGITS else f"{value:.{decimals - 1}f}"


def reproduces(from_shown: float, shown: str) -> bool:
    """Whether a number worked out from other shown numbers' digits, written with `shown`'s decimals, is `shown`:
    then '=' is true of the digits on screen; else the page says '≈' (or why they differ)."""
    decimals = len(shown.partition(".")[2]) if "e" not in shown else None
    return (f"{from_shown:.{decimals}f}" == shown if decimals is not None
            else math.isclose(from_shown, float(shown), rel_tol=5e-3))


def equals_sign(from_shown: float, shown: str) -> str:
    """'=' when the shown operands' digits give `shown`, else '≈' (their rounding said beside the equation)."""
    return "=" if reproduces(from_shown, shown) else "≈"


def ratio_text(ratio: float | None, p: float | None, q: float | None) -> tuple[str, str]:
    """min(1, p/q) as shown (3 decimals, as the draw u beside it) and '' or, where the shown p and q
    (`probability_text`) do not give it, the sentence saying so: the test used the unrounded numbers."""
    if ratio is None:
        return "\u2013", ""
    shown = f"{ratio:.{PROBABILITY_DIGITS}f}"
    if p is None or q is None or not float(probability_text(q)):
        return shown, ""
    from_shown = min(1.0, float(probability_text(p)) / float(probability_text(q)))
    return shown, ("" if reproduces(from_shown, shown)
                   else f"from the unrounded p and q (the shown ones give {from_shown:.{PROBABILITY_DIGITS}f})")
