"""A vLLM run's steps say what they are (engine/vllm/source.py, `Trace.split`): while the run streams, the
chunk-by-chunk steps are "provisional" guesses; once the server's per-step counts arrive they are replaced
by the split; a run that ends without them (a cut stream, a stop, counts the server left out) keeps its
tokens "unsplit": each alone with its arrival time, no verdicts, never the guess. Over the replayed server
(tests/vllm_replay.py): where a stream is cut is a timing the test must set, which a real server does not.
"""

from __future__ import annotations

import json

import pytest

from engine.config import SpecConfig
from engine.formats.trace import Trace, TraceFormatError
from engine.vllm.server_info import ServerInfo
from engine.vllm.source import VllmGeneration
from engine.vllm.transport import VllmError, parse_address
from vllm_replay import Faults, ReplayServer, load_recording

RECORDING = load_recording()
GREEDY = RECORDING["streams"]["greedy"]
TOKENS = [t for e in GREEDY["events"] if e.get("choices") for t in e["choices"][0]["token_ids"]]


@pytest.fixture
def replay():
    server = ReplayServer(RECORDING)
    yield server
    server.close()


def generation(server: ReplayServer) -> VllmGeneration:
    card = RECORDING["models"]["data"][0]
    info = ServerInfo(parse_address(server.url), card["id"], card["root"], card.get("max_model_len"),
                      RECORDING["version"]["version"], "draft_model", 3, True, "float32")
    body = GREEDY["body"]
    return VllmGeneration(info, "abc", SpecConfig(k=3, max_new_tokens=body["max_tokens"], seed=body["seed"], raw=True))


def check_unsplit(trace: Trace, tokens: list[int]) -> None:
    assert trace.split == "unsplit" and list(trace.output.token_ids) == tokens
    assert all(step.k == 0 and step.num_emitted == 1 and not step.verdicts for step in trace.steps)
    assert trace.summary.mean_accepted_length is None and trace.summary.drafted == 0
    assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict()


def test_live_steps_are_provisional_until_the_counts_replace_them(replay) -> None:
    run = generation(replay)
    run.step()
    live = run.trace()
    assert live.split == "provisional" and not live.complete and json.loads(live.to_json())["split"] == "provisional"
    while not run.is_done:
        run.step()
    done = run.trace()
    assert done.split is None and done.complete and "split" not in json.loads(done.to_json())
    assert [s.num_accepted for s in done.steps if s.k] == list(run.metrics.per_step_accepted)


def test_a_cut_stream_keeps_its_tokens_unsplit(replay) -> None:
    replay.faults = Faults(cut_after=4)
    run = generation(replay)
    with pytest.raises(VllmError, match="ended its stream"):
        while not run.is_done:
            run.step()
    arrived = [t for e in GREEDY["events"][:4] for t in e["choices"][0]["token_ids"]]
    check_unsplit(run.trace(), arrived)
    times = [step.timing.total for step in run.trace().steps]
    assert times.count(0.0) == len(arrived) - 4       # one arrival per chunk: its other tokens came with it


def test_a_server_that_left_out_its_counts_keeps_the_tokens_unsplit(replay) -> None:
    replay.faults = Faults(detailed=False)
    run = generation(replay)
    with pytest.raises(VllmError, match="without its per-step counts"):
        while not run.is_done:
            run.step()
    check_unsplit(run.trace(), TOKENS)


def test_a_stopped_run_keeps_its_tokens_unsplit(replay) -> None:
    run = generation(replay)
    for _ in range(3):
        run.step()
    run.close()
    trace = run.trace()
    check_unsplit(trace, TOKENS[:len(trace.output.token_ids)])
    assert len(trace.output.token_ids) >= 3


def test_the_reader_refuses_verdicts_in_an_unsplit_trace() -> None:
    from vllm_traces import vllm_trace
    document = json.loads(vllm_trace().to_json())
    document["split"] = "unsplit"
    with pytest.raises(TraceFormatError, match="unsplit trace .* every step's k must be 0"):
        Trace.from_dict(document)
    document["split"] = "guessed"
    with pytest.raises(TraceFormatError, match="split"):
        Trace.from_dict(document)


def test_the_run_tab_says_what_the_steps_are(replay) -> None:
    """specviz/run/output_view.py's cards: provisional steps and unsplit tokens are named on screen; split
    steps carry no such words."""
    from specviz.run.output_view import metrics_html
    run = generation(replay)
    run.step()
    assert "Provisional steps" in metrics_html(run.trace())
    while not run.is_done:
        run.step()
    assert "Provisional" not in metrics_html(run.trace()) and "Unsplit" not in metrics_html(run.trace())
    replay.faults = Faults(cut_after=4)
    cut = generation(replay)
    with pytest.raises(VllmError):
        while not cut.is_done:
            cut.step()
    shown = metrics_html(cut.trace())
    assert "Unsplit: vLLM" in shown and "per-step counts never came" in shown
