"""Speculation under load drawn (issue #39 item 2; specviz/figures/load.py, specviz/explore/load_view.py) on
specviz.load/1 documents built here, each passed through the engine's strict reader first, so the tests draw only
what a recorded run can hold. Oracles are the numbers the documents are built from: each level's speeds are
chosen, so the ratio (with ÷ without) and the first N below 1× are known before any code of the view runs."""

from __future__ import annotations

import json
import statistics

import gradio as gr
import pytest

from engine.formats.load_format import LOAD_SCHEMA
from engine.formats.load_reader import parse_load, read_load
from engine.formats.trace import Trace
from engine.vllm.server_info import FIX_NAME
from specviz.assets import ASSETS_DIR
from specviz.explore.load_view import LoadHandlers, about, recorded_load, render_load, request_choices
from specviz.figures.load import (LoadRun, acceptance_figure, acceptance_sentence, crossover_sentence,
                                  model_sentences, ratio_figure, step_cost_figure, throughput_figure)
from specviz.style import FigureStyle
from trace_factory import make_trace

NS = (1, 2, 4, 8, 16)
PROMPTS = ("p0", "p1", "p2", "p3")
# Each prompt's accepted drafts per step (k = 3): its acceptance rate is sum / (3 × steps).
ACCEPTED = ([3, 1, 0, 3], [3, 3, 2, 3], [0, 1, 0, 2], [2, 2, 2, 2])
SPREAD = {"p50": 0.1, "p90": 0.2, "p99": 0.3}


def spec_trace(prompt: int, step_ms: float, accepted: list[int] | None = None) -> dict:
    """A request's trace of the prompt's steps (k = 3): the first 500 ms (the queue and the prefill), every later
    one `step_ms`."""
    trace = make_trace(accepted or ACCEPTED[prompt], k=3).to_dict()
    for step in trace["steps"]:
        step["timing_ms"]["total"] = 500.0 if step["index"] == 0 else step_ms
    return trace


def emitted(trace: dict) -> int:
    return sum(len(step["emitted"]) for step in trace["steps"])


def level(n: int, aggregate: float, request_speeds: list[float], speculative: bool, step_ms: float,
          changed: dict[int, list[int]], foreign: int = 0) -> dict:
    requests = []
    for i in range(n):
        prompt = i % len(PROMPTS)
        trace = spec_trace(prompt, step_ms, changed.get(i)) if speculative else None
        tokens = emitted(spec_trace(prompt, step_ms, changed.get(i)))
        done = tokens / request_speeds[i]
        requests.append({"prompt_index": prompt, "sent_s": 0.0, "first_token_s": done / 2, "done_s": done,
                         "output_tokens": tokens, "trace": trace})
    total = sum(r["output_tokens"] for r in requests)
    drafted = sum(step["k"] for r in requests if r["trace"] for step in r["trace"]["steps"])
    accepted = sum(step["num_accepted"] for r in requests if r["trace"] for step in r["trace"]["steps"])
    counters = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0, "accepted_per_pos": [0, 0, 0]}
    moved = counters | {"num_draft_tokens": drafted + foreign, "num_accepted_tokens": accepted}   # + another's drafts
    return {"concurrency": n, "wall_s": total / aggregate, "output_tokens": total, "aggregate_tokens_per_s": aggregate,
            "latency_s": SPREAD, "first_token_s": SPREAD, "tokens_per_s_per_request": {"p50": 1.0, "mean": 1.0},
            "acceptance": {"drafted": drafted, "accepted": accepted, "rate": accepted / drafted, "tau": 2.0}
            if speculative else None, "counters_before": counters if speculative else None,
            "counters_after": moved if speculative else None, "requests": requests}


def document(spec: list[float], plain: list[float], spec_request: list[list[float]] | None = None,
             plain_request: list[list[float]] | None = None, step_ms: list[float] | None = None,
             changed: dict[int, dict[int, list[int]]] | None = None, temperature: float = 0.0,
             probe: dict | None = None, foreign: dict[int, int] | None = None) -> dict:
    """A load run whose level i made `spec[i]` tokens/s in all with speculation and `plain[i]` without; each
    request's speed (tokens / time from sent to done) as given, else 50 tokens/s; read back by the strict reader."""
    spec_request = spec_request or [[50.0] * n for n in NS]
    plain_request = plain_request or [[50.0] * n for n in NS]
    step_ms = step_ms or [10.0] * len(NS)
    changed = changed or {}
    servers = [{"speculative": speculative, "version": "0.32.0", "model": "target",
                "levels": [level(n, aggregate[i], speeds[i], speculative, step_ms[i], changed.get(n, {}),
                                 (foreign or {}).get(n, 0))
                           for i, n in enumerate(NS)]}
               for speculative, aggregate, speeds in ((True, spec, spec_request), (False, plain, plain_request))]
    if probe is not None:
        servers[1]["forward_probe"] = probe
    return parse_load({"format": LOAD_SCHEMA, "created": "2026-11-28T21:40:00Z", "command": "test", "commit": "",
                       "machine": {"cpu_model": "test CPU", "cores": 2, "load_average": [0.5, 0.5, 0.5]},
                       "pair": {"target": "t", "draft": "d", "method": "draft_model", "k": 3, "dtype": "float32"},
                       "settings": {"temperature": temperature, "max_tokens": 32, "levels": list(NS),
                                    "prompts": list(PROMPTS)},
                       "servers": servers})


def trace_by_meta(figure, meta: str) -> dict:
    found = [trace for trace in figure.to_dict()["data"] if trace.get("meta") == meta]
    assert len(found) == 1, meta
    return found[0]


def subtitle(figure) -> str:
    return figure.layout.title.subtitle.text.replace("<br>", " ")


# With ÷ without: 1.6, 1.3, 1.1, then 0.8 and 0.6: it stops paying from N = 8.
SPEC, PLAIN = [160.0, 260.0, 330.0, 320.0, 300.0], [100.0, 200.0, 300.0, 400.0, 500.0]


def test_ratio_is_with_over_without_and_the_crossover_is_the_first_level_below_one():
    figure = ratio_figure(LoadRun.of(document(SPEC, PLAIN)))
    ratios = trace_by_meta(figure, "ratio.aggregate")["y"]
    assert ratios == pytest.approx([s / p for s, p in zip(SPEC, PLAIN)])
    assert ratios == pytest.approx([1.6, 1.3, 1.1, 0.8, 0.6])
    assert trace_by_meta(figure, "crossover.aggregate")["x"] == [8]
    assert trace_by_meta(figure, "one")["y"] == [1.0, 1.0]
    assert "Whole server: from N = 8 speculation costs more than it buys." in subtitle(figure)
    # Every request ran at 50 tokens/s on both servers: one request's ratio is 1 everywhere, never below.
    assert trace_by_meta(figure, "ratio.per_request")["y"] == pytest.approx([1.0] * 5)
    assert "One request: speculation pays at every load measured (N = 1 to 16)." in subtitle(figure)
    assert not [t for t in figure.to_dict()["data"] if t.get("meta") == "crossover.per_request"]


# The forward probe of a roofline: flat at 100 ms while memory-bound, 10 ms a token past 10 tokens (each size
# timed three times, the median the middle one). k = 3, so every verify N (k + 1) = 4N is one of the sizes.
ROOF = {"sizes": [1, 2, 4, 8, 16, 32, 64],
        "seconds": [[t * 0.9, t, t * 1.5] for t in (max(0.1, 0.01 * m) for m in (1, 2, 4, 8, 16, 32, 64))]}


# Each level's tokens per step after the first (prompt 0: 7 in 3 steps, 1: 11, 2: 6, 3: 9; levels cycle prompts).
TAU = {1: 7 / 3, 2: 18 / 6, 4: 33 / 12, 8: 33 / 12, 16: 33 / 12}


def roofline_ratio(n: int, step_s: float) -> float:
    """The model by hand: τ_N t(N) / (t(4N) + draft(N)), the draft's part calibrated at N = 1 and scaled as one
    forward over 4N tokens and two over N."""
    t = lambda m: max(0.1, 0.01 * m)          # noqa: E731 - the curve the probe was built from
    draft = (step_s - t(4)) * (t(4 * n) + 2 * t(n)) / (t(4) + 2 * t(1))
    return TAU[n] * t(n) / (t(4 * n) + draft)


def test_the_batch_cost_model_predicts_the_roofline_crossover_and_says_where_it_disagrees():
    """N = 1 (prompt 0 alone) measured a 130 ms step: the drafts' part is 30 ms there. By hand: 1.79×, 2.31×,
    1.40×, 0.74×, 0.60×: it stops paying at N = 8, where 8 × 4 = 32 tokens take 3.2× the 8-token forward.
    Measured 1.6, 1.3, 1.1, 0.8, 0.6: off by more than 15 % at N = 2 (78 %) and N = 4 (28 %) only."""
    run = LoadRun.of(document(SPEC, PLAIN, step_ms=[130.0] * len(NS), probe=ROOF))
    expected = [roofline_ratio(n, 0.13) for n in NS]
    assert expected == pytest.approx([1.795, 2.308, 1.403, 0.739, 0.598], abs=1e-3)
    figure = ratio_figure(run)
    assert trace_by_meta(figure, "ratio.model")["y"] == pytest.approx(expected)
    assert trace_by_meta(figure, "crossover.model")["x"] == [8]
    step = trace_by_meta(step_cost_figure(run), "step_ms.model")["y"]
    assert step == pytest.approx([130.0, 130.0, 196.0, 372.0, 736.0])
    assert trace_by_meta(step_cost_figure(run), "plain_ms.model")["y"] == pytest.approx([100, 100, 100, 100, 160])
    words = model_sentences(run)
    assert ("stops paying at N = 8: there the target verifies 8 × (3 + 1) = 32 tokens a step, which the probe timed "
            "at 3.2× its 8-token forward") in words
    assert "crossover N = 8 predicted, N = 8 measured." in words
    assert "disagree by more than 15 % at N = 2 (2.31× predicted, 1.30× measured), N = 4 (1.40× predicted, " \
           "1.10× measured)." in words
    # Without a probe the model is absent, and the page says why.
    bare = LoadRun.of(document(SPEC, PLAIN))
    assert bare.model is None and "No forward probe" in model_sentences(bare)
    assert not [t for t in ratio_figure(bare).to_dict()["data"] if t.get("meta", "").endswith("model")]


def test_per_request_speed_is_the_median_request_from_sent_to_done():
    speeds = [[40.0], [30.0, 90.0], [10.0, 20.0, 30.0, 1000.0], [25.0] * 8, [20.0] * 16]
    run = LoadRun.of(document(SPEC, PLAIN, spec_request=speeds))
    assert [level.per_request[0] for level in run.levels] == pytest.approx([statistics.median(s) for s in speeds])
    figure = throughput_figure(run)
    assert trace_by_meta(figure, "per_request.spec")["y"] == pytest.approx([40.0, 60.0, 25.0, 25.0, 20.0])
    assert trace_by_meta(figure, "aggregate.plain")["y"] == pytest.approx(PLAIN)
    # 40 / 50 = 0.8 at N = 1 already, 60 / 50 above, then 0.5, 0.5, 0.4: below at 1, 4, 8, 16, above at 2.
    assert crossover_sentence(run.levels, "per_request") == (
        "speculation costs more than it buys at N = 1, 4, 8 and 16 but pays at N = 2: no single crossover (the "
        "first N below 1× is 1)")


@pytest.mark.parametrize("spec, words", [   # without speculation: 100, 200, 300, 400, 500 tokens/s
    ([200.0, 400.0, 600.0, 800.0, 1000.0], "speculation pays at every load measured (N = 1 to 16)"),
    ([50.0, 100.0, 150.0, 200.0, 250.0], "speculation costs more than it buys at every load measured (N = 1 to 16)"),
    ([150.0, 150.0, 200.0, 300.0, 400.0], "from N = 2 speculation costs more than it buys"),
    ([150.0, 150.0, 300.0, 500.0, 400.0], "speculation costs more than it buys at N = 2 and 16 but pays at N = 1, 4 "
                                          "and 8: no single crossover (the first N below 1× is 2)"),   # 1× pays
])
def test_crossover_sentence_names_each_shape(spec, words):
    assert crossover_sentence(LoadRun.of(document(spec, PLAIN)).levels, "aggregate") == words


def test_acceptance_unchanged_when_each_prompt_keeps_its_rate_though_the_mix_moves_the_mean():
    run = LoadRun.of(document(SPEC, PLAIN))
    figure = acceptance_figure(run)
    pooled = trace_by_meta(figure, "acceptance")["y"]
    rates = [sum(a) / (3 * len(a)) for a in ACCEPTED]
    assert pooled[0] == pytest.approx(rates[0])                    # N = 1: prompt 1 alone
    assert pooled[2] == pytest.approx(sum(map(sum, ACCEPTED)) / (3 * 16))
    assert pooled[0] != pytest.approx(pooled[2])                    # the mean moves with the mix of prompts ...
    assert "Acceptance did not change with load" in acceptance_sentence(run)   # ... which is not load
    points = trace_by_meta(figure, "requests")
    assert len(points["y"]) == sum(NS)
    assert sorted(set(round(y, 9) for y in points["y"])) == sorted(set(round(r, 9) for r in rates))


def test_acceptance_change_is_said_with_its_size():
    # At N = 16 request 0 (prompt 1: 7 of 12 drafts, 58 %) accepted every draft instead (12 of 12).
    run = LoadRun.of(document(SPEC, PLAIN, changed={16: {0: [3, 3, 3, 3]}}))
    said = acceptance_sentence(run)
    assert said.startswith("Acceptance changed with load for 1 request: the largest, prompt 1 at N = 16, accepted "
                           "100% of its drafts against 58% at N = 1 (42 points).")


def test_step_cost_is_measured_step_time_and_derived_time_per_emitted_token():
    step_ms = [10.0, 12.0, 16.0, 24.0, 40.0]
    run = LoadRun.of(document(SPEC, PLAIN, step_ms=step_ms))
    figure = step_cost_figure(run)
    assert trace_by_meta(figure, "step_ms")["y"] == pytest.approx(step_ms)       # the first (500 ms) step left out
    # Derived: the later steps' time ÷ their tokens; a step emits accepted + 1, over the prompts a level sends.
    for i, n in enumerate(NS):
        prompts = [ACCEPTED[r % 4][1:] for r in range(n)]
        steps = sum(len(a) for a in prompts)
        tokens = sum(x + 1 for a in prompts for x in a)
        assert trace_by_meta(figure, "token_ms")["y"][i] == pytest.approx(step_ms[i] * steps / tokens)
    assert "Measured" in subtitle(figure) and "Derived" in subtitle(figure)


@pytest.mark.parametrize("draw", [throughput_figure, ratio_figure, acceptance_figure, step_cost_figure])
def test_every_point_says_what_it_is_and_carries_its_n_for_the_click(draw):
    figure = draw(LoadRun.of(document(SPEC, PLAIN)))
    for trace in figure.to_dict()["data"]:
        if trace.get("hoverinfo") == "skip":
            continue
        assert "requests at once" in trace["hovertemplate"] or "crossover" in trace["hovertemplate"]
        ns = [row[0] for row in trace["customdata"]]
        assert set(ns) <= set(NS)
        if trace["meta"] != "requests":                     # a request's point is nudged sideways by its prompt
            assert ns == trace["x"]
    assert draw(None).layout.annotations[0].text.startswith("No load run yet")


@pytest.mark.parametrize("large, width", [(False, 1440), (False, 390), (True, 1440)])
def test_phone_and_projector_wrap_and_stack(large, width):
    style = FigureStyle.for_screen(large, width)
    figure = throughput_figure(LoadRun.of(document(SPEC, PLAIN)), style)
    stacked = figure.layout.yaxis.domain[0] > 0
    assert stacked == (width < 700 or large)
    assert figure.layout.title.subtitle.text.startswith("Top" if stacked else "Left")
    chars = style.line_chars(style.font_size)
    assert all(len(line) <= chars for line in figure.layout.title.subtitle.text.split("<br>"))


def test_view_upload_refuses_a_bad_file_in_one_sentence_and_opens_a_request_as_a_trace():
    handlers = LoadHandlers(None, "")
    with pytest.raises(gr.Error) as refused:
        handlers.upload(b'{"format": "specviz.load/1"}', False, None)
    said = str(refused.value.message)
    assert said.startswith("Not a SpecViz load run: ") and ". " not in said          # one sentence
    data = json.dumps(document(SPEC, PLAIN)).encode()
    views = handlers.upload(data, False, 1440)
    uploaded = views[0]
    assert [choice[1] for choice in views[-2]["choices"]] == list(NS)
    assert [index for _, index in request_choices(uploaded, 4)] == [0, 1, 2, 3]
    opened = Trace.from_json(handlers.open_request(uploaded, 4, 2))
    assert opened.to_dict() == uploaded["servers"][0]["levels"][2]["requests"][2]["trace"]
    with pytest.raises(gr.Error):
        handlers.open_request(uploaded, 3, 0)                           # no such level


def test_the_recorded_run_in_assets_reads_and_draws():
    shipped, name = recorded_load(ASSETS_DIR)
    assert shipped is not None and name.startswith("load-")
    assert shipped == read_load(ASSETS_DIR / "loads" / name)
    views = render_load(shipped, "")
    assert trace_by_meta(views.ratio, "ratio.aggregate")["y"] == pytest.approx(
        [a["aggregate_tokens_per_s"] / b["aggregate_tokens_per_s"]
         for a, b in zip(shipped["servers"][0]["levels"], shipped["servers"][1]["levels"])])


def test_the_shipped_vllm_run_is_the_load_sweeps_lone_request():
    """assets/traces/qwen-coder-vllm-greedy.json, the Run tab's recorded vLLM run, is the default pair's N = 1 request
    of the saved sweep exactly (benchmarks/data/load-qwen-coder-2026-11-29.json), as the trace reader reads it."""
    saved = read_load(ASSETS_DIR.parent / "benchmarks" / "data" / "load-qwen-coder-2026-11-29.json")
    request = saved["servers"][0]["levels"][0]["requests"][0]["trace"]
    shipped = Trace.load(ASSETS_DIR / "traces" / "qwen-coder-vllm-greedy.json")
    assert shipped == Trace.from_dict(request) and shipped.config.engine == "vllm 0.32.0"


def test_a_server_that_served_other_requests_meanwhile_is_named_with_its_levels():
    """The oracle: a private server's counters move by exactly the level's own drafts (tests/test_load_vllm.py checks
    that on real servers). Another client's 7 drafted tokens at N = 4 and 16 are said, and only there; the recorded
    default-pair run had the server to itself."""
    from engine.load.stats import other_traffic
    quiet, busy = document(SPEC, PLAIN), document(SPEC, PLAIN, foreign={4: 7, 16: 7})
    assert other_traffic(quiet["servers"][0]["levels"]) == []
    assert other_traffic(busy["servers"][0]["levels"]) == [4, 16]
    assert "served other requests too" not in about(quiet, "a run")
    assert "**The server with speculation served other requests too** at N = 4, 16" in about(busy, "a run")
    saved = read_load(ASSETS_DIR.parent / "benchmarks" / "data" / "load-qwen-coder-2026-11-29.json")
    assert other_traffic(saved["servers"][0]["levels"]) == []


def test_the_page_says_whether_the_server_sampled_with_the_cpu_sampler_fix():
    """At T > 0 vLLM 0.32's CPU speculation as shipped does not sample the target's law (vLLM #55005): a run that
    names its engine says so, or that the fix ran; a greedy run as shipped, or a record without the engine (saved
    before it was kept), says nothing of it."""
    def with_engine(temperature: float, engine: str | None) -> dict:
        run = document(SPEC, PLAIN, temperature=temperature)
        if engine is not None:
            for server in run["servers"]:
                server["engine"] = engine
        return run

    shipped = "does not sample the target's distribution (vLLM issue #55005)"
    assert shipped in about(with_engine(0.7, "vllm 0.32.0"), "a run")
    assert "(vLLM 0.32.0, with SpecViz's CPU sampler fix)" in about(with_engine(0.7, f"vllm 0.32.0 + {FIX_NAME}"),
                                                                     "a run")
    for quiet in (with_engine(0.0, "vllm 0.32.0"), with_engine(0.7, None)):
        assert shipped not in about(quiet, "a run") and "sampler fix" not in about(quiet, "a run")
