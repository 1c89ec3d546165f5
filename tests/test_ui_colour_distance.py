"""Kinds that stay apart under deuteranopia by more than pattern (issue #33 item 5): simulated (Machado 2009),
accepted, bonus and unverified fell to CIELAB distances of 18, 15 and 22 (from 88, 43, 51) in the timeline, and
the output panel's accepted and bonus tints to 3: only the patterns and underlines told them apart. Each now
steps in lightness. The distances are computed from the colours the page uses (specviz/style.py COLORS for the
figures, assets/specviz.css for the chips and the output text); the old colours are planted and caught. The
bonus chip's text reads against its fill (WCAG contrast 4.5 or more; white on the pink was 3.1).
"""

from __future__ import annotations

import re
from itertools import combinations

import pytest

from colour_vision import delta_e, seen_by_deuteranope
from specviz.assets import read_css
from specviz.style import COLORS, TEXT_ON

APART = 24                   # CIELAB distance under deuteranopia between any two of accepted, bonus, unverified
LIGHTNESS_STEP = 20          # their L* differences under deuteranopia: a step a greyscale projector keeps too
OUTPUT_APART = {("accepted", "bonus"): 20, ("accepted", "recovered"): 15, ("bonus", "recovered"): 12}
OLD = {"accepted": "#009E73", "bonus": "#CC79A7", "unverified": "#BBBBBB"}
OLD_TINTS = {"accepted": "#C7EAE0", "bonus": "#F0D7E5", "recovered": "#BFDCEC"}


def check_kinds(colours: dict[str, str]) -> None:
    for a, b in combinations(("accepted", "bonus", "unverified"), 2):
        seen_a, seen_b = seen_by_deuteranope(colours[a]), seen_by_deuteranope(colours[b])
        assert delta_e(seen_a, seen_b) >= APART, f"{a} and {b}: {delta_e(seen_a, seen_b):.0f} apart"
        assert abs(seen_a[0] - seen_b[0]) >= LIGHTNESS_STEP, f"{a} and {b}: no lightness step"


def check_tints(tints: dict[str, str]) -> None:
    for (a, b), least in OUTPUT_APART.items():
        distance = delta_e(seen_by_deuteranope(tints[a]), seen_by_deuteranope(tints[b]))
        assert distance >= least, f"output {a} and {b}: {distance:.0f} apart"


def output_tints(css: str) -> dict[str, str]:
    """Each output kind's tint (rgba over the white page) as the opaque colour it shows."""
    tints = {}
    for kind, r, g, b, alpha in re.findall(r"\.sv-out\.sv-(\w+) \{ background: rgba\((\d+), (\d+), (\d+), ([\d.]+)\)",
                                           css):
        a = float(alpha)
        tints[kind] = "#" + "".join(f"{round(255 * (1 - a) + int(c) * a):02X}" for c in (r, g, b))
    return tints


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio of two sRGB colours."""
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_timeline_kinds_step_in_lightness_under_deuteranopia():
    check_kinds(COLORS)


def test_the_chips_use_the_same_colours_and_the_bonus_text_reads():
    css = read_css()
    for kind in ("accepted", "bonus", "unverified"):
        assert re.search(rf"--sv-{kind}: {COLORS[kind]};", css, re.I), f"the chips' {kind} is not COLORS'"
    assert contrast(TEXT_ON["bonus"], COLORS["bonus"]) >= 4.5
    chip = re.search(r"\.sv-tok\.sv-bonus \{[^}]*\}", css).group(0)
    assert contrast(re.search(r"color: (#\w{6})", chip.replace("background-color", "")).group(1), COLORS["bonus"]) >= 4.5


def test_every_chip_and_verdict_text_reads_against_what_it_sits_on():
    """WCAG contrast 4.5 or more for normal text: each kind's text on its fill, as the timeline draws it
    (TEXT_ON) and as the chips style it (the CSS), and the step tables' verdict words on white (white
    on the rejected chip was 3.9, vermillion words on white 3.9, pink ones 3.1)."""
    css = read_css()
    for kind, text in TEXT_ON.items():
        assert contrast(text, COLORS[kind]) >= 4.5, kind
    for kind in ("accepted", "rejected", "recovered", "bonus", "unverified", "carryover"):
        rule = re.search(rf"\.sv-tok\.sv-{kind}[ ,][^{{]*\{{([^}}]*)\}}", css).group(1)
        written = re.search(r"(?<![-\w])color: (#\w{3,6})", rule)
        text = written.group(1) if written else "#fff"              # .sv-tok's own colour
        text = "#" + "".join(c * 2 for c in text[1:]) if len(text) == 4 else text
        assert contrast(text, COLORS[kind]) >= 4.5, (kind, text)
    inks = dict(re.findall(r"--sv-(\w+)-ink: (#\w{6})", css))
    for kind in ("rejected", "bonus"):
        assert contrast(inks[kind], "#FFFFFF") >= 4.5
        assert re.search(rf"td\.sv-verdict \{{ color: var\(--sv-{kind}-ink\)", css), kind
    assert re.search(r"tr\.sv-accepted td\.sv-verdict \{ color: var\(--sv-accepted\)", css)
    assert contrast(COLORS["accepted"], "#FFFFFF") >= 4.5


def test_the_output_tints_step_in_lightness_under_deuteranopia():
    tints = output_tints(read_css())
    assert set(tints) == {"accepted", "bonus", "recovered"}
    check_tints(tints)


def test_the_old_colours_are_caught():
    with pytest.raises(AssertionError):
        check_kinds({**COLORS, **OLD})
    with pytest.raises(AssertionError):
        check_tints(OLD_TINTS)
    assert contrast("#FFFFFF", OLD["bonus"]) < 4.5                  # the old white text on the bonus chip
    assert contrast("#FFFFFF", COLORS["rejected"]) < 4.5 and contrast(COLORS["rejected"], "#FFFFFF") < 4.5
