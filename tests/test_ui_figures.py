"""Figure builders on hand-built traces: what is drawn equals what the trace says."""

from __future__ import annotations

import dataclasses
import math

import pytest

from specviz.figures.acceptance import histogram_figure, per_step_figure, position_figure
from engine.records import Token
from engine.formats.trace import Trace
from specviz.figures.kv_cache import OFFSET, kv_cache_figure
from specviz.figures.timeline import timeline_figure
from engine.metrics import expected_histogram, truncated_geometric
from specviz.style import COLORS, LABELS, FigureStyle
from trace_factory import V1_FIXTURE, html_trace, make_trace, with_stale


def by_meta(fig, meta):
    matches = [trace for trace in fig.data if trace.meta == meta]
    assert len(matches) == 1, f"expected one trace with meta {meta!r}, found {len(matches)}"
    return matches[0]


def cells(fig, category):
    return [trace for trace in fig.data if trace.meta == category]


def placed(bar):
    """The cells a bar trace really draws (an empty category holds one None cell for the legend)."""
    return [x for x in bar.x if x is not None]


@pytest.mark.parametrize("sampling", [False, True])
def test_timeline_cells_match_the_trace(sampling):
    trace = make_trace([4, 1, 0, 4, 2, 3], sampling=sampling)
    fig = timeline_figure(trace)
    verdicts = [v for step in trace.steps for v in step.verdicts]
    kinds = [token.kind for step in trace.steps for token in step.emitted]
    for category, expected in [("accepted", verdicts.count("accepted")), ("rejected", verdicts.count("rejected")),
                               ("unverified", verdicts.count("unverified")), ("recovered", kinds.count("recovered")),
                               ("bonus", kinds.count("bonus"))]:
        (bar,) = cells(fig, category)
        assert len(placed(bar)) == expected, category
    assert len(by_meta(fig, "accepted").x) == trace.summary.accepted
    assert len(placed(by_meta(fig, "bonus"))) == 2 and len(placed(by_meta(fig, "recovered"))) == 4


def test_timeline_places_cells_by_step_and_position():
    trace = make_trace([1, 4])
    fig = timeline_figure(trace)
    rejected = by_meta(fig, "rejected")
    assert list(rejected.x) == [0]
    assert rejected.base[0] + rejected.y[0] / 2 == pytest.approx(2)        # d2 row
    bonus = by_meta(fig, "bonus")
    assert list(bonus.x) == [1] and bonus.base[0] + bonus.y[0] / 2 == pytest.approx(5)   # the "target +1" row
    carry = by_meta(fig, "carryover")
    assert list(carry.x) == [1]                                            # fed at the start of the next step
    recovered = trace.steps[0].emitted[-1].text                          # step 0 rejected d2: its recovered token
    assert list(carry.text) == [recovered] and f"<br>{recovered}<br>" in carry.hovertext[0]
    assert "the token the target chose where the previous step rejected d2" in carry.hovertext[0]
    assert "bonus" not in carry.hovertext[0]                             # one recovered token, not d_k + bonus
    assert [trace.name for trace in fig.data if trace.meta in LABELS] == [trace.name for trace in fig.data]


def test_timeline_hover_shows_p_q_ratio_and_draw_when_sampling():
    fig = timeline_figure(make_trace([1], sampling=True))
    hover = by_meta(fig, "rejected").hovertext[0]
    for needle in ("q (draft prob) = 0.600", "p (target prob) = 0.200", "min(1, p/q) = 0.333", "random draw u = 0.433"):
        assert needle in hover
    assert "random draw" not in by_meta(timeline_figure(make_trace([1])), "rejected").hovertext[0]


def test_timeline_escapes_token_text_in_hover():
    fig = timeline_figure(html_trace())
    hovers = [h for trace in fig.data for h in trace.hovertext]
    assert any("&lt;script&gt;" in h for h in hovers)
    assert not any("<script>" in h for h in hovers)
    texts = [t for trace in fig.data for t in trace.text]
    assert "&lt;script&gt;" in texts                                       # 8 characters: whole, in a smaller font
    assert not any("<" in t.replace("<br>", "") for t in texts)            # a cell's own line break only
    assert "&lt;img·src=x<br>·onerror=…" in texts              # two lines of style.shrunk_chars(TOKEN_CHARS) (10)


def test_a_long_token_is_drawn_whole_in_a_font_shrunk_to_its_cell_and_a_longer_one_is_cut():
    fig = timeline_figure(html_trace())
    cells = [(text, size) for trace in fig.data for text, size in zip(trace.text, trace.textfont.size or ())]
    sizes = dict(cells)
    assert sizes["&lt;script&gt;"] == round(12 * 7 / 8, 1)          # 8 characters in a cell of 7
    assert sizes["&lt;img·src=x<br>·onerror=…"] == round(12 * 0.7, 1)     # two lines of 10 characters, the floor
    assert all(size == 12 for text, size in cells if len(text.replace("&lt;", "<").replace("&gt;", ">")
                                                         .replace("&amp;", "&")) <= 7)


@pytest.mark.parametrize("token, lines, size", [
    ("·function", ["·function"], round(12 * 7 / 9, 1)),                   # one line, shrunk
    ("·palindrome", ["·palin", "drome"], round(12 * 0.8, 1)),             # issue #41: was '·palindro…'
    ("·considering", ["·consi", "dering"], round(12 * 0.8, 1)),
    ("·representations", ["·represe", "ntations"], round(12 * 0.8, 1)),
    ("x" * 25, ["x" * 10, "x" * 9 + "…"], round(12 * 0.7, 1))])          # past two lines' worth: cut, at the floor
def test_a_token_too_long_for_one_line_is_drawn_whole_on_two(token, lines, size):
    trace = html_trace()
    first = trace.steps[0]
    long_draft = dataclasses.replace(first, draft=(dataclasses.replace(first.draft[0], text=token), *first.draft[1:]))
    fig = timeline_figure(dataclasses.replace(trace, steps=[long_draft, *trace.steps[1:]]))
    cells = {text: size for data in fig.data for text, size in zip(data.text, data.textfont.size or ())}
    assert cells["<br>".join(lines)] == size


def test_long_timeline_shows_a_window_around_the_selected_step():
    trace = make_trace([2, 4, 0, 1] * 30)
    assert len(trace.steps) == 120
    fig = timeline_figure(trace, selected_step=60)
    low, high = fig.layout.xaxis.range
    assert low < 60 < high and high - low <= 20
    assert timeline_figure(trace, follow_end=True).layout.xaxis.range[1] == pytest.approx(119.5)
    assert len(by_meta(fig, "accepted").x) == trace.summary.accepted     # all cells are there, only the view scrolls
    assert any(shape.x0 == 59.5 for shape in fig.layout.shapes)           # the selected step is outlined


def test_kv_cache_values_equal_the_trace():
    trace = make_trace([4, 1, 0, 2], sampling=True)
    fig = kv_cache_figure(trace)
    for model, attribute in (("target", "kv_target"), ("draft", "kv_draft")):
        caches = [getattr(step, attribute) for step in trace.steps]
        for stage in ("before", "after_forward", "after_cutoff"):
            assert list(by_meta(fig, f"{model}.{stage}").y) == [getattr(c, stage) for c in caches]
        assert list(by_meta(fig, f"{model}.cutoff").y) == [c.cutoff for c in caches]
    assert list(by_meta(fig, "target.committed").y) == [s.context_len + s.num_emitted for s in trace.steps]
    assert list(by_meta(fig, "target.cutoff").y) == [0, 3, 4, 2]
    assert by_meta(fig, "target.after_cutoff").hovertext[1] == "step 1: target cache 16 → 21 → 18: 3 rejected positions cut"
    assert not cells(fig, "target.stale") and not cells(fig, "draft.stale")      # nothing stale to draw
    assert "unknown" not in fig.layout.title.subtitle.text


@pytest.mark.parametrize("zero_fill", [False, True])
def test_kv_cache_draws_stale_positions_in_their_own_colour(zero_fill):
    trace = with_stale(make_trace([4, 1, 0, 2]), zero_fill)          # a lab run: nothing cut, rejects stay
    fig = kv_cache_figure(trace)
    for model, attribute in (("target", "kv_target"), ("draft", "kv_draft")):
        caches = [getattr(step, attribute) for step in trace.steps]
        stale = by_meta(fig, f"{model}.stale")
        assert stale.line.color == COLORS["stale"] and stale.line.color not in (COLORS["cut"], COLORS["accepted"])
        segments = [(x, low, high) for x, low, high in zip(stale.x[0::3], stale.y[0::3], stale.y[1::3])]
        assert segments == [(s.index + OFFSET, c.after_cutoff - c.stale, c.after_cutoff)
                            for s, c in zip(trace.steps, caches) if c.stale]
        assert list(by_meta(fig, f"{model}.cutoff").y) == [0, 0, 0, 0]
    assert [c.stale for c in (s.kv_target for s in trace.steps)] == [0, 3, 7, 9]
    kept = "zero-filled" if zero_fill else "left"
    assert by_meta(fig, "target.stale").hovertext[3] == f"step 2: target cache 21 → 26: 4 rejected positions {kept} in place, 7 stale in total"
    low, _ = fig.layout.yaxis.range
    assert low < min(c.after_cutoff - c.stale for c in (s.kv_target for s in trace.steps[1:]))   # the whole bar shows


def test_kv_cache_of_a_trace_1_file_says_stale_is_unknown():
    trace = Trace.load(V1_FIXTURE)
    fig = kv_cache_figure(trace)
    assert "stale positions unknown" in fig.layout.title.subtitle.text
    assert not any(str(t.meta).endswith(".stale") for t in fig.data)
    hover = by_meta(fig, "target.after_cutoff").hovertext[0]
    assert hover == "step 0: target cache 0 → 52 → 52: 5 rejected positions cut; stale positions unknown (a specviz.trace/1 record)"


def test_kv_cache_without_a_draft_cache_draws_the_target_only():
    fig = kv_cache_figure(make_trace([2, 0, 3], ngram=True))
    metas = {trace.meta for trace in fig.data}
    assert "target.after_cutoff" in metas and not any(str(m).startswith("draft.") for m in metas)


def test_per_step_figure_bars_and_running_mean():
    trace = make_trace([4, 1, 0, 2])
    fig = per_step_figure(trace)
    assert list(by_meta(fig, "accepted").y) == [4, 1, 0, 2]
    assert list(by_meta(fig, "drafted").y) == [4, 4, 4, 4]
    running = list(by_meta(fig, "running").y)
    assert running == pytest.approx([5 / 1, 7 / 2, 8 / 3, 11 / 4])


def test_position_figure_equals_summary():
    trace = make_trace([4, 1, 0, 2, 3])
    fig = position_figure(trace)
    rates = [r if r is not None else 0.0 for r in trace.summary.per_position_acceptance]
    assert list(by_meta(fig, "per_position").y) == pytest.approx(rates)


def test_histogram_and_geometric_model():
    trace = make_trace([4, 1, 0, 2, 4, 4])
    fig = histogram_figure(trace)
    assert list(by_meta(fig, "measured").y) == pytest.approx([1 / 6, 1 / 6, 1 / 6, 0, 3 / 6])
    alpha = trace.summary.estimated_alpha                # the one α: Σ min(p, q) over the drafted positions
    assert alpha == pytest.approx(0.7)
    model = list(by_meta(fig, "model").y)
    assert model == pytest.approx(truncated_geometric(alpha, 4))
    assert sum(model) == pytest.approx(1.0)


def test_truncated_geometric_law():
    assert truncated_geometric(0.5, 3) == pytest.approx([0.5, 0.25, 0.125, 0.125])
    assert truncated_geometric(1.0, 2) == pytest.approx([0.0, 0.0, 1.0])
    mixed = expected_histogram(0.5, [1, 3], 3)
    assert mixed == pytest.approx([0.5, (0.5 + 0.25) / 2, 0.125 / 2, 0.125 / 2])
    mean = sum(n * p for n, p in enumerate(truncated_geometric(0.7, 4)))
    assert mean + 1 == pytest.approx((1 - 0.7**5) / (1 - 0.7))          # E = (1 - a^(k+1)) / (1 - a)


@pytest.mark.parametrize("builder", [timeline_figure, kv_cache_figure, per_step_figure, position_figure,
                                     histogram_figure])
def test_every_figure_has_an_empty_state_and_a_large_style(builder):
    empty = builder(None)
    assert not empty.data and empty.layout.annotations
    large = builder(make_trace([2, 4]), style=FigureStyle.for_screen(large=True))
    assert large.layout.font.size == 18
    assert large.layout.title.text and not math.isnan(large.layout.height)


def test_timeline_legend_lists_every_colour_from_the_first_step():
    fig = timeline_figure(make_trace([4]))
    assert [trace.meta for trace in fig.data] == ["accepted", "rejected", "unverified", "recovered", "bonus",
                                                   "carryover"]
    assert placed(by_meta(fig, "rejected")) == [] and len(placed(by_meta(fig, "accepted"))) == 4
    assert list(fig.layout.xaxis.range) == [-0.5, 7.5]         # room for 8 steps: the first is not stretched


def test_timeline_hover_says_argmax_when_greedy_and_residual_only_when_sampling():
    greedy = timeline_figure(make_trace([1, 4]))
    hovers = [h for trace in greedy.data for h in trace.hovertext if h]
    assert not any("max(0, p − q)" in h or "resampl" in h or "drawn from" in h for h in hovers)
    assert "the target's argmax at d2, which replaces the rejected draft" in by_meta(greedy, "recovered").hovertext[0]
    assert "the target's argmax after all 4 drafts" in by_meta(greedy, "bonus").hovertext[0]
    assert "≠ the target's argmax" in by_meta(greedy, "rejected").hovertext[0]
    sampled = timeline_figure(make_trace([1, 4], sampling=True))
    assert "drawn from the residual norm(max(0, p − q)) after d2" in by_meta(sampled, "recovered").hovertext[0]
    assert "drawn from the target's p after all 4" in by_meta(sampled, "bonus").hovertext[0]


def test_token_kinds_differ_by_pattern_as_well_as_colour():
    fig = timeline_figure(make_trace([1, 4]))
    shapes = {name: (by_meta(fig, name).marker.pattern.shape or "") for name in ("accepted", "rejected", "recovered",
                                                                                  "bonus")}
    assert shapes["accepted"] == "" and len({shapes["rejected"], shapes["recovered"], shapes["bonus"]} - {""}) == 3
    kv = kv_cache_figure(make_trace([1, 4]))
    assert by_meta(kv, "draft.cutoff").marker.pattern.shape and not by_meta(kv, "target.cutoff").marker.pattern.shape
    assert COLORS["accepted"] == "#00664A" and COLORS["bonus"] == "#CC79A7" and COLORS["recovered"] == "#0072B2"


def test_acceptance_figures_name_tokens_per_step_and_use_the_one_alpha():
    trace = make_trace([4, 1, 0, 2])
    per_step = per_step_figure(trace)
    running = by_meta(per_step, "running")
    assert running.name.startswith("tokens per step τ") and "accepted + 1" in running.name
    assert "mean acceptance length" in running.hovertemplate and "τ = %{y:.2f}" in running.hovertemplate
    position = position_figure(trace)
    assert "expected acceptance α = Σ min(p, q)" in position.layout.title.subtitle.text
    assert by_meta(position, "model").name == "model: the same α = 0.700 at every position"
    histogram = histogram_figure(trace).layout.title
    assert histogram.text == "<b>Drafts accepted per step: histogram</b>"
    assert "each draft accepted with chance α" in histogram.subtitle.text
    assert "a = " not in str(per_step_figure(trace).to_dict()) + str(position.to_dict())   # one letter per quantity


def test_every_hatched_mark_keeps_its_colour():
    """A plotly pattern without fillmode "overlay" is drawn alone in its fgcolor: the draft's white-hatched
    cut bars were invisible on the white page. Every patterned mark must overlay its own colour."""
    trace = make_trace([4, 1, 0, 2], sampling=True)
    patterned = []
    for figure in (kv_cache_figure(trace), timeline_figure(trace)):
        for data in figure.data:
            pattern = getattr(getattr(data, "marker", None), "pattern", None)
            if pattern is not None and pattern.shape:
                patterned.append((data.name, pattern.fillmode))
    assert any(name == "draft positions cut" for name, _ in patterned)
    assert all(fillmode == "overlay" for _, fillmode in patterned), patterned


def test_carried_tokens_are_separated_by_a_plain_space_not_a_drawn_one():
    """"↵↵" then "def" is drawn "↵↵ def": a "·" between them would read as a space inside the text."""
    trace = make_trace([4, 1])
    steps = list(trace.steps)
    steps[1] = dataclasses.replace(steps[1], carryover=(Token(1, "\n\n"), Token(2, "def")))
    carry = by_meta(timeline_figure(dataclasses.replace(trace, steps=tuple(steps))), "carryover")
    assert list(carry.text) == ["↵↵ def"]


def test_the_by_position_shares_never_sit_where_the_model_line_runs():
    """Issue #33 item 3: the '75 % of 12' label drawn above its bar crossed the model line at α. The shares and
    counts are tick labels under the axis, so no text is drawn in the plot area the line crosses."""
    trace = make_trace([4, 1, 0, 2, 3])
    fig = position_figure(trace)
    assert all(not getattr(t, "text", None) for t in fig.data), "text drawn inside the plot area"
    reached = [sum(step.verdicts[i] != "unverified" for step in trace.steps if len(step.verdicts) > i)
               for i in range(4)]
    rates = trace.summary.per_position_acceptance
    assert list(fig.layout.xaxis.ticktext) == [f"d{i + 1}<br>{100 * r:.0f}% of {n}" if r is not None
                                               else f"d{i + 1}<br>not reached" for i, (r, n) in enumerate(zip(rates, reached))]


def _font_sizes(value, path=""):
    """Every explicit font size in a figure's dict, by its path ('layout.annotations.3.font')."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "size" and "font" in path.rsplit(".", 1)[-1] and isinstance(item, (int, float)):
                yield path, item
            else:
                yield from _font_sizes(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _font_sizes(item, f"{path}.{index}")


def test_every_chart_text_grows_with_large_text():
    """Issue #33 item 4: large text enlarged the page but not the charts' heatmap numbers or the tree's node ids.
    Every explicit font size in every figure (titles, axis titles, ticks, legends, cell text, annotations) is
    larger with FigureStyle.for_screen(large=True) than without."""
    from specviz.assets import ASSETS_DIR, load_demo_trace, load_recorded_sweep, load_tree_sweep
    from specviz.figures.alignment import alignment_figure
    from specviz.figures.sweep import heatmap_figure, positions_figure, theory_figure
    from specviz.figures.tree import step_tree_figure
    from specviz.figures.tree_budget import tree_budget_figure
    from tree_factory import make_tree_trace
    greedy = load_demo_trace().trace
    sweep = load_recorded_sweep(ASSETS_DIR).table
    builders = {"timeline": lambda s: timeline_figure(greedy, style=s), "kv": lambda s: kv_cache_figure(greedy, style=s),
                "per step": lambda s: per_step_figure(greedy, s), "position": lambda s: position_figure(greedy, s),
                "histogram": lambda s: histogram_figure(greedy, s),
                "heatmap": lambda s: heatmap_figure(sweep, "speedup", s),
                "theory": lambda s: theory_figure(sweep, 0.0, style=s),
                "positions": lambda s: positions_figure(sweep, 0.0, style=s),
                "tree": lambda s: step_tree_figure(make_tree_trace().steps[0], s),
                "budgets": lambda s: tree_budget_figure(load_tree_sweep(ASSETS_DIR).table, s),
                "alignment": lambda s: alignment_figure({"A": greedy, "B": greedy}, s)}
    small = []
    for name, build in builders.items():
        normal = dict(_font_sizes(build(FigureStyle.for_screen(False, 1440)).to_dict()))
        large = dict(_font_sizes(build(FigureStyle.for_screen(True, 1440)).to_dict()))
        assert normal, name
        small += [f"{name} {path}: {normal[path]} → {large[path]}" for path in normal
                  if path in large and large[path] <= normal[path]]
    assert not small, small
