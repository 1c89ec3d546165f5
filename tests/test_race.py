"""Races (engine/formats/race.py, engine/decode/race_run.py) on the real tiny-random pair: each lane against
its oracle (target-only greedy decoding; the speculative engine's own trace of the same run),
times that only move forward, Stop, a planted bug the oracle catches; and the JSON form, which
reads back exactly and refuses a bad file with its field's path."""

from __future__ import annotations

import json

import pytest

import engine.decode.race_run as race_run
from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.models import load_pair
from engine.formats.race import RACE_SCHEMA, Race, RaceFormatError
from race_factory import make_race

PROMPT = "def fib(n):"
CONFIG = SpecConfig(k=4, max_new_tokens=40, seed=3)


@pytest.fixture(scope="module")
def pair():
    return load_pair("tiny-random", device="cpu")


def finished(updates) -> Race:
    updates = list(updates)
    assert [u.lane for u in updates[:3]] == ["warm-up", "target-only", "speculative"]
    assert updates[-1].lane == "done" and all(u.race is None for u in updates[:-1])
    return updates[-1].race


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_each_lane_is_its_own_decoder_token_for_token(pair, temperature):
    config = CONFIG.replace(temperature=temperature)
    race = finished(race_run.run_race(pair, PROMPT, config))
    reference = SpeculativeEngine(pair)
    trace = reference.generate(PROMPT, config)
    assert race.target_only.token_ids == reference.target_only_ids(list(trace.prompt.token_ids), config)
    assert race.speculative.token_ids == trace.output.token_ids
    assert [[t.kind for t in step.tokens] for step in race.speculative.steps] == \
           [[t.kind for t in step.emitted] for step in trace.steps]
    assert race.speculative.forwards == len(trace.steps) and race.target_only.forwards == len(race.target_only.tokens)
    assert [t.token.text for t in race.target_only.tokens] == [pair.token_text(i) for i in race.target_only.token_ids]
    if temperature == 0.0:
        assert race.identical                       # greedy, float32 target: the same text
    assert race.config.target == pair.target_name and race.config.draft == pair.draft_name
    assert race.warmup_tokens == race_run.WARMUP_TOKENS


def test_lane_times_move_forward_and_end_at_the_lane_wall_time(pair):
    race = finished(race_run.run_race(pair, PROMPT, CONFIG))
    for times, wall in (([t.t_s for t in race.target_only.tokens], race.target_only.wall_s),
                        ([s.t_s for s in race.speculative.steps], race.speculative.wall_s)):
        assert times == sorted(times) and 0 < times[0] and times[-1] <= wall
    assert race.speculative.steps[-1].t_s == race.speculative.wall_s     # the clock stops with the last step
    speedup = (len(race.speculative.token_ids) / race.speculative.wall_s) / (
        len(race.target_only.tokens) / race.target_only.wall_s)
    assert race.speedup == pytest.approx(speedup)


def test_stop_ends_a_race_with_no_race(pair):
    asked = []

    def stop_after(calls: int):
        return lambda: asked.append(1) or len(asked) > calls

    for calls in (0, 1, 5, 30):
        asked.clear()
        updates = list(race_run.run_race(pair, PROMPT, CONFIG, should_stop=stop_after(calls)))
        assert all(u.race is None for u in updates) and updates[-1].lane != "done"


def test_a_planted_bug_in_the_target_only_lane_is_caught(pair, monkeypatch):
    """The oracle is not a tautology: a lane that decodes with the wrong settings fails it."""
    real = race_run.target_only
    monkeypatch.setattr(race_run, "target_only", lambda p, ids, config, *rest: real(
        p, ids, config.replace(temperature=1.0, seed=config.seed + 1), *rest))
    race = finished(race_run.run_race(pair, PROMPT, CONFIG))
    oracle = SpeculativeEngine(pair).target_only_ids(list(pair.encode_prompt(PROMPT)), CONFIG)
    assert race.target_only.token_ids != oracle and not race.identical


def test_a_race_reads_back_exactly(pair):
    race = finished(race_run.run_race(pair, PROMPT, CONFIG.replace(temperature=0.7)))
    again = Race.from_json(race.to_json())
    assert again == race and again.to_dict() == race.to_dict() and race.to_dict()["schema"] == RACE_SCHEMA


def _edited(change) -> bytes:
    document = make_race().to_dict()
    change(document)
    return json.dumps(document).encode()


BAD = [
    (lambda d: d.update(schema="specviz.trace/2"), "schema must be 'specviz.race/1'"),
    (lambda d: d.pop("prompt"), "missing field prompt"),
    (lambda d: d["config"].update(k=0), "config.k: k must be an integer from 1"),
    (lambda d: d["target_only"].update(wall_s=-1), "target_only.wall_s must be a number from 0"),
    (lambda d: d["target_only"]["tokens"][2].update(t_s=0.01), "target_only.tokens[2].t_s is 0.01, earlier than"),
    (lambda d: d["target_only"]["tokens"][0].update(id="seven"), "target_only.tokens[0].id must be a whole number"),
    (lambda d: d["speculative"]["steps"][1]["tokens"][0].update(kind="guessed"),
     "speculative.steps[1].tokens[0].kind must be one of accepted, recovered, bonus"),
    (lambda d: d["speculative"]["steps"][0]["tokens"].reverse(),
     "speculative.steps[0].tokens may hold one recovered or bonus token, after the accepted drafts"),
    (lambda d: d["speculative"]["steps"][0].update(tokens=[]), "speculative.steps[0].tokens must hold at least one"),
    (lambda d: d["speculative"].update(wall_s=0.1), "speculative.steps[4].t_s is 1.5, after the lane's wall_s"),
    (lambda d: d["config"].update(max_new_tokens=5), "target_only.tokens hold 14 tokens, more than config.max_new"),
    (lambda d: d.update(speculative=[]), "speculative must be an object"),
]


@pytest.mark.parametrize("change, message", BAD)
def test_a_bad_race_file_is_refused_with_its_field(change, message):
    with pytest.raises(RaceFormatError) as error:
        Race.from_json(_edited(change))
    assert message in str(error.value)


@pytest.mark.parametrize("text, message", [(b"", "not valid JSON"), (b"[1, 2]", "race must be an object"),
                                           (b'{"schema": "specviz.race/1"', "not valid JSON"),
                                           (b" " * (6 * 1024 * 1024), "over the 5 MiB limit")])
def test_what_is_no_race_at_all_is_refused_in_one_sentence(text, message):
    with pytest.raises(RaceFormatError, match=message):
        Race.from_json(text)
