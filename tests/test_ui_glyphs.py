"""Glyphs the page draws for invisible or undrawable characters (issue #33 item 6): every glyph `visible`
puts in place of a character is one Debian's chromium draws with the page's fonts, not an empty box.

The oracle is the box itself: chromium draws every character no installed font has as the same box (the
font's .notdef), so a glyph whose pixels equal those of a private-use character (no font has one) is a box.
'␍', the old carriage-return glyph, is such a box here: the test checks the oracle catches it (planted: the
old glyph, caught). Control characters and the replacement character (a byte token's part of a multi-byte
character) show as <0xNN> and <byte>, in ASCII; grammar of the small words: '1 token', not '1 tokens'.
"""

from __future__ import annotations

import pytest

from specviz.tokens import counted, visible

MISSING = "\U0010FFFD"            # a private-use character: no font draws it
DRAW_JS = """([glyph, font]) => {
  const canvas = document.createElement('canvas'); canvas.width = 64; canvas.height = 64;
  const context = canvas.getContext('2d'); context.font = font; context.fillStyle = '#000';
  context.fillText(glyph, 8, 44);
  return Array.from(context.getImageData(0, 0, 64, 64).data.filter((_, i) => i % 4 === 3)).join(',');
}"""
FONTS = ("32px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace", "32px sans-serif")


def test_control_and_byte_characters_show_in_ascii():
    assert visible("\r\n") == "←↵" and visible(" \t") == "·⇥" and visible("") == "∅"
    assert visible("\x00a\x1b\x7f") == "<0x00>a<0x1B><0x7F>"
    assert visible("\ufffd\ufffd") == "<byte><byte>"
    assert visible("’s 字") == "’s·字"                       # printable text stays as it is
    assert counted(1, "token") == "1 token" and counted(0, "token") == "0 tokens" and counted(3, "node") == "3 nodes"


@pytest.mark.browser
def test_every_glyph_is_drawn_by_a_font(browser):
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    glyphs = sorted({char for text in (" ", "\n", "\t", "\r", "") for char in visible(text)})
    for font in FONTS:
        box = page.evaluate(DRAW_JS, [MISSING, font])
        assert any(value != "0" for value in box.split(",")), "the missing character draws as a box"
        assert page.evaluate(DRAW_JS, ["\u240d", font]) == box, "planted: the old '␍' is a box and caught"
        for glyph in glyphs:
            drawn = page.evaluate(DRAW_JS, [glyph, font])
            assert drawn != box and any(value != "0" for value in drawn.split(",")), (glyph, font)
    page.close()


def test_the_live_status_counts_one_token_in_the_singular():
    from specviz.run.watch import live_status
    from trace_factory import make_trace
    one = make_trace([0])                                 # one plain target step: 1 token
    assert live_status(one) == f"Running… step {one.steps[-1].index} · 1 token"
    assert live_status(make_trace([4, 2])).endswith("tokens") and live_status(None) == "Running…"
