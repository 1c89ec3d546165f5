"""A class is load (issue #39 item 4, engine/load/class_point.py): the page's own vLLM runs reduced to a load
sweep's point, checked against hand-worked classes (exact values), the laws every class obeys (1 <= mean at once
<= peak; the aggregate is the tokens over the wall), and the load view's star and words."""

from __future__ import annotations

import random

import pytest

from engine.formats.load_reader import read_load
from engine.load.class_point import ClassLog, ServedRun, class_point, latest_class, peak_concurrency
from engine.load.stats import RequestTimes
from specviz.assets import ASSETS_DIR
from specviz.explore.load_view import LoadHandlers, class_sentence
from specviz.figures.load import LoadRun, throughput_figure

SWEEP = read_load(ASSETS_DIR / "loads" / "load-qwen-coder.json")
SERVER = SWEEP["servers"][0]["address"]


def run(sent: float, done: float, tokens: int, accepted=(1,), drafted=(2,), server: str = SERVER,
        root: str = SWEEP["pair"]["target"], k: int = 5) -> ServedRun:
    return ServedRun(server, "target", root, k, RequestTimes(0, sent, sent + 0.1, done, tokens), tuple(accepted),
                     tuple(drafted))


def test_peak_counts_runs_open_at_one_instant_and_a_run_done_as_another_is_sent_is_not_beside_it():
    assert peak_concurrency([run(0, 2, 1).times, run(1, 3, 1).times, run(2, 4, 1).times]) == 2
    assert peak_concurrency([run(0, 4, 1).times, run(1, 2, 1).times, run(1.5, 3, 1).times]) == 3
    assert peak_concurrency([run(0, 1, 1).times]) == 1


def test_the_latest_class_is_the_last_group_of_overlapping_runs():
    early = [run(0, 2, 5), run(1, 3, 5)]
    late = [run(5, 6, 10), run(5.5, 7, 30)]
    assert latest_class(late[::-1] + early) == late
    assert latest_class([run(0, 2, 5), run(2, 3, 5)]) == [run(2, 3, 5)]      # touching is not overlapping


def test_a_hand_worked_class():
    point = class_point([run(0, 2, 5), run(1, 3, 5), run(5, 6, 10, (3, 1), (4, 4)), run(5.5, 7, 30, (0,), (4,))])
    assert (point.runs, point.peak_concurrency, point.output_tokens) == (2, 2, 40)
    assert point.wall_s == 2.0 and point.aggregate_tokens_per_s == 20.0
    assert point.mean_concurrency == (1.0 + 1.5) / 2.0         # the runs' summed time over the wall
    assert point.per_request_tokens_per_s == 15.0               # median of 10 / 1 and 30 / 1.5
    assert point.acceptance_rate == 4 / 12


def test_the_class_is_on_the_server_used_last():
    point = class_point([run(0, 9, 5, server="http://other:8000"), run(1, 3, 7), run(2, 4, 9)])
    assert point.server == "http://other:8000" and point.runs == 1


def test_every_class_obeys_the_laws():
    rng = random.Random(7)
    for _ in range(300):
        runs = []
        for _ in range(rng.randint(1, 12)):
            sent = rng.uniform(0, 10)
            runs.append(run(sent, sent + rng.uniform(0.2, 5), rng.randint(1, 64)))
        point = class_point(runs)
        group = latest_class(runs)
        assert 1.0 - 1e-9 <= point.mean_concurrency <= point.peak_concurrency + 1e-9 <= len(group) + 1e-9
        assert point.output_tokens == sum(r.times.output_tokens for r in group)
        assert point.aggregate_tokens_per_s == pytest.approx(point.output_tokens / point.wall_s)
        speeds = sorted(r.times.output_tokens / r.times.latency_s for r in group)
        assert speeds[0] <= point.per_request_tokens_per_s <= speeds[-1]


def test_the_log_keeps_the_latest_runs_and_is_empty_at_first():
    log = ClassLog(kept=2)
    assert log.point() is None
    for i in range(3):
        log.record(run(i * 10, i * 10 + 1, i + 1))
    assert [r.times.output_tokens for r in log.runs()] == [2, 3]


def test_the_star_sits_at_the_class_mean_on_both_panels_of_the_throughput_chart():
    point = class_point([run(0, 2, 40), run(0.5, 2.5, 40), run(1, 3, 40)])
    figure = throughput_figure(LoadRun.of(SWEEP), point=point)
    stars = {trace.meta: trace for trace in figure.data if str(trace.meta).startswith("class.")}
    assert stars["class.aggregate"].x == (point.mean_concurrency,) == stars["class.per_request"].x
    assert stars["class.aggregate"].y == (point.aggregate_tokens_per_s,)
    assert stars["class.per_request"].y == (point.per_request_tokens_per_s,)
    assert stars["class.aggregate"].xaxis == "x" and stars["class.per_request"].xaxis == "x2"
    assert not any(str(trace.meta).startswith("class.") for trace in throughput_figure(LoadRun.of(SWEEP)).data)


def test_the_words_say_whether_the_class_ran_where_the_sweep_did():
    same = class_point([run(0, 2, 40)])
    assert "same server as this sweep" in class_sentence(same, SWEEP)
    moved = class_point([run(0, 2, 40, server="http://10.0.0.5:8000")])
    assert "another server than this sweep, with the same target and k" in class_sentence(moved, SWEEP)
    other = class_point([run(0, 2, 40, server="http://10.0.0.5:8000", root="/models/llama", k=3)])
    assert "another pair than this sweep" in class_sentence(other, SWEEP)
    assert "no run on this app has streamed from a vLLM server yet" in class_sentence(None, SWEEP)
    words = class_sentence(class_point([run(0, 2, 40), run(1, 3, 20)]), SWEEP)
    assert "the latest 2 runs" in words and "1.3 streaming at once on average" in words and "at most 2" in words


def test_the_button_draws_the_logged_class_and_keeps_it_for_redraws():
    log = ClassLog()
    handlers = LoadHandlers(SWEEP, "load-qwen-coder.json", log)
    point, words, figure = handlers.show_class(None, False, None)
    assert point is None and "no run" in words
    log.record(run(0, 2, 40))
    point, words, figure = handlers.show_class(None, False, None)
    assert point.runs == 1 and any(trace.meta == "class.aggregate" for trace in figure.data)
    ratio, throughput, *_ = handlers.restyle(None, "", True, 390, point)
    assert any(trace.meta == "class.aggregate" for trace in throughput.data)
