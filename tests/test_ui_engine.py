"""The UI on the real engine: app.EngineRunner with the built-in tiny-random pair (no files, seconds)."""

from __future__ import annotations

import json
import re

import pytest
from gradio_client import Client

from app import EngineRunner
from engine.config import SpecConfig
from specviz.serving.runner import ModelChoice, RunnerError, RunRequest
from specviz.run.views import Views
from ui_server import serve

NAMES = [name for name in Views.names() if name != "trace"]
TINY = ModelChoice(preset="tiny-random")


@pytest.fixture(scope="module")
def runner():
    return EngineRunner(device="cpu")


def test_presets_come_from_the_engine(runner):
    names = [preset.name for preset in runner.presets()]
    assert "tiny-random" in names and runner.default_preset in names
    assert EngineRunner(default_preset="tiny-random").default_preset == "tiny-random"


def test_runner_loads_once_reports_progress_and_steps_the_engine(runner):
    messages = []
    request = RunRequest(TINY, "def fib(n):", SpecConfig(k=4, max_new_tokens=24))
    generation = runner.start(request, lambda fraction, message: messages.append((fraction, message)))
    assert messages and all(0.0 <= fraction <= 1.0 for fraction, _ in messages)
    first = generation.step()
    assert first.index == 0 and not generation.trace().complete
    while not generation.is_done:
        generation.step()
    trace = generation.trace()
    assert trace.complete and trace.summary.new_tokens == 24 and trace.config.target
    compared = runner.with_baseline(request, trace)
    assert compared.baseline is not None and compared.baseline.identical and compared.baseline.exact_expected
    again = []
    runner.start(request, lambda fraction, message: again.append(message))
    assert again[-1] == "models ready" and not any("tiny" in m for m in again)   # cached: no second load


def test_runner_turns_load_and_input_errors_into_clear_messages(runner):
    with pytest.raises(RunnerError, match="nope/missing"):
        runner.start(RunRequest(ModelChoice(draft="nope/missing", target="nope/missing"), "x", SpecConfig()),
                     lambda fraction, message: None)
    with pytest.raises(ValueError, match="exceeds the target tiny-random/target's context of 1024 tokens"):
        runner.start(RunRequest(TINY, "x" * 5000, SpecConfig(max_new_tokens=64)), lambda fraction, message: None)


LIVE_STEP = re.compile(r"Running… step (\d+)")


def plot(output) -> dict | None:
    """A plot output's figure as the client receives it; None when the update left the plot unchanged."""
    return json.loads(output["plot"]) if isinstance(output, dict) and "plot" in output else None


def last_step(figure: dict) -> int:
    """The newest step a timeline figure draws."""
    return max(x for trace in figure["data"] for x in trace.get("x", []) if x is not None)


def test_gradio_client_streams_a_tiny_random_run(runner):
    demo, url = serve(runner)
    try:
        client = Client(url, verbose=False)
        job = client.submit(large=False, width=1280, preset="tiny-random", draft="", target="", drafter="model",
                            prompt="def fib(n):", k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0,
                            max_new_tokens=160, seed=0, draft_dtype="float32", target_dtype="float32",
                            with_baseline=True, api_name="/run")
        updates = [dict(zip(NAMES, update)) for update in job]
    finally:
        demo.close()
    figures = [figure for u in updates if (figure := plot(u["timeline"]))]
    assert not any(x is not None for t in figures[0]["data"] for x in t.get("x", []))   # the old trace cleared at once
    drawn = [last_step(figure) for figure in figures[1:]]
    assert len(drawn) >= 3 and drawn == sorted(drawn) and drawn[0] < drawn[-1]     # live steps, baseline, Done
    live = [u for u in updates if LIVE_STEP.match(u["status"])]
    assert live and all(plot(u["timeline"]) for u in live)            # each live update redraws the timeline
    held = [plot(u["per_step"]) for u in live if plot(u["per_step"])]  # the acceptance charts: a stand-in, once
    assert len(held) == 1 and not held[0]["data"]
    final = updates[-1]
    assert plot(final["per_step"])["data"]                              # drawn when the run ends
    assert final["status"].startswith("Done") and "speedup vs target-only" in final["metrics"]
    assert "identical to the target-only run (checked)" in final["metrics"]


def test_app_rejects_an_unknown_preset_in_one_line():
    import subprocess
    import sys
    from pathlib import Path
    result = subprocess.run([sys.executable, "app.py", "--preset", "nope"], cwd=Path(__file__).resolve().parent.parent,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown preset 'nope'; choose one of" in result.stderr
    assert "Traceback" not in result.stderr
