"""The guided tour's chapters (specviz/tour/, issue #33): nine of them over the recorded runs, each at most three
sentences and one question, and every number they say read from the recording the page shows.

Three oracles: no template types a number (each comes from the chapter's facts; a planted typed number is caught
below); each chapter's facts recomputed from the trace, sweep or race by the laws they state (the greedy rule, the
cache arithmetic, min(1, p/q), min(p, q) + (1 − Σ min) × residual = p, the gather's row count, the race's
forwards); and the Run tab's step detail at the chapter's step shows the numbers the chapter quotes. A tour built
over another trace quotes that trace's numbers.
"""

from __future__ import annotations

import re
from html import unescape

import pytest

from engine.formats.sweep_reader import SweepTable
from engine.formats.trace import Trace
from specviz.assets import ASSETS_DIR, load_demo_trace, load_lab_traces, load_recorded_race, load_recorded_sweep
from specviz.figures.tree_text import gather_moves
from specviz.lab.views import KEYS, recorded_lab
from specviz.run.step_detail import find_step, step_detail_html
from specviz.tokens import visible
from specviz.tour.chapter import Chapter, View
from specviz.tour.chapters import build_tour
from specviz.tour.run_chapters import caches_and_cut, greedy_step, sampled_step
from specviz.tour.sources import TourSources, tour_sources
from specviz.tour.view import tour_html
from trace_factory import make_trace

TITLES = ("One greedy step", "The bonus token and the carryover", "Two caches and the cut",
          "A sampled step: min(1, p/q) and the draw", "The residual, and why the sum is p",
          "The Lab: four stages of the engine", "Explore: the fastest k and the gap to the model",
          "A token tree and its gather", "The race")
# Formulas whose digits are part of the notation, not quoted numbers.
FORMULAS = ("min(1, p/q)", "max(0, p − q)", "1 − Σ min")


@pytest.fixture(scope="module")
def sources() -> TourSources:
    race, _ = load_recorded_race(ASSETS_DIR)
    return tour_sources(load_demo_trace(ASSETS_DIR), recorded_lab(load_lab_traces(KEYS)),
                        load_recorded_sweep(ASSETS_DIR).table, race)


@pytest.fixture(scope="module")
def tour(sources) -> dict[str, Chapter]:
    return {chapter.title: chapter for chapter in build_tour(sources)}


def typed_numbers(chapter: Chapter) -> list[str]:
    """Digits a chapter's templates type in themselves (outside its facts and the formulas' notation)."""
    found = []
    for template in (chapter.title, chapter.text, chapter.question, chapter.answer):
        bare = re.sub(r"\{[a-z_]+\}", "", template)
        for formula in FORMULAS:
            bare = bare.replace(formula, "")
        found += re.findall(r"\d+(?:\.\d+)?", bare)
    return found


def number(text: str) -> float:
    return float(text.replace("\u2212", "-"))


def test_nine_chapters_in_order_each_short_with_one_question(tour):
    assert tuple(tour) == TITLES
    for chapter in tour.values():
        text, question, answer = chapter.words
        sentences = re.findall(r"[.!?](?:\s|$)", text)
        assert 1 <= len(sentences) <= 3, f"{chapter.title}: {len(sentences)} sentences"
        assert question.endswith("?") and question.count("?") == 1, chapter.title
        assert answer and "{" not in text + question + answer, chapter.title
    html = tour_html(tuple(tour.values()))
    assert html.count("<section class='sv-tour-chapter'") == 9 and html.count("<option") == 9


def test_a_chapter_speaks_first_of_the_step_it_shows(tour):
    """A chapter that sets the Run tab's or the Lab's step names that step before any other (issue 41: chapter 2
    spoke of step 1 while the page showed step 2)."""
    for chapter in tour.values():
        shown = chapter.view.step if chapter.view.step is not None else chapter.view.lab_step
        named = re.findall(r"\b[Ss]tep (\d+)", chapter.words[0])
        if shown is not None and named:
            assert named[0] == str(shown), f"{chapter.title}: the text speaks of step {named[0]}, the page shows {shown}"


def test_no_chapter_types_a_number(tour):
    assert {title: typed_numbers(chapter) for title, chapter in tour.items() if typed_numbers(chapter)} == {}


def test_a_typed_number_is_caught(tour):
    """The planted bug: a chapter that says a number of its own instead of reading it from the trace."""
    honest = tour["One greedy step"]
    planted = Chapter(honest.title, honest.view, honest.text.replace("{accepted}", "4"), honest.question,
                      honest.answer, honest.facts)
    assert planted.words[0] == honest.words[0]          # right today, on this trace: still a typed number
    assert typed_numbers(planted) == ["4"]


def _step(trace: Trace, facts: dict[str, str], key: str = "step"):
    return find_step(trace, int(facts[key]))


def test_run_chapters_read_their_step(sources, tour):
    greedy, sampled = sources.greedy, sources.sampled
    one = tour["One greedy step"]
    step = _step(greedy, one.facts)
    assert one.view == View("run", one.view.outline, recorded=sources.greedy_name, step=step.index,
                            focus=one.view.focus, focus_end=one.view.focus_end)
    miss = next(i for i, (d, t) in enumerate(zip(step.draft, step.target)) if d.id != t.id)   # the greedy rule
    assert one.facts["position"] == str(miss + 1) and one.facts["accepted"] == str(miss)
    assert one.facts["target"] == f"\u201c{visible(step.target[miss].text)}\u201d"
    assert step.target[miss].id == step.target[miss].top[0].id                  # the target's argmax replaces it
    assert one.facts["emitted"] == str(miss + 1) == str(len(step.emitted))

    two = tour["The bonus token and the carryover"]
    step, after = _step(greedy, two.facts), _step(greedy, two.facts, "next")
    assert after.index == two.view.step and greedy.steps.index(after) == greedy.steps.index(step) + 1
    assert all(v == "accepted" for v in step.verdicts) and step.emitted[-1].kind == "bonus"
    assert [t.id for t in after.carryover] == [step.draft[-1].id, step.emitted[-1].id]     # d_k, then the bonus
    assert two.facts["emitted"] == str(step.k + 1)

    three = tour["Two caches and the cut"]
    step = _step(greedy, three.facts)
    previous = greedy.steps[greedy.steps.index(step) - 1]
    cut = step.k - step.num_accepted
    assert int(three.facts["cut"]) == cut and int(three.facts["draft_cut"]) == max(0, cut - 1)
    assert int(three.facts["before"]) == previous.kv_target.after_cutoff
    assert int(three.facts["after"]) == int(three.facts["forward"]) - cut

    four = tour["A sampled step: min(1, p/q) and the draw"]
    step = _step(sampled, four.facts)
    at = int(four.facts["position"]) - 1
    assert step.verdicts[at] == "rejected" and step.verdicts[at - 1] == "accepted"
    p, q = number(four.facts["p"]), number(four.facts["q"])
    assert number(four.facts["ratio"]) == pytest.approx(min(1, step.target[at].p / step.draft[at].q), abs=5e-4)
    assert number(four.facts["ratio"]) == pytest.approx(min(1, p / q), abs=3e-3)
    assert number(four.facts["draw"]) >= number(four.facts["ratio"])
    assert number(four.facts["before_draw"]) < number(four.facts["before_ratio"])

    five = tour["The residual, and why the sum is p"]
    assert five.view.step == four.view.step and five.facts["position"] == four.facts["position"]
    total = number(five.facts["part"]) + number(five.facts["rest"]) * number(five.facts["residual"])
    assert number(five.facts["total"]) == pytest.approx(total, abs=2e-3)
    assert number(five.facts["total"]) == pytest.approx(number(five.facts["p"]), abs=3e-3)   # the law: the sum is p
    assert five.facts["token"] == f"\u201c{visible(step.target[at].text)}\u201d"


def test_run_chapters_quote_what_the_step_shows(sources, tour):
    """Every number of the cache, sampled and residual chapters is in the step detail the page shows there."""
    for title, trace in (("Two caches and the cut", sources.greedy),
                         ("A sampled step: min(1, p/q) and the draw", sources.sampled),
                         ("The residual, and why the sum is p", sources.sampled)):
        chapter = tour[title]
        shown = unescape(step_detail_html(trace, chapter.view.step))
        for name, value in chapter.facts.items():
            if re.fullmatch(r"\d+(\.\d+)?", value) and name not in ("step", "position", "before", "temperature"):
                assert value in shown, f"{title}: {name} = {value} is not in step {chapter.view.step}'s detail"


def test_tab_chapters_read_their_recordings(sources, tour):
    lab = sources.lab
    six = tour["The Lab: four stages of the engine"]
    reference = lab.reference.output.token_ids
    for key in ("A", "B", "C"):
        emitted = [(step.index, token.id) for step in lab.traces[key].steps for token in step.emitted]
        first = next(index for position, (index, token) in enumerate(emitted)
                     if position >= len(reference) or token != reference[position])
        assert six.facts[key.lower()] == str(first), key
    assert six.view.lab_stage == "A" and six.view.lab_step == int(six.facts["a"])
    from engine.lab import LAB_STAGES                       # the chapter says stage A in the Lab's own words
    said = next(stage.explanation for stage in LAB_STAGES if stage.key == "A")
    assert six.facts["a_keeps"][0].upper() + six.facts["a_keeps"][1:] in said and six.facts["a_keeps"] in six.words[0]

    seven = tour["Explore: the fastest k and the gap to the model"]
    table = sources.sweep
    temperature = float(seven.facts["temperature"])
    best = max(table.at(temperature), key=lambda cell: cell.speedup)
    assert seven.facts["k"] == str(best.k) and seven.facts["measured"] == f"{best.speedup:.2f}"
    assert seven.facts["tau"] == f"{best.mean_accepted_length:.2f}"
    shares = sum(number(seven.facts[name]) for name in ("acceptance", "outside", "baseline_prefill"))
    assert shares == pytest.approx(number(seven.facts["model"]) - best.speedup, abs=0.02)
    assert shares == pytest.approx(number(seven.facts["gap"]), abs=0.02)

    eight = tour["A token tree and its gather"]
    tree_trace = lab.traces["T"]
    step = _step(tree_trace, eight.facts)
    kept = len(step.tree.path)
    assert eight.facts["kept"] == str(kept) and eight.facts["nodes"] == str(len(step.tree.nodes))
    assert int(eight.facts["cut"]) == len(step.tree.nodes) - kept
    assert int(eight.facts["after"]) == int(eight.facts["before"]) + int(eight.facts["pending"]) + kept
    assert int(eight.facts["pending"]) == step.context_len - step.kv_target.before      # committed, not yet fed
    assert eight.facts["budget"] == str(tree_trace.config.tree_nodes)
    moves = gather_moves(step.kv_target, step)                   # where the engine's gather puts the kept rows
    assert int(eight.facts["first"]) == min(after for _, _, after in moves) == step.kv_target.before + int(
        eight.facts["pending"])
    pending = int(eight.facts["pending"])
    assert ("right after the pending row " if pending == 1 else f"right after the {pending} pending rows ") \
        in eight.words[0]                                        # the chart's words: after the pending row(s)

    nine = tour["The race"]
    race = sources.race
    assert nine.facts["fast_forwards"] == str(len(race.speculative.steps))
    assert nine.facts["slow_forwards"] == str(len(race.target_only.tokens))
    count = sum(len(step.tokens) for step in race.speculative.steps)
    speed = (count / race.speculative.wall_s) / (len(race.target_only.tokens) / race.target_only.wall_s)
    assert nine.facts["speedup"] == f"{speed:.2f}" and nine.facts["per"] == f"{count / len(race.speculative.steps):.1f}"


def test_the_tour_follows_the_trace_it_is_given():
    """Built over other recordings, the chapters quote those recordings' numbers, not the bundled ones'."""
    greedy = make_trace([4, 2, 0, 4, 3, 1, 4, 4, 2, 0])
    one, three = greedy_step(greedy, "g.json"), caches_and_cut(greedy, "g.json")
    step = find_step(greedy, one.view.step)
    assert one.facts["accepted"] == str(step.num_accepted) == "2" and one.facts["k"] == "4"
    step = find_step(greedy, three.view.step)
    assert three.facts["forward"] == str(step.kv_target.after_forward)
    sampled = make_trace([4, 2, 0, 4, 3, 1, 4, 4, 2, 0], sampling=True)
    four = sampled_step(sampled, "s.json")
    step = find_step(sampled, four.view.step)
    at = int(four.facts["position"]) - 1
    assert four.facts["draw"] == f"{step.draws[at]:.3f}" and four.facts["temperature"] == f"{sampled.config.temperature:g}"
    missing = build_tour(TourSources(greedy=greedy))
    assert [c.title for c in missing] == list(TITLES[:3])      # no sampled run, lab, sweep or race: left out


def test_each_tab_says_it_shows_the_recording_the_tour_reads(tour):
    """The words a chapter looks for (View.shows) are on the page as built: a tab that changes them, or shows a
    run of the student's own, makes the tour say its numbers are the recording's."""
    from fakes import FakeRunner
    from specviz.layout import build_demo
    demo = build_demo(FakeRunner())
    values = {block.elem_id: str(getattr(block, "value", "")) for block in demo.blocks.values()
              if getattr(block, "elem_id", None)}
    for chapter in tour.values():                       # each outlined element is on the page, by its id
        assert chapter.view.outline.split()[0].lstrip("#") in values, chapter.view.outline
    checked = [chapter.view.shows for chapter in tour.values() if chapter.view.shows]
    assert len(checked) == 4
    for selector, words in checked:
        assert words in values[selector.lstrip("#")], (selector, words)


@pytest.mark.parametrize("case", ["ngram", "tree", "no steps", "all accepted", "sampled only", "html"])
def test_any_page_builds_its_tour(case):
    """Whatever recordings a page is built with (tests and uploads use others), the tour builds: the chapters
    whose idea the recording shows, each still free of typed numbers, the rest left out."""
    from race_factory import make_race
    from sweep_factory import make_sweep
    from trace_factory import html_trace, trace_from_steps
    from tree_factory import make_tree_trace
    traces = {"ngram": make_trace([2, 0, 4], ngram=True), "tree": make_tree_trace(),
              "no steps": trace_from_steps([]), "all accepted": make_trace([4, 4, 4]),
              "sampled only": make_trace([4, 1, 0, 4], sampling=True), "html": html_trace()}
    trace = traces[case]
    sources = TourSources(greedy=trace if trace.config.is_greedy else None,
                          sampled=None if trace.config.is_greedy else trace,
                          sweep=SweepTable.from_dict(make_sweep()), race=make_race())
    chapters = build_tour(sources)
    assert all(not typed_numbers(chapter) and all(chapter.words) for chapter in chapters)
    assert tour_html(chapters).count("<section") == len(chapters)
