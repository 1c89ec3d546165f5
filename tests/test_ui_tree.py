"""The token-tree views of the Run tab (issue #19) on hand-built tree steps: what the tree figure
draws equals what the step's TreeRecord says, the captions say what happened, the KV chart words
the gather (drawn row by row, from -> to, under the tree; every node tagged with its id), the timeline
counts nodes, and the Run controls ask for a tree and refuse bad values.

The layout and gather oracles are written from the record alone; planted bugs (the figure's sibling
ranking, the gather's rows) show that they can fail.
"""

from __future__ import annotations

import pytest

from engine.config import ConfigError
from engine.records import StepRecord
from specviz.controls import Controls
from specviz.figures import tree_text
from specviz.figures.kv_cache import kv_cache_figure
from specviz.figures.timeline import timeline_figure
from specviz.figures.tree import CATEGORIES, CELL_WIDTH, is_tree_trace, step_tree_figure, tree_figure
from specviz.quantities import ACCEPTANCE_RATE, NODE_ACCEPTANCE
from specviz.run.output_view import metrics_html, output_html
from specviz.run.step_detail import step_detail_html
from specviz.run.views import render
from specviz.style import COLORS, FigureStyle
from trace_factory import make_trace
from tree_factory import FIRST_CHOICES, NOTHING, RESCUE, SHAPES, make_tree_step, make_tree_trace


def cells(fig, category):
    """(depth, row, text, hover) of every cell a category's bar trace really draws."""
    (bar,) = [trace for trace in fig.data if trace.meta == category]
    return [(base + CELL_WIDTH / 2, row, text, hover)
            for base, row, text, hover in zip(bar.base, bar.y, bar.text, bar.hovertext) if base is not None]


def node_cells(fig):
    """Node id -> (depth, row) for every drawn node, read back from the hover's 'node N' header."""
    found = {}
    for category in ("accepted", "rejected", "unreached"):
        for depth, row, _, hover in cells(fig, category):
            found[int(hover.split("node ")[1].split(",")[0])] = (depth, row)
    return found


def check_layout(step: StepRecord, fig) -> None:
    """Independent of the figure's code: every node once, at its depth; a node's first child (lowest id)
    on its own row and later siblings below in id order; row 0 holds exactly the draft's first choices."""
    tree = step.tree
    placed = node_cells(fig)
    assert sorted(placed) == [node.id for node in tree.nodes]
    assert len(set(placed.values())) == len(placed), "two cells drawn on top of each other"
    for node in tree.nodes:
        assert placed[node.id][0] == node.depth
        siblings = sorted(n.id for n in tree.nodes if n.parent == node.parent)
        rows = [placed[s][1] for s in siblings]
        assert rows == sorted(rows) and len(set(rows)) == len(rows)
        parent_row = 0 if node.parent is None else placed[node.parent][1]
        assert placed[siblings[0]][1] == parent_row
    first_choices, parent = [], None
    while any(n.parent == parent for n in tree.nodes):
        parent = min(n.id for n in tree.nodes if n.parent == parent)
        first_choices.append(parent)
    assert sorted(node for node, (_, row) in placed.items() if row == 0) == first_choices


@pytest.mark.parametrize("shape", [RESCUE, FIRST_CHOICES, NOTHING], ids=["rescue", "first-choices", "nothing"])
@pytest.mark.parametrize("sampling", [False, True])
def test_tree_cells_equal_the_record(shape, sampling):
    step = make_tree_step(3, 40, *shape, sampling=sampling)
    fig = step_tree_figure(step)
    check_layout(step, fig)
    for verdict in ("accepted", "rejected", "unreached"):
        assert len(cells(fig, verdict)) == sum(n.verdict == verdict for n in step.tree.nodes), verdict
    assert [trace.meta for trace in fig.data if trace.type == "bar" and not trace.meta.startswith("gather.")] == \
        list(CATEGORIES)                                                                  # every legend entry
    (path,) = [trace for trace in fig.data if trace.meta == "tree.path"] if step.tree.path else [None]
    if path is not None:                                  # one elbow per accepted node, drawn as the path
        assert list(path.x).count(None) == len(step.tree.path) and path.line.color == COLORS["accepted"]


def test_the_token_after_the_path_sits_after_the_stop_node():
    rescue = make_tree_step(0, 12, *RESCUE)                  # node 6 (depth 3) stopped: its child 8 rejected
    fig = step_tree_figure(rescue)
    ((depth, row, text, hover),) = cells(fig, "recovered")
    rows = node_cells(fig)
    assert depth == 4 and row > rows[8][1] and text == rescue.emitted[-1].text
    assert "every child of node 6 was rejected" in hover and not cells(fig, "bonus")
    leaf = step_tree_figure(make_tree_step(1, 20, *FIRST_CHOICES))
    ((depth, row, _, hover),) = cells(leaf, "bonus")
    assert (depth, row) == (4, 0) and "node 4 is a leaf" in hover          # the path ended in a leaf, row 0
    nothing = step_tree_figure(make_tree_step(2, 20, *NOTHING))
    ((depth, row, _, _),) = cells(nothing, "recovered")
    assert depth == 1 and row == 3                                           # under the 3 rejected depth-1 nodes


def test_caption_says_what_happened_and_what_the_gather_kept():
    step = make_tree_step(5, 30, *RESCUE)
    caption = step_tree_figure(step).layout.title.subtitle.text.replace("<br>", " ")
    assert "9 nodes drafted, depth 4; accepted path of 3 (nodes 0 → 3 → 6), then the recovered token" in caption
    assert ("At depth 2 the draft's first choice was rejected, so a single line of first choices (the top row) would "
            "have accepted 1 token; its second-ranked sibling") in caption and "added 2 accepted tokens" in caption
    assert ("The KV gather (below) kept the 3 accepted path rows (nodes 0, 3, 6), moved into place after the "
            "pending row, and cropped the other 6.") in caption
    plain = step_tree_figure(make_tree_step(5, 30, *FIRST_CHOICES)).layout.title.subtitle.text.replace("<br>", " ")
    assert "then the bonus token" in plain and "Every accepted token was the draft's first choice" in plain
    assert tree_text.first_choice_run(step.tree) == 1 and tree_text.first_choice_run(make_tree_step(
        0, 12, *FIRST_CHOICES).tree) == 3


def test_hover_shows_p_q_and_the_draw_of_the_tree_rule():
    step = make_tree_step(0, 12, *RESCUE, sampling=True)
    hovers = {int(h.split("node ")[1].split(",")[0]): h for v in ("accepted", "rejected", "unreached")
              for *_, h in cells(step_tree_figure(step), v)}
    assert "q (draft prob) = 0.275" in hovers[3] and "p (target prob) = 0.700" in hovers[3]
    assert "accepted with probability 0.778 (p with the siblings refused before it removed" in hovers[3]
    assert "random draw u = 0.389 (u < that: accept)" in hovers[3]
    assert "random draw u = 0.200 (u ≥ that: reject)" in hovers[2]
    assert "never tried" in hovers[7] and "random draw" not in hovers[7]
    greedy = {int(h.split("node ")[1].split(",")[0]): h for v in ("accepted", "rejected")
              for *_, h in cells(step_tree_figure(make_tree_step(0, 12, *RESCUE)), v)}
    assert "greedy: rejected, not the target's argmax" in greedy[2] and "random draw" not in greedy[2]


def test_token_text_is_escaped():
    import dataclasses
    step = make_tree_step(0, 12, *RESCUE)
    nodes = list(step.tree.nodes)
    nodes[2] = dataclasses.replace(nodes[2], token=dataclasses.replace(nodes[2].token, text="<script>"))
    step = dataclasses.replace(step, tree=dataclasses.replace(step.tree, nodes=tuple(nodes)))
    fig = step_tree_figure(step)
    texts = [t for trace in fig.data if trace.type == "bar" for t in trace.text]
    hovers = [h for trace in fig.data if trace.type == "bar" for h in trace.hovertext]
    assert any("&lt;script" in t for t in texts) and not any("<script" in t for t in texts)
    assert any("&lt;script&gt;" in h for h in hovers) and not any("<script>" in h for h in hovers)


def test_a_planted_ranking_bug_is_caught_by_the_layout_oracle(monkeypatch):
    step = make_tree_step(0, 12, *RESCUE)
    check_layout(step, step_tree_figure(step))
    original = tree_text.ranked_children
    monkeypatch.setattr("specviz.figures.tree.ranked_children",
                        lambda tree: {key: kids[::-1] for key, kids in original(tree).items()})
    with pytest.raises(AssertionError):
        check_layout(step, step_tree_figure(step))


def test_views_show_the_tree_only_for_a_tree_run():
    tree_trace, chain = make_tree_trace(), make_trace([2, 4])
    assert is_tree_trace(tree_trace) and not is_tree_trace(chain)
    shown = dict(zip(render(tree_trace, "").names(), render(tree_trace, "", selected=1).outputs()))["tree"]
    assert shown["visible"] is True and shown["value"].layout.title.text == "<b>Draft tree, step 1</b>"
    live = render(tree_trace, "", live=True)                       # a live run shows its newest step
    assert live.tree.layout.title.text == "<b>Draft tree, step 2</b>"
    hidden = dict(zip(render(chain, "").names(), render(chain, "").outputs()))["tree"]
    assert hidden["visible"] is False
    assert "No steps yet" in tree_figure(None).layout.annotations[0].text
    large = tree_figure(tree_trace, 0, style=FigureStyle.for_screen(large=True))
    assert large.layout.font.size == 18


def test_kv_chart_and_timeline_describe_tree_steps():
    trace = make_tree_trace()
    kv = kv_cache_figure(trace)
    (after,) = [t for t in kv.data if t.meta == "target.after_cutoff"]
    assert "the gather kept the 1 pending row and the 3 on the accepted path, moved row → row" in after.hovertext[1]
    assert list(after.y) == [step.kv_target.after_cutoff for step in trace.steps]
    assert "gather" in kv.layout.title.subtitle.text
    timeline = timeline_figure(trace)
    assert list(timeline.layout.xaxis.ticktext) == [f"{s.index}<br>({len(s.tree.nodes)})" for s in trace.steps]
    accepted = [t for t in timeline.data if t.meta == "accepted"][0]
    assert len([x for x in accepted.x if x is not None]) == sum(len(s.tree.path) for s in trace.steps)


def test_every_legend_names_a_tree_runs_kinds_after_the_tree():
    """Issue #33 item 1: the timeline legend said 'bonus (target, all accepted)' on a tree step whose path had
    rejected siblings, while the tree figure says 'bonus (target, after a leaf)'. A tree run's timeline, output
    panel and step chips name each kind as the tree figure does; a chain run keeps its own names."""
    trace = make_tree_trace()
    tree_names = {t.meta: t.name for t in step_tree_figure(trace.steps[1]).data if getattr(t, "meta", None)}
    timeline = {t.meta: t.name for t in timeline_figure(trace).data}
    for kind in ("accepted", "rejected", "recovered", "bonus"):
        assert timeline[kind] == tree_names[kind], kind
    bonus_hover = [h for t in timeline_figure(trace).data if t.meta == "bonus" for h in t.hovertext]
    assert bonus_hover and all("all" not in h and "leaf" in h for h in bonus_hover)
    words = output_html(trace) + step_detail_html(trace, 1)
    assert "all accepted" not in words and "bonus (target, after a leaf)" in words
    chain = make_trace([4, 2])
    assert "bonus (target, all accepted)" in {t.name for t in timeline_figure(chain).data}
    assert "bonus (target, all accepted)" in output_html(chain)


def test_a_tree_runs_acceptance_has_its_own_name():
    """Issue #33 item 1: the tree card showed path tokens over nodes drafted as 'acceptance rate r'."""
    html = metrics_html(make_tree_trace())
    assert "data-quantity='acceptance_rate'" not in html
    assert f"data-quantity='node_acceptance'><div class='sv-card-label'>{NODE_ACCEPTANCE.label}</div>" in html
    assert "tree" not in ACCEPTANCE_RATE.tip.split("A tree run")[0]
    assert "data-quantity='acceptance_rate'" in metrics_html(make_trace([2, 4]))


def _controls(**changes):
    values = dict(preset="tiny-random", draft="", target="", drafter="model", prompt="def add(a, b):", k=4,
                  adaptive_k=False, tree_nodes=8, tree_branch=2, temperature=0.0, top_p=1.0, top_k=0,
                  max_new_tokens=16, seed=0, draft_dtype="float32", target_dtype="float32", with_baseline=False,
                  server="")
    values.update(changes)
    return Controls(*(values[name] for name in Controls.names()))


def test_run_controls_ask_for_a_tree_and_refuse_bad_values():
    config = _controls().to_request().config
    assert (config.tree_nodes, config.tree_branch, config.is_tree) == (8, 2, True)
    assert not _controls(tree_nodes=0).to_request().config.is_tree
    for changes, words in (({"tree_nodes": "eight"}, "tree nodes must be a number"),
                           ({"tree_nodes": 2.5}, "tree nodes must be a whole number"),
                           ({"tree_nodes": 500}, "tree nodes must be a whole number from 0"),
                           ({"tree_branch": 0}, "tree branch must be an integer from 1"),
                           ({"drafter": "ngram"}, "a token tree needs the draft model"),
                           ({"adaptive_k": True}, "switch adaptive k")):
        with pytest.raises(ConfigError) as error:
            _controls(**changes).to_request()
        assert words in str(error.value) and "\n" not in str(error.value)


def gather_cells(fig, row: str) -> dict[int, tuple[str, int]]:
    """Node id -> (kind, slot) of the gather panel's cells in one row ('before' or 'after')."""
    found = {}
    for trace in fig.data:
        if trace.type == "bar" and trace.meta.startswith("gather.") and trace.meta.endswith(f".{row}"):
            kind = trace.meta.split(".")[1]
            for slot, text in zip(trace.x, trace.text):
                if kind not in ("cached", "pending"):
                    found[int(text)] = (kind, slot)
    return found


def check_gather(step: StepRecord, fig) -> None:
    """Independent of the figure's code: after the verify forward node i sits at row before + pending + i, drawn
    like its tree cell; after the gather the kept path's nodes sit, in path order, right after the pending rows;
    an arrow runs from each moved row to its new place; the moves the step panel lists are the same rows."""
    cache, tree = step.kv_target, step.tree
    kept = tree.path[:cache.after_cutoff - (cache.after_forward - len(tree.nodes))]
    first = cache.after_forward - len(tree.nodes)                  # the first node's row
    before, after = gather_cells(fig, "before"), gather_cells(fig, "after")
    assert sorted(before) == [node.id for node in tree.nodes]
    assert all(before[node.id][0] == node.verdict for node in tree.nodes)
    slots = {node_id: slot for node_id, (_, slot) in before.items()}
    assert sorted(after) == sorted(kept)
    for place, node_id in enumerate(kept):
        assert after[node_id] == ("accepted", slots[0] + place)    # row first + place
    ticks = dict(zip(fig.layout.xaxis2.tickvals, fig.layout.xaxis2.ticktext))
    assert all(ticks[slots[node.id]] == str(first + node.id) for node in tree.nodes)
    arrows = [(a.ax, a.x) for a in fig.layout.annotations if a.showarrow]
    moved = [(slots[node_id], slots[0] + place) for place, node_id in enumerate(kept) if node_id != place]
    assert sorted(arrows) == sorted(moved)
    assert tree_text.gather_moves(cache, step) == [(node_id, first + node_id, first + place)
                                                   for place, node_id in enumerate(kept)]


@pytest.mark.parametrize("shape", SHAPES, ids=["rescue", "first-choices", "nothing"])
def test_the_gather_is_drawn_row_by_row_from_to(shape):
    step = make_tree_step(3, 40, *shape)
    check_gather(step, step_tree_figure(step))


def test_every_node_carries_its_id_on_the_figure():
    step = make_tree_step(0, 12, *RESCUE)
    tags = {(a.x, a.y): a.text for a in step_tree_figure(step).layout.annotations if a.name == "node id"}
    assert sorted(int(text) for text in tags.values()) == [node.id for node in step.tree.nodes]
    placed = node_cells(step_tree_figure(step))
    for (x, y), text in tags.items():                          # each tag sits on its own node's cell
        depth, row = placed[int(text)]
        assert abs(x - (depth - CELL_WIDTH / 2)) < 1e-9 and abs(y - (row - 0.39)) < 1e-9
    phone = step_tree_figure(step, FigureStyle.for_screen(width=390))   # a phone's cells start with the id instead
    assert not [a for a in phone.layout.annotations if a.name == "node id"]
    assert all(text.startswith(f"{int(h.split('node ')[1].split(',')[0])}<br>") for v in ("accepted", "rejected")
               for _, _, text, h in cells(phone, v))


def test_a_planted_gather_bug_is_caught(monkeypatch):
    """The panel drawn from rows the gather does not keep (each kept node left where the forward wrote it)."""
    step = make_tree_step(0, 12, *RESCUE)
    monkeypatch.setattr("specviz.figures.tree_gather.gather_moves",
                        lambda cache, record: [(n, b, b) for n, b, _ in tree_text.gather_moves(cache, record)])
    with pytest.raises(AssertionError):
        test_the_gather_is_drawn_row_by_row_from_to(RESCUE)
