"""A vLLM server's faults on the page (issue #32, item 4): through the Run tab's handlers and app.py's real
EngineRunner, against a recorded vLLM 0.32 server replayed over real HTTP (tests/vllm_replay.py, each fault
one switch). Each fault is one clear sentence (a gr.Error, no traceback), the trace the page showed before
stays in the session, and a run cut mid-stream keeps the steps that arrived. Then the next run works."""

from __future__ import annotations

import functools
import threading
from typing import Any

import gradio as gr
import pytest

import engine.vllm.source as source
from app import EngineRunner
from control_values import controls, progress
from engine.formats.trace import Trace
from specviz.controls import Controls
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from specviz.serving.runner import VLLM_SERVER
from vllm_replay import Faults, ReplayServer, load_recording

NAMES = Views.names()
RECORDING = load_recording()
GREEDY = RECORDING["streams"]["greedy"]["body"]


class SparesTheProbe(ReplayServer):
    """The replay server with its stream faults on the run's request only: the probes before it (pinned tokens,
    engine/vllm/server_info.py) are answered as recorded, so a cut or a silence hits the run mid-stream."""

    def __post_init__(self) -> None:
        self._local = threading.local()
        super().__post_init__()

    @property                                   # type: ignore[override]
    def faults(self) -> Faults:
        probing = getattr(self._local, "probe", False)
        return Faults() if probing and self._stream_faults_only else self._faults

    @faults.setter
    def faults(self, value: Faults) -> None:
        self._faults = value
        self._stream_faults_only = value.cut_after is not None or value.delay_s > 0

    def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        self._local.probe = "allowed_token_ids" in body      # the probe pins its tokens; a run never does
        return super().events(body)


@pytest.fixture(scope="module")
def replay():
    server = SparesTheProbe(RECORDING)
    yield server
    server.close()


@pytest.fixture
def handlers():
    """A fresh page server each test: a server keeps each finished run for identical requests (docs/architecture.md
    §9), which would answer a test's second, identical request without asking the vLLM server."""
    return Handlers(EngineRunner(device="cpu"), min_interval=0.0)


def fresh(handlers: Handlers) -> Handlers:
    return Handlers(handlers.runner, min_interval=0.0)


def run(handlers: Handlers, shown: Trace | None, url: str) -> list[dict]:
    """Every update of one run on the server at `url` (the recorded greedy request), from a page showing `shown`."""
    values = controls(preset=VLLM_SERVER, server=url, prompt="abc", max_new_tokens=GREEDY["max_tokens"], k=3,
                      seed=GREEDY["seed"])
    return [dict(zip(NAMES, out)) for out in handlers.run(shown, False, None, *values, progress=progress)]


def failed_run(handlers: Handlers, shown: Trace | None, url: str) -> tuple[str, list[dict]]:
    """The one sentence a failing run ends with, and the updates it showed first."""
    updates: list[dict] = []
    with pytest.raises(gr.Error) as caught:
        for update in handlers.run(shown, False, None,
                                   *controls(preset=VLLM_SERVER, server=url, prompt="abc", k=3,
                                             max_new_tokens=GREEDY["max_tokens"], seed=GREEDY["seed"]),
                                   progress=progress):
            updates.append(dict(zip(NAMES, update)))
    message = caught.value.message
    assert "\n" not in message and "Traceback" not in message and message.endswith(".")
    return message, updates


def kept(updates: list[dict], shown: Trace) -> bool:
    """Every update left the session's trace as the page had it."""
    return all(update["trace"] is shown or isinstance(update["trace"], dict) for update in updates)


def test_a_run_streams_from_the_server_and_draws_it(handlers, replay):
    replay.faults = Faults()
    final = run(handlers, None, replay.url)[-1]
    trace = final["trace"]
    assert final["status"].startswith("Done") and trace.config.engine == "vllm 0.32.0" and trace.complete
    accepted = next(e for e in RECORDING["streams"]["greedy"]["events"] if not e.get("choices"))
    assert [s.num_accepted for s in trace.steps[1:]] == accepted["metrics"]["speculative_decoding"]["per_step_accepted"]
    assert "vLLM 0.32.0" in final["metrics"] and "vLLM does not return" in final["detail"]


@pytest.mark.parametrize("faults, sentence", [
    (Faults(speculative=False), "runs without speculative decoding: start it with --speculative-config"),
    (Faults(detailed=False), "does not report each step: start it with --per-request-spec-decode-metrics detailed"),
    (Faults(status=404), "refused /v1/completions (HTTP 404): The model `x` does not exist"),
    (Faults(two_sequences=True), "more than one sequence"),
])
def test_a_server_that_cannot_be_drawn_is_one_sentence_and_the_shown_trace_stays(handlers, replay, faults, sentence):
    replay.faults = Faults()
    shown = run(handlers, None, replay.url)[-1]["trace"]
    replay.faults = faults
    message, updates = failed_run(fresh(handlers), shown, replay.url)
    assert sentence in message
    if faults.two_sequences:           # found mid-stream: whatever arrived is kept, as after a cut
        assert all(update["trace"].steps == () or update["trace"] is not shown for update in updates[-1:])
    else:
        assert kept(updates, shown)
    replay.faults = Faults()
    assert run(fresh(handlers), shown, replay.url)[-1]["status"].startswith("Done")      # and the page goes on


def test_a_server_with_another_model_than_expected_is_one_sentence(handlers, replay):
    replay.faults = Faults(model="other-model")
    values = controls(preset=VLLM_SERVER, server=replay.url, target="target", prompt="abc", k=3,
                      max_new_tokens=GREEDY["max_tokens"], seed=GREEDY["seed"])
    with pytest.raises(gr.Error, match=r"serves 'other-model' \(other-model\), not 'target'"):
        list(handlers.run(None, False, None, *values, progress=progress))
    replay.faults = Faults()
    values[list(Controls.names()).index("target")] = ""                   # expecting any model: it runs
    assert [dict(zip(NAMES, out)) for out in handlers.run(None, False, None, *values, progress=progress)][-1][
        "status"].startswith("Done")


def test_nothing_listening_is_one_sentence(handlers, replay):
    replay.faults = Faults()
    shown = run(handlers, None, replay.url)[-1]["trace"]
    dead = ReplayServer(RECORDING)
    dead.close()
    message, updates = failed_run(handlers, shown, dead.url)
    assert f"No vLLM server answers at {dead.url}" in message and kept(updates, shown)


def test_a_stream_cut_mid_run_keeps_the_steps_that_arrived(handlers, replay):
    replay.faults = Faults(cut_after=4)
    message, updates = failed_run(handlers, None, replay.url)
    assert "ended its stream without finishing the run" in message and message.endswith("kept.")
    assert message.count("kept") == 1
    last = updates[-1]
    assert last["status"].startswith("Stopped by an error after") and not last["trace"].complete
    tokens = [t for e in RECORDING["streams"]["greedy"]["events"][:4] for t in e["choices"][0]["token_ids"]]
    assert list(last["trace"].output.token_ids) == tokens                       # exactly what arrived


def test_a_whole_run_without_its_texts_is_kept_split_with_each_token_as_its_id(handlers, replay):
    """The stream can outrun the server's life: every chunk and the per-step arrays arrive, then /detokenize is
    refused (a killed tiny server did this in CI). Nothing the server said is lost for want of a text."""
    replay.faults = Faults(detokenize_status=503)
    message, updates = failed_run(handlers, None, replay.url)
    tokens = [t for e in RECORDING["streams"]["greedy"]["events"] for c in e.get("choices") or () for t in
              c.get("token_ids") or ()]
    assert message == (f"The vLLM server at {replay.url} sent the whole run, then did not answer /detokenize for "
                       f"{len(tokens)} of its {len(tokens)} tokens: the run is kept, split by its per-step counts, "
                       "with those tokens shown as ⟨id⟩.")
    last = updates[-1]["trace"]
    assert last.complete and last.split is None and list(last.output.token_ids) == tokens
    assert [token.text for step in last.steps for token in step.emitted] == [f"⟨{t}⟩" for t in tokens]
    assert updates[-1]["status"].startswith("Done")
    replay.faults = Faults()
    assert run(fresh(handlers), None, replay.url)[-1]["trace"].complete       # the next run has its texts


def test_a_silent_server_times_out_in_one_sentence(handlers, replay, monkeypatch):
    monkeypatch.setattr(source, "start_generation", functools.partial(source.start_generation, read_timeout_s=0.3))
    replay.faults = Faults(delay_s=0.0)
    shown = run(handlers, None, replay.url)[-1]["trace"]
    replay.faults = Faults(delay_s=0.8)
    message, updates = failed_run(fresh(handlers), shown, replay.url)
    assert "sent nothing for 0.3 s: it is overloaded or stuck" in message
    replay.faults = Faults()
