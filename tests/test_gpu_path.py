"""The GPU path's pieces that run anywhere: the cache kind as a choice (CLI, config, trace), the
device's measured costs and what they predict, where a reduced-precision run first leaves
target-only decoding, and how each is read back strictly and shown on the page.

Oracles: hand-computed costs (break-even acceptance from E(a, k) / (k c + v) = 1), a plain
forward's top-2 logits for the margin, and the trace reader's field paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.cli.main import main
from engine.config import SpecConfig
from engine.loading.cost_probe import measure_costs
from engine.decode.speculative import SpeculativeEngine
from engine.device_costs import NGRAM_COST_RATIO, DeviceCosts
from engine.formats.trace import Trace, TraceFormatError
from engine.loading.tiny import build_tiny_pair
from engine.metrics import NEAR_TIE_LOGITS, expected_speedup
from specviz.serving.load_status import device_costs_text, load_status_text
from specviz.run.output_view import metrics_html
from specviz.serving.runner import LoadStatus

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)

ROOT = Path(__file__).resolve().parent.parent
H200_LIKE = DeviceCosts(device="NVIDIA H200", cache="static", graphs=True, target_token_ms=4.0, draft_token_ms=3.0,
                        verify_ms=((1, 4.4), (2, 4.4), (5, 4.4)), capture_s=0.6)


def test_break_even_is_where_the_best_k_meets_target_only():
    """c = 0.75, v = 1.1 at every k: at the break-even acceptance the best k's speedup is 1, just
    above it more, just below less; with c = 0 (n-gram) the longest k is best, and at its break-even
    a + a² + ... + a⁵ = v − 1 = 0.1 (E(a, 5) = 1.1)."""
    alpha = H200_LIKE.break_even()
    best = max(expected_speedup(alpha, k, 0.75, 1.1) for k in (1, 2, 5))
    assert best == pytest.approx(1.0, abs=1e-6)
    assert H200_LIKE.best(alpha + 0.01)[1] > 1.0 > H200_LIKE.best(alpha - 0.01)[1]
    ngram = H200_LIKE.break_even(NGRAM_COST_RATIO)
    assert sum(ngram ** power for power in range(1, 6)) == pytest.approx(0.1, abs=1e-6)
    expensive = DeviceCosts("gpu", "static", True, 1.0, 2.0, ((1, 1.5),))
    assert expensive.break_even() is None                                            # 2 tokens for 3.5: never


def test_the_costs_round_trip_and_the_page_says_whether_speculation_can_pay():
    assert DeviceCosts.from_dict(H200_LIKE.to_dict()) == H200_LIKE
    text = device_costs_text(H200_LIKE)
    assert "NVIDIA H200" in text and "c = 0.75" in text and "v = 1.10" in text
    assert f"more than {H200_LIKE.break_even():.0%}" in text and "n-gram drafter" in text and "latency" in text
    ready = load_status_text(LoadStatus("qwen-coder", "ready", 1.0, "models ready", 12.0, device_costs=H200_LIKE))
    assert ready.startswith("**qwen-coder is loaded**") and "draft model pays only" in ready
    never = DeviceCosts("gpu", "static", True, 1.0, 2.0, ((1, 1.5),))
    assert "cannot pay here" in device_costs_text(never)


def test_the_probe_measures_every_k_on_either_cache():
    pair = build_tiny_pair(seed=0)
    for cache in ("dynamic", "static"):
        costs = measure_costs(pair, cache)
        assert costs.cache == cache and costs.ks == list(range(1, 9)) and not costs.graphs
        assert costs.target_token_ms > 0 and costs.draft_token_ms > 0
        assert all(ms > 0 for _, ms in costs.verify_ms)


def test_the_probe_times_each_phase_as_a_run_does_it(monkeypatch):
    """The probe's forwards in the order a run makes them: for each k, k chained draft tokens and a verify of
    k + 1 taking turns, then target tokens back to back on warm kernels (timed first, right after a CPU load, they
    came out slower than a verify of 6 tokens) (a verify timed back to back found the
    target's weights in the CPU's caches and ran faster than in a run: 2.1-2.3 ms against 2.42, measured once, no saved run);
    every forward's logits go through the probabilities, as a run's do. Oracle: the enumerated order."""
    from engine.decode.kv import KVCache
    from engine.loading import cost_probe
    pair = build_tiny_pair(seed=0)
    calls, probs = [], []
    forward, to_probs = KVCache.forward, cost_probe.to_probs
    monkeypatch.setattr(KVCache, "forward", lambda kv, ids, num_logits, **kw: calls.append(
        ("draft" if kv.model is pair.draft else "target", len(ids), num_logits)) or forward(kv, ids, num_logits, **kw))
    monkeypatch.setattr(cost_probe, "to_probs", lambda logits, params: probs.append(logits.shape[0] if logits.dim() > 1
                                                                                    else 1) or to_probs(logits, params))
    measure_costs(pair, "dynamic", ks=(2, 5))
    rounds = cost_probe.WARMUPS + cost_probe.REPEATS
    expected = [("target", 64, 1), ("draft", 64, 1)]
    for k in (2, 5):
        expected += ([("draft", 1, 1)] * k + [("target", k + 1, k + 1)]) * rounds
    expected += [("target", 1, 1)] * rounds
    assert calls == expected
    assert probs == [row for k in (2, 5) for row in ([1] * k + [k + 1]) * rounds] + [1] * rounds


def test_a_trace_carries_the_costs_and_the_card_uses_them_for_v():
    pair = build_tiny_pair(seed=0)
    pair.device_costs = H200_LIKE
    trace = SpeculativeEngine(pair).generate("def reverse(xs):", SpecConfig(k=5, max_new_tokens=24))
    assert trace.device_costs == H200_LIKE
    back = Trace.from_json(trace.to_json())
    assert back.device_costs == H200_LIKE and back.to_json() == trace.to_json()
    html = metrics_html(back)
    assert "v = 1.10" in html and "measured on this NVIDIA H200 when the pair loaded" in html


@pytest.mark.parametrize("change, message", [
    (lambda d: d["device_costs"].update(cache="pointer"), "device_costs.cache must be one of static, dynamic"),
    (lambda d: d["device_costs"].update(target_token_ms=0), "device_costs.target_token_ms must be above 0"),
    (lambda d: d["device_costs"]["verify_ms"].update({"40": 1.0}), "device_costs.verify_ms must map"),
    (lambda d: d["device_costs"]["verify_ms"].update({"2": "fast"}), "device_costs.verify_ms.2 must be a number"),
    (lambda d: d["device_costs"].pop("device"), "missing field device_costs.device"),
])
def test_bad_device_costs_are_refused_by_path(change, message):
    pair = build_tiny_pair(seed=0)
    pair.device_costs = H200_LIKE
    data = SpeculativeEngine(pair).generate("abc", SpecConfig(k=2, max_new_tokens=4)).to_dict()
    change(data)
    with pytest.raises(TraceFormatError, match=message):
        Trace.from_dict(json.loads(json.dumps(data)))


TWIN_SHRINK = 1 - 2 ** -5         # the twin's head row: its logit 1/32 below the planted token's (a few bfloat16 steps)


def swap_planted_tie(planted: int, twin: int):
    """A forward hook for the target's output head that stands in for a kernel that rounds a k + 1-row
    verify otherwise than one-token decoding: in any forward of more than one row, each row whose top
    token is `planted`, with `twin` within a near tie of it, gets the two logits swapped. One-token
    decoding (one row) is left alone, and a swap keeps the row's top-2 margin, so the margin oracle reads
    the same value either way."""
    def hook(module, args, logits):
        rows = logits.reshape(-1, logits.shape[-1])
        if rows.shape[0] < 2:
            return logits
        gap = rows[:, planted].float() - rows[:, twin].float()
        swap = (rows.argmax(dim=-1) == planted) & (gap < NEAR_TIE_LOGITS)
        swapped = rows.clone()
        swapped[swap, planted], swapped[swap, twin] = rows[swap, twin], rows[swap, planted]
        return swapped.reshape(logits.shape)
    return hook


def bfloat16_flip():
    """A bfloat16 run of the tiny pair that leaves target-only decoding at a near tie planted in its weights.

    Which near ties a bfloat16 verify swaps depends on the CPU's kernels (a prompt found to flip on one CPU
    decodes identically on another), so the case is built to hold on every CPU: the target's head gets a
    twin of the token it emits fifth (its row 1/32 smaller, so it is a near tie wherever that token leads),
    and a hook swaps the two in verify forwards only, as rounding can. Returns the engine, the trace and
    the planted token."""
    pair = build_tiny_pair(seed=0, dtype=torch.bfloat16)
    engine = SpeculativeEngine(pair)
    config = SpecConfig(k=6, max_new_tokens=24)
    prompt = "SELECT * FROM t WHERE"
    untouched = engine.target_only_ids(pair.tokenizer(prompt)["input_ids"], config)
    planted = untouched[4]
    twin = max(set(range(4, pair.vocab_size)) - set(untouched))          # a character the run never emits
    head = pair.target.lm_head.weight
    with torch.no_grad():
        head[twin] = head[planted] * TWIN_SHRINK
    pair.target.lm_head.register_forward_hook(swap_planted_tie(planted, twin))
    trace = engine.with_baseline(engine.generate(prompt, config))
    assert not trace.summary.baseline.identical
    return engine, trace, planted


def test_a_bfloat16_flip_is_located_with_its_near_tie_margin():
    engine, trace, planted = bfloat16_flip()
    difference = trace.summary.baseline.first_difference
    reference = engine.target_only(trace).token_ids
    assert difference.token <= reference.index(planted)        # the planted tie flips, unless the CPU flipped earlier
    assert trace.output.token_ids[:difference.token] == reference[:difference.token]
    assert trace.output.token_ids[difference.token] != reference[difference.token]
    step = trace.steps[difference.step]
    assert step.context_len - len(trace.prompt.token_ids) <= difference.token < \
           step.context_len - len(trace.prompt.token_ids) + step.num_emitted
    context = list(trace.prompt.token_ids) + list(reference[:difference.token])
    with torch.inference_mode():       # the oracle: the target's own top two, from a plain forward
        logits = engine.pair.target(input_ids=torch.tensor([context])).logits[0, -1].float()
    top = torch.topk(logits, 2).values
    assert difference.margin == pytest.approx(float(top[0] - top[1]), abs=1e-6) and difference.near_tie
    back = Trace.from_json(trace.to_json())
    assert back.summary.baseline.first_difference == difference
    badge = metrics_html(back)
    assert f"It first differs at new token {difference.token + 1}, emitted in step {difference.step}" in badge
    assert "a near tie" in badge and "a float32 target decodes identically" in badge


def test_the_same_run_in_float32_is_identical_and_names_no_difference():
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    trace = engine.with_baseline(engine.generate("SELECT * FROM t WHERE", SpecConfig(k=6, max_new_tokens=24)))
    assert trace.summary.baseline.identical and trace.summary.baseline.first_difference is None


@pytest.mark.parametrize("change, message", [
    (lambda b: b.update(identical=True), "first_difference is given, but summary.baseline.identical is true"),
    (lambda b: b["first_difference"].update(token=999), "points at new token 999"),
    (lambda b: b["first_difference"].update(margin=-1), "first_difference.margin must be a number"),
])
def test_an_inconsistent_first_difference_is_refused(change, message):
    _, trace, _ = bfloat16_flip()
    data = trace.to_dict()
    change(data["summary"]["baseline"])
    with pytest.raises(TraceFormatError, match=message):
        Trace.from_dict(data)


def test_the_cli_runs_either_cache_and_the_trace_says_which(tmp_path, capsys):
    for cache in ("static", "dynamic"):
        out = tmp_path / f"{cache}.json"
        assert main(["run", "--preset", "tiny-random", "--prompt", "Hello", "--max-new-tokens", "12", "--k", "3",
                     "--cache", cache, "--baseline", "--out", str(out)]) == 0
        assert f"{cache} KV cache" in capsys.readouterr().out
        trace = Trace.load(out)
        assert trace.config.cache == cache and trace.summary.baseline.identical
        assert all((step.kv_target.capacity is not None) == (cache == "static") for step in trace.steps)
        assert all(step.timing.engine is not None for step in trace.steps)


def test_a_static_trace_must_record_its_capacity_and_a_dynamic_one_must_not():
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    static = engine.generate("abc", SpecConfig(k=3, max_new_tokens=8, cache="static")).to_dict()
    static["config"]["cache"] = "dynamic"
    with pytest.raises(TraceFormatError, match=r"steps\[0\].kv.target has a capacity, but the run's config.cache"):
        Trace.from_dict(static)
    dynamic = engine.generate("abc", SpecConfig(k=3, max_new_tokens=8, cache="dynamic")).to_dict()
    dynamic["config"]["cache"] = "static"
    with pytest.raises(TraceFormatError, match="lacks a capacity"):
        Trace.from_dict(dynamic)
    older = engine.generate("abc", SpecConfig(k=3, max_new_tokens=8, cache="dynamic")).to_dict()
    del older["config"]["cache"]                                   # a file from before the field: dynamic
    assert Trace.from_dict(older).config.cache == "dynamic"


def test_auto_resolves_by_device():
    from engine.config import resolve_cache, resolve_target_dtype
    assert (resolve_cache("auto", "cuda"), resolve_cache("auto", "cpu"), resolve_cache("static", "cpu")) == \
           ("static", "dynamic", "static")
    assert (resolve_target_dtype("auto", "cuda"), resolve_target_dtype("auto", "cpu")) == ("bfloat16", "float32")


def test_explore_draws_the_model_at_this_servers_costs_and_says_whether_a_k_pays():
    """The recorded sweep's α (the default pair on a CPU) at the H200's measured costs: the line is the
    model E / (k c + v_k) at each k, and the sentence names the best k and its speedup; with a draft
    that costs 0.95 of a target token no k pays, and Explore names the n-gram drafter."""
    from engine.formats.sweep_reader import SweepTable
    from specviz.explore.views import render_sweep
    from specviz.quantities import shown_alpha
    saved = json.loads((ROOT / "docs" / "gpu" / "gpu_check-h200.json").read_text())
    h200 = DeviceCosts.from_dict(saved["costs"]["default"]["graphs"])
    table = SweepTable.load(ROOT / "assets" / "sweeps" / "qwen-coder.json")
    alpha = shown_alpha(table.theory(0.0).alpha)      # the model beside α is worked from α's shown digits (#33)
    views = render_sweep(table, "", 0.0, device_costs=h200)
    line = next(trace for trace in views.theory.data if trace.meta == "model.speedup_this_device")
    assert list(line.y) == pytest.approx([h200.speedup(alpha, k) for k in line.x])
    k, best = h200.best(alpha)
    assert f"k = {k}" in views.about and f"{best:.2f}× target-only" in views.about and "NVIDIA H200" in views.about
    slow = DeviceCosts("NVIDIA H200", "static", True, 4.0, 3.8, h200.verify_ms)
    assert "no k pays" in render_sweep(table, "", 0.0, device_costs=slow).about
    assert "n-gram drafter" in render_sweep(table, "", 0.0, device_costs=slow).about
    plain = render_sweep(table, "", 0.0)
    assert not [trace for trace in plain.theory.data if trace.meta == "model.speedup_this_device"]
    assert "this server" not in plain.about
