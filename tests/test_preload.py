"""The default pair loads in the background as the server starts (app.py `EngineRunner.preload`):
a Run pressed meanwhile waits on that same load and sees its progress (never a second load), the
page keeps serving, a failed load says why and the next Run retries, and the compute thread is
free again afterwards. The loader is the real tiny-random one behind a gate (threading events),
so every test waits for states, never for time."""

from __future__ import annotations

import threading

import httpx
import pytest

import engine
from app import EngineRunner
from engine.config import SpecConfig
from engine.presets import ModelLoadError
from fakes import FakeRunner
from specviz.serving.load_status import load_status_text
from specviz.serving.runner import LoadStatus, ModelChoice, RunRequest
from ui_server import serve

TINY = ModelChoice(preset="tiny-random")
GATE_MESSAGE = "converting tiny.gguf to safetensors (first load only: a minute or two)"


class GatedLoader:
    """engine.load_pair that reports a conversion, then holds until `release` is set, then loads for real
    (or fails with `fail` once)."""

    def __init__(self, fail: str = ""):
        self.real, self.calls, self.fail = engine.load_pair, [], fail
        self.entered, self.release = threading.Event(), threading.Event()

    def __call__(self, *args, **kwargs):
        self.calls.append(kwargs)
        kwargs["progress"](0.3, GATE_MESSAGE)
        self.entered.set()
        self.release.wait()
        if self.fail:
            message, self.fail = self.fail, ""
            raise ModelLoadError(message)
        return self.real(*args, **kwargs)


class Messages:
    """A progress callback that remembers its messages and signals when one contains `awaited`."""

    def __init__(self, awaited: str):
        self.seen, self.awaited, self.arrived = [], awaited, threading.Event()

    def __call__(self, fraction: float, message: str) -> None:
        self.seen.append(message)
        if self.awaited in message:
            self.arrived.set()


def request(models: ModelChoice = TINY, prompt: str = "def f(x):") -> RunRequest:
    return RunRequest(models, prompt, SpecConfig(max_new_tokens=8))


@pytest.fixture
def gated(monkeypatch):
    loader = GatedLoader()
    monkeypatch.setattr(engine, "load_pair", loader)
    yield loader
    loader.release.set()                   # never leave the compute thread held


def test_a_run_pressed_while_the_pair_loads_waits_for_that_load_and_sees_its_progress(gated):
    runner = EngineRunner(device="cpu")
    loading = runner.preload(TINY)
    assert gated.entered.wait(60)
    status = runner.load_status()
    assert status.loading and status.message == GATE_MESSAGE and status.converted and status.label == "tiny-random"
    text = load_status_text(status)
    assert "Loading tiny-random in the background" in text and GATE_MESSAGE in text and "converts the GGUF" in text
    messages, started = Messages(GATE_MESSAGE), {}
    run = threading.Thread(target=lambda: started.setdefault("generation", runner.start(request(), messages)))
    run.start()
    assert messages.arrived.wait(60)       # the waiting Run shows the load's own progress ...
    assert run.is_alive() and "generation" not in started     # ... and has not started without the pair
    gated.release.set()
    run.join(60)
    loading.join(60)
    assert len(gated.calls) == 1           # one load, shared by the preload and the Run
    generation = started["generation"]
    assert generation.pair is runner.compute.run(runner._pair, TINY, lambda f, m: None)
    while not generation.is_done:
        generation.step()
    assert generation.trace().complete
    status = runner.load_status()
    assert status.state == "ready" and not status.loading and status.fraction == 1.0
    assert "tiny-random is loaded" in load_status_text(status) and "one-time conversion" in load_status_text(status)


def test_a_run_of_another_pair_says_what_it_waits_for(gated):
    runner = EngineRunner(device="cpu")
    runner.preload(ModelChoice(preset="smollm2-ngram"))
    assert gated.entered.wait(60)
    messages = Messages("waiting for smollm2-ngram to finish loading")
    run = threading.Thread(target=lambda: runner.start(request(), messages))
    run.start()
    assert messages.arrived.wait(60)
    gated.release.set()
    run.join(60)
    assert [call.get("preset") for call in gated.calls] == ["smollm2-ngram", "tiny-random"]


def test_a_failed_background_load_says_why_and_the_next_run_retries(monkeypatch):
    loader = GatedLoader(fail="the weights file is damaged")
    monkeypatch.setattr(engine, "load_pair", loader)
    loader.release.set()
    runner = EngineRunner(device="cpu")
    runner.preload(TINY).join(60)
    status = runner.load_status()
    assert status.state == "failed" and status.message == "the weights file is damaged"
    assert load_status_text(status) == ("**Loading tiny-random in the background failed**: the weights file is "
                                        "damaged. Press Run to try again (it shows the load's progress).")
    assert runner.compute.run(lambda: "free") == "free"     # the compute thread was released
    generation = runner.start(request(), lambda f, m: None)
    assert len(loader.calls) == 2 and not generation.is_done   # the retry loaded the pair


def test_the_page_serves_while_the_pair_loads_and_shows_the_status_line(gated):
    runner = EngineRunner(device="cpu")
    runner.preload(TINY)
    assert gated.entered.wait(60)
    demo, url = serve(runner)
    try:
        page = httpx.get(url, timeout=60)
        assert page.status_code == 200 and "sv-load-status" in page.text
        assert runner.load_status().loading                 # the page came up while the load is held
    finally:
        gated.release.set()
        demo.close()


def test_no_background_load_no_status_line():
    assert load_status_text(None) == ""
    assert FakeRunner().load_status() is None
    ready = LoadStatus("qwen-coder", "ready", 1.0, "models ready", 8.4, converted=False)
    assert load_status_text(ready) == "**qwen-coder is loaded** (8 s): Run starts at once."
