"""engine/load/batch_model.py and engine/load/forward_probe.py's pure parts: the probe's curve read exactly at its
sizes and linearly between and beyond them; the model's step and ratio by the formula of docs/architecture.md §11
on a curve whose every value is known (the figures' test, tests/test_load_figures.py, draws the same model); the
probe's sizes and prompts. The probe against a real server: tests/test_load_vllm.py."""

from __future__ import annotations

import pytest

from engine.load.batch_model import BatchModel, ForwardCurve, batch_model, why_sentence
from engine.load.forward_probe import probe_prompt, probe_sizes
from engine.vllm.transport import VllmError


def test_the_curve_is_each_sizes_median_and_linear_between_and_beyond():
    curve = ForwardCurve.of({"sizes": [4, 1, 2], "seconds": [[0.4, 0.9, 0.3], [0.1, 0.1, 5.0], [0.2, 0.0, 0.25]]})
    assert curve.sizes == (1, 2, 4) and curve.seconds == (0.1, 0.2, 0.4)
    assert [curve.at(m) for m in (1, 2, 4)] == [0.1, 0.2, 0.4]
    assert curve.at(3) == pytest.approx(0.3) and curve.at(1.5) == pytest.approx(0.15)
    assert curve.at(8) == pytest.approx(0.8)                 # beyond the last: the last two sizes' line
    assert ForwardCurve((1,), (0.5,)).at(100) == 0.5          # one size: flat
    assert ForwardCurve((1, 2), (0.5, 0.1)).at(10) == 0.0      # a falling line never goes below zero


def test_step_and_ratio_follow_the_formula_on_a_known_curve():
    """t(M) = 50 ms + 1 ms a token; k = 4, a measured 80 ms step at N = 2: t(10) = 60 ms, so the drafts took 20 ms
    there, and at N 20 ms × [t(5N) + 3 t(N)] / [t(10) + 3 t(2)]. N = 8 (τ 2.5): verify t(40) = 90 ms, draft
    20 × (90 + 3 × 58) / (60 + 3 × 52), ratio 2.5 × 58 / (90 + that) = 1.07; N = 32 (τ 2.5): 0.64."""
    curve = ForwardCurve(tuple(range(1, 161)), tuple(0.05 + 0.001 * m for m in range(1, 161)))
    model = batch_model(curve, 4, [8, 2, 32], 0.080, {2: 3.0, 8: 2.5, 32: 2.5})
    assert [point.n for point in model.points] == [2, 8, 32] and model.calibrated_n == 2
    two, eight, many = model.points
    assert two.step_s == pytest.approx(0.080) and two.draft_s == pytest.approx(0.020)
    assert two.ratio == pytest.approx(3.0 * 0.052 / 0.080)
    assert eight.verify_tokens == 40 and eight.verify_s == pytest.approx(0.090)
    eight_draft = 0.020 * (0.090 + 3 * 0.058) / (0.060 + 3 * 0.052)
    assert eight.draft_s == pytest.approx(eight_draft)
    assert eight.ratio == pytest.approx(2.5 * 0.058 / (0.090 + eight_draft))
    many_draft = 0.020 * (0.210 + 3 * 0.082) / (0.060 + 3 * 0.052)
    assert many.ratio == pytest.approx(2.5 * 0.082 / (0.210 + many_draft))
    assert many.verify_growth == pytest.approx(0.210 / 0.082)
    assert model.crossover() is many and many.ratio < 1 < eight.ratio
    assert model.at(8) is eight and model.at(3) is None


def test_the_sentence_names_the_crossover_or_says_it_still_pays():
    curve = ForwardCurve((1, 2, 4, 8, 16, 32, 64), (0.1, 0.1, 0.1, 0.1, 0.16, 0.32, 0.64))
    crossing = batch_model(curve, 3, [1, 2, 4, 8], 0.13, dict.fromkeys([1, 2, 4, 8], 7 / 3))
    assert crossing.crossover().n == 8
    assert why_sentence(crossing).startswith("The model predicts speculation stops paying at N = 8: there the target "
                                             "verifies 8 × (3 + 1) = 32 tokens a step, which the probe timed at 3.2×")
    flat = batch_model(ForwardCurve((1, 64), (0.1, 0.1)), 3, [1, 2, 4], 0.12, dict.fromkeys([1, 2, 4], 2.0))
    assert flat.crossover() is None
    assert why_sentence(flat).startswith("The model predicts speculation still pays at N = 4: verifying 4 × (3 + 1) "
                                         "= 16 tokens takes 1.0× the 4-token forward")
    assert isinstance(flat, BatchModel)


def test_a_step_measured_faster_than_its_verify_leaves_the_draft_free_not_negative():
    model = batch_model(ForwardCurve((1, 8), (0.1, 0.3)), 3, [1, 2], 0.05, {1: 2.0, 2: 2.0})
    assert [point.draft_s for point in model.points] == [0.0, 0.0]


def test_probe_sizes_reach_the_largest_verify_and_prompts_have_exactly_that_many_ids():
    assert probe_sizes(1) == [1] and probe_sizes(5) == [1, 2, 4, 8] and probe_sizes(96) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert probe_prompt([7, 8, 9], 7) == [7, 8, 9, 7, 8, 9, 7]
    assert len(probe_prompt([1], 128)) == 128
    with pytest.raises(VllmError, match="at least one prompt token"):
        probe_prompt([], 4)


class AnsweringSession:
    """Isolates the probe from HTTP: answers every completion with `prompt_tokens` (None: the prompt's length)."""

    address = "http://127.0.0.1:1"

    def __init__(self, prompt_tokens: int | None = None):
        self.prompt_tokens, self.bodies = prompt_tokens, []

    def post_json(self, path: str, body: dict) -> dict:
        self.bodies.append(body)
        counted = len(body["prompt"]) if self.prompt_tokens is None else self.prompt_tokens
        return {"choices": [{"text": "x"}], "usage": {"prompt_tokens": counted}}


def test_the_probe_salts_every_request_and_refuses_a_server_that_counts_other_prompt_tokens():
    from engine.load.forward_probe import forward_probe
    from engine.vllm.server_info import ServerInfo
    from engine.vllm.transport import parse_address
    info = ServerInfo(parse_address("http://127.0.0.1:1"), "target", "/models/t", 512, "0.32.0", "none", None, None)
    session = AnsweringSession()
    probe = forward_probe(info, session, [5, 6, 7], [1, 4], repeats=2)
    assert probe["sizes"] == [1, 4] and [len(times) for times in probe["seconds"]] == [2, 2]
    assert [len(body["prompt"]) for body in session.bodies] == [1, 1, 1, 4, 4, 4]
    assert len({body["cache_salt"] for body in session.bodies}) == 6
    assert all(body["max_tokens"] == 1 for body in session.bodies)
    again = AnsweringSession()
    forward_probe(info, again, [5, 6, 7], [1, 4], repeats=2)
    assert not {b["cache_salt"] for b in again.bodies} & {b["cache_salt"] for b in session.bodies}
    with pytest.raises(VllmError, match="counted 3 prompt tokens for the forward probe's 1"):
        forward_probe(info, AnsweringSession(prompt_tokens=3), [5], [1])
    with pytest.raises(VllmError, match="server without speculation"):
        forward_probe(ServerInfo(parse_address("http://127.0.0.1:1"), "target", "/models/t", 512, "0.32.0",
                                 "draft_model", 3, True), AnsweringSession(), [5], [1])
