"""Token text made visible: spaces, newlines and tabs shown as glyphs, control and byte tokens as <0xNN>, long
tokens shortened or split over two lines; a token as a chip. Every glyph is one the page's fonts draw (DejaVu and Liberation, Debian's
chromium; tests/test_ui_glyphs.py checks each against the installed fonts): '␍' for a carriage return is in none
of them and drew as an empty box (issue #33 item 6)."""

from __future__ import annotations

from html import escape

_GLYPHS = {" ": "\u00b7", "\n": "\u21b5", "\t": "\u21e5", "\r": "\u2190"}
REPLACEMENT = "\ufffd"       # what decoding a token that holds only part of a UTF-8 character gives


def visible(text: str) -> str:
    """The token with whitespace drawn (· for space, ↵ for newline, ⇥ for tab, ← for a carriage return, which
    sends the cursor back to the line's start), other control characters as <0xNN>, and the replacement
    character, a byte token's part of a multi-byte character, as <byte>; empty shows as ∅."""
    if text == "":
        return "\u2205"
    return "".join(_glyph(char) for char in text)


def _glyph(char: str) -> str:
    if char in _GLYPHS:
        return _GLYPHS[char]
    if char == REPLACEMENT:
        return "<byte>"
    if ord(char) < 0x20 or 0x7F <= ord(char) < 0xA0:
        return f"<0x{ord(char):02X}>"
    return char


def counted(count: int, noun: str) -> str:
    """'1 token', '3 tokens': a count with its noun in the right number."""
    return f"{count} {noun}{'s' * (count != 1)}"


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


def two_lines(shown: str, most: int) -> list[str]:
    """Already visible text as a cell draws it: one line of at most `most` characters, or two halves (at the space
    nearest the middle where a carryover joins two tokens, else at the middle: '·palindrome' -> '·palin',
    'drome'), the second cut with an ellipsis past `most` (issue #41: cells cut '·palindro…')."""
    if len(shown) <= most:
        return [shown]
    middle = (len(shown) + 1) // 2
    spaces = [i for i, char in enumerate(shown) if char == " " and 0 < i < len(shown) - 1
              and i <= most and len(shown) - i - 1 <= most]
    if spaces:
        at = min(spaces, key=lambda i: abs(i - middle))
        return [shown[:at], shown[at + 1:]]
    first = min(middle, most)
    return [shown[:first], clip(shown[first:], most)]
