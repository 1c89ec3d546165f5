"""The sampled step table's numbers reproduce from their own shown digits (issue #33 item 2): a row read
'q 0.009, p 0.008, min(1, p/q) 0.955', where 0.008 / 0.009 is 0.889. Small probabilities are shown to 3
significant digits, and a ratio that the shown p and q still do not give says it came from the unrounded ones.
Every cell computed from other cells of its row (min(1, p/q) from p and q) is checked against its own row's
digits; the oracle is the arithmetic on the shown text itself. A sampled tree walk's first-tried node accepts
with its own p, so its 'accept with' cell reads as its p cell. Planted 3-decimal p and q: caught.
"""

from __future__ import annotations

import dataclasses
import math
import re
from html import unescape

from specviz.quantities import probability_text
from specviz.run.step_detail import step_detail_html
from trace_factory import make_step, trace_from_steps
from tree_factory import make_tree_trace

# (q, p) of d1..d4 of one sampled step: the reviewer's row is d4; d3's p/q sits on a rounding edge, so its
# 3-significant-digit p and q give 0.002 less than the unrounded ratio.
ROWS = [(0.6, 0.9), (0.25, 0.2), (0.0004001, 0.0003805), (0.00850, 0.00812)]


def sampled_step():
    step = make_step(1, 20, 4, 4, sampling=True)
    drafts = tuple(dataclasses.replace(draft, q=q) for draft, (q, _) in zip(step.draft, ROWS))
    targets = tuple(dataclasses.replace(target, p=p) for target, (_, p) in zip(step.target, ROWS)) + step.target[4:]
    ratios = tuple(min(1.0, p / q) for q, p in ROWS)
    draws = tuple(ratio * 0.5 for ratio in ratios)
    return dataclasses.replace(step, draft=drafts, target=targets, accept_prob=ratios, draws=draws)


def cells(page: str) -> list[dict[str, str]]:
    """Each draft row's cells by column name (the table's data-label), as the page shows them."""
    found = []
    for row in re.findall(r"<tr class='sv-accepted'>(.*?)</tr>", page, re.S):
        found.append({label: unescape(text) for label, text in re.findall(r"<td data-label='([^']*)'[^>]*>(.*?)</td>",
                                                                          row, re.S)})
    return found


def test_every_ratio_comes_from_its_row_s_shown_p_and_q_or_says_so():
    page = step_detail_html(trace_from_steps([sampled_step()], sampling=True), 1)
    rows = cells(page)
    assert len(rows) == 4
    assert (rows[3]["q (draft prob)"], rows[3]["p (target prob)"]) == ("0.00850", "0.00812")   # the reviewer's d4
    said = []
    for row in rows:
        q, p = float(row["q (draft prob)"]), float(row["p (target prob)"])
        shown, note = ratio_parts(row["min(1, p/q)"])
        if f"{min(1.0, p / q):.3f}" != shown:
            said.append(shown)
            assert "from the unrounded p and q" in note and f"give {min(1.0, p / q):.3f}" in note
        else:
            assert not note
    assert said == [ratio_parts(rows[2]["min(1, p/q)"])[0]]          # only the rounding edge needs the words


def ratio_parts(cell: str) -> tuple[str, str]:
    """A min(1, p/q) cell's shown value and its note ('' when none), as plain text."""
    value = re.search(r"<span class='sv-num'>(.*?)</span>", cell, re.S)
    note = re.search(r"<small class='sv-ratio-note'>(.*?)</small>", cell, re.S)
    assert value, cell
    return value.group(1), unescape(note.group(1)) if note else ""


def test_an_unverified_draft_s_ratio_carries_no_note():
    """Issue #41: the rounding note sat beside unverified drafts too, whose ratio no test used."""
    step = sampled_step()
    step = dataclasses.replace(step, verdicts=("accepted", "rejected", "unverified", "unverified"))
    page = step_detail_html(trace_from_steps([step], sampling=True), 1)
    unverified = re.findall(r"<tr class='sv-unverified'>(.*?)</tr>", page, re.S)
    assert len(unverified) == 2 and all("sv-ratio-note" not in row for row in unverified)
    assert "sv-ratio-note" in step_detail_html(trace_from_steps([sampled_step()], sampling=True), 1)


def test_a_tree_node_s_acceptance_is_its_shown_p_where_no_sibling_was_refused_before_it():
    """A sampled tree walk accepts a first-tried node x with probability p(x) (engine/decode/tree/accept.py):
    its 'accept with' cell must read as its p cell, digit for digit, also for a small p (planted 3-decimal
    'accept with' beside a 3-significant-digit p: caught)."""
    trace = make_tree_trace(sampling=True)
    step = next(step for step in trace.steps if step.tree and any(node.draw is not None for node in step.tree.nodes))
    first = next(node for node in step.tree.nodes if node.draw is not None)
    small = dataclasses.replace(first, p=0.00812, accept_prob=0.00812, draw=0.5, verdict="rejected")
    tree = dataclasses.replace(step.tree, nodes=tuple(small if node.id == first.id else node
                                                      for node in step.tree.nodes))
    trace = dataclasses.replace(trace, steps=tuple(dataclasses.replace(s, tree=tree) if s is step else s
                                                   for s in trace.steps))
    page = step_detail_html(trace, step.index)
    rows = re.findall(r"<tr class='sv-(?:accepted|rejected)'>(.*?)</tr>", page, re.S)
    checked = 0
    for row in rows:
        found = dict(re.findall(r"<td data-label='([^']*)'[^>]*>(.*?)</td>", row, re.S))
        if "renormalised" in unescape(found["why"]) or "refused before" in unescape(found["why"]):
            continue
        assert found["accept with"] == found["p (target prob)"], found
        checked += 1
    assert checked and "0.00812" in page and "u = 0.500 ≥ 0.00812" in unescape(page)


def test_a_shown_probability_keeps_three_significant_digits_or_three_decimals():
    """The oracle is the value itself: below 0.1 the text holds exactly 3 significant digits and is within half a
    unit of the third one; from 0.1 it has 3 decimals (planted: the carry past 0.0999.. written '0.1000': caught)."""
    values = [0.0999, 0.09996, 0.05, 0.0081249, 0.009999, 0.00099996, 0.000123456, 1e-9, 0.1, 0.5, 0.99996, 1.0]
    values += [(i * 7919 % 10007) / 10007 ** (1 + i % 3) for i in range(1, 400)]
    for value in values:
        text = probability_text(value)
        if value >= 0.1 or text == "0.100":
            assert re.fullmatch(r"[01]\.\d{3}", text) and abs(float(text) - value) <= 5e-4 + 1e-12, (value, text)
            continue
        mantissa = text.partition("e")[0].replace(".", "").lstrip("0")
        assert len(mantissa) == 3, (value, text)
        assert abs(float(text) - value) <= 0.5 * 10 ** (math.floor(math.log10(float(text))) - 2) + 1e-15, (value, text)
    assert [probability_text(v) for v in (0.0999, 0.09996, 0.009999, 0.00812)] == ["0.0999", "0.100", "0.0100", "0.00812"]



def test_hovers_show_small_probabilities_with_the_step_tables_digits():
    """The timeline's hovers write p, q and min(1, p/q) as the step table does (3 significant digits below 0.1),
    so 'q 0.009, p 0.008' never sits beside 'min(1, p/q) 0.955' in a hover either (issue #33 item 2)."""
    from specviz.figures.timeline import timeline_figure

    step = sampled_step()
    hovers = [h for data in timeline_figure(trace_from_steps([step], sampling=True)).data for h in data.hovertext]
    small = next(i for i, d in enumerate(step.draft) if d.q < 0.1)
    d = f"d{small + 1}:"
    hover = next(h for h in hovers if d in h and "q (draft prob)" in h)
    for needle in (f"q (draft prob) = {probability_text(step.draft[small].q)}",
                   f"p (target prob) = {probability_text(step.target[small].p)}"):
        assert needle in hover, (needle, hover)
    assert "0.009" not in hover.split("q (draft prob) = ")[1][:6]
