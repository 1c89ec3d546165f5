"""Token text made visible: spaces, newlines and tabs shown as glyphs, long tokens shortened; a token as a chip."""

from __future__ import annotations

from html import escape

_GLYPHS = {" ": "\u00b7", "\n": "\u21b5", "\t": "\u21e5", "\r": "\u240d"}


def visible(text: str) -> str:
    """The token with whitespace drawn (· for space, ↵ for newline, ⇥ for tab); empty shows as ∅."""
    if text == "":
        return "\u2205"
    return "".join(_GLYPHS.get(char, char) for char in text)


def short(text: str, limit: int = 8) -> str:
    """`visible(text)` cut to `limit` characters with an ellipsis."""
    return clip(visible(text), limit)


def clip(shown: str, limit: int = 8) -> str:
    """Already visible text (several tokens joined by plain spaces) cut to `limit` characters with an ellipsis."""
    return shown if len(shown) <= limit else shown[: limit - 1] + "\u2026"


def percent(value: float | None, digits: int = 1) -> str:
    """0.1234 -> '12.3%'; None -> '–'."""
    return "\u2013" if value is None else f"{100 * value:.{digits}f}%"


def formatted(value: float | None, fmt: str) -> str:
    """`value` through a format string ("{:.2f}"); None -> '–'."""
    return "\u2013" if value is None else fmt.format(value)


def number(value: float | None, digits: int = 3) -> str:
    """A probability or ratio with a fixed number of digits; None -> '–'."""
    return "\u2013" if value is None else f"{value:.{digits}f}"


def chip(text: str, kind: str, title: str | None = None) -> str:
    """A token as an HTML chip of its kind (accepted, rejected, recovered, bonus, carryover, ...): a boxed,
    patterned cell (assets/specviz.css), so a token that looks like punctuation (‘:’) still reads as a token."""
    tip = f" title='{escape(title)}'" if title else ""
    return f"<span class='sv-tok sv-{kind}'{tip}>{escape(visible(text))}</span>"
