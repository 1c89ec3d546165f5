"""The launched app through gradio_client: /run streams step by step, errors come back as messages."""

from __future__ import annotations

import json
import time

import pytest
from gradio_client import Client

from fakes import FakeRunner
from specviz.run.views import Views
from specviz.run.watch import LOADING, READY
from ui_server import serve

NAMES = [name for name in Views.names() if name != "trace"]     # gr.State is not part of the API


def run_args(**changes):
    values = dict(large=False, width=1280, preset="tiny-random", draft="", target="", drafter="model",
                  prompt="def fib(n):", k=4, adaptive_k=False, tree_nodes=0, tree_branch=3, temperature=0.0, top_p=1.0, top_k=0,
                  max_new_tokens=64, seed=0, draft_dtype="float32", target_dtype="float32", with_baseline=False)
    values.update(changes)
    return values


def is_plot(value) -> bool:
    """A status-only update leaves the figures alone: they do not come back as plots."""
    return isinstance(value, dict) and "plot" in value


def cells(plot: dict, category: str) -> int:
    figure = json.loads(plot["plot"])
    return sum(x is not None for trace in figure["data"] if trace.get("meta") == category for x in trace["x"])


@pytest.fixture(scope="module")
def fake_server():
    runner = FakeRunner(accepted=(4, 2, 0, 4, 3, 1, 4, 2), delay=0.25)
    demo, url = serve(runner)
    yield url, runner
    demo.close()


def test_run_streams_several_steps_through_the_server(fake_server):
    url, runner = fake_server
    client = Client(url, verbose=False)
    job = client.submit(**run_args(), api_name="/run")
    updates = [dict(zip(NAMES, update)) for update in job]
    # The first update clears the old trace: while the models load, or (when the page first sees the run after
    # they loaded) as it says they are ready; which of the two depends on when this page polls (specviz/run/watch.py).
    cleared, *seen = [update for update in updates if is_plot(update["timeline"])]
    assert cleared is updates[0] and cells(cleared["timeline"], "accepted") == 0          # old trace gone
    assert cleared["status"].startswith((LOADING, READY))
    ready = next(i for i, update in enumerate(updates) if update["status"].startswith(READY))
    assert ready < updates.index(seen[0])                    # said before the first (prefill) step
    final = dict(zip(NAMES, job.outputs()[-1]))
    accepted = [cells(update["timeline"], "accepted") for update in seen]
    assert len(seen) >= 4 and accepted == sorted(accepted) and accepted[0] < accepted[-1]
    assert "Running" in seen[0]["status"] and final["status"].startswith("Done: 8 steps")
    assert cells(final["timeline"], "accepted") == sum((4, 2, 0, 4, 3, 1, 4, 2))
    assert final["scrubber"]["maximum"] == 7 and final["scrubber"]["value"] == 7 and "Step 7" in final["detail"]
    assert runner.requests[-1].prompt == "def fib(n):"


def test_bad_input_comes_back_as_a_clear_error(fake_server):
    url, _ = fake_server
    client = Client(url, verbose=False)
    with pytest.raises(Exception, match="prompt is empty"):
        client.predict(**run_args(prompt="  "), api_name="/run")
    with pytest.raises(Exception, match="k must be a whole number"):
        client.predict(**run_args(k=2.5), api_name="/run")
    with pytest.raises(Exception, match=r"top-p must be in \(0, 1\]"):
        client.predict(**run_args(top_p=0.0), api_name="/run")
    with pytest.raises(Exception, match="k must be a number, got 'four'"):          # API callers can send anything
        client.predict(**run_args(k="four"), api_name="/run")
    result = client.predict(**run_args(max_new_tokens=8), api_name="/run")     # the app is still usable
    assert dict(zip(NAMES, result))["status"].startswith("Done")


def test_stop_ends_a_run_between_steps(fake_server):
    url, _ = fake_server
    client = Client(url, verbose=False)
    job = client.submit(**run_args(seed=1), api_name="/run")    # not the run above, which this server keeps
    deadline = time.monotonic() + 20
    while len(job.outputs()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    client.predict(api_name="/stop")
    final = dict(zip(NAMES, job.result(timeout=20)))
    assert final["status"].startswith("Stopped: the ") and "incomplete" in final["output"]
    assert 0 < cells(final["timeline"], "accepted") < sum((4, 2, 0, 4, 3, 1, 4, 2))
