"""A capture that fails at Run time reaches the page: the Run tab's status line says why the run went
without its CUDA graphs (docs/architecture.md §7, issue #34 item 7).

The Generation is real (the tiny pair, static caches whose runners capture with the eager stand-in of
CUDA graphs, tests/test_static_cache_pool.py); the failure is planted in the capture as CUDA raises
one; the runner around it stands in for app.py's model loading only, and the Run tab's real handler
drives the run through the run queue.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Iterator

import pytest

import engine.runtime.static_runner
from control_values import controls, progress
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from fakes import FakeRunner
from oracles import replaying_graphs
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from test_static_cache_pool import CAPTURE_ERROR, failing_capture

REASON = f"graph capture for a 256-row cache failed ({CAPTURE_ERROR}): its forwards run eagerly"


@dataclass
class TinyStaticRunner(FakeRunner):
    """The Runner protocol over a real speculative engine on static caches (no loading to isolate)."""

    engine: SpeculativeEngine | None = None

    def start(self, request, progress):
        self.requests.append(request)
        return self.engine.start(request.prompt, request.config.replace(cache="static"))


class Borrower:
    """Another run: it holds the runners the pair captured at load, so the run under test captures anew."""


@pytest.fixture
def tiny_engine() -> Iterator[SpeculativeEngine]:
    pair = replaying_graphs(build_tiny_pair(seed=0))
    other = Borrower()
    leases = [pair.runner_pool(role).lend(other, 1) for role in ("target", "draft")]
    yield SpeculativeEngine(pair)
    for lease in leases:
        lease.end()


def run_updates(spec_engine: SpeculativeEngine) -> list[dict]:
    """Every update the Run tab's handler sends for a greedy 64-token run at k = 4."""
    handlers = Handlers(TinyStaticRunner(engine=spec_engine), min_interval=0.0)
    return [dict(zip(Views.names(), out)) for out in handlers.run(None, False, None, *controls(), progress=progress)]


def test_a_run_whose_capture_failed_says_why_on_its_status_line(monkeypatch, tiny_engine):
    monkeypatch.setattr(engine.runtime.static_runner, "capture", failing_capture)
    updates = run_updates(tiny_engine)
    status, trace = updates[-1]["status"], updates[-1]["trace"]
    assert status.startswith("Done:") and trace.complete and trace.steps[-1].kv_target.capacity == 256
    assert trace.eager_reason == f"the target's {REASON}; the draft's {REASON}"
    sentence = f" The target's {REASON}; the draft's {REASON}."
    assert status.endswith(sentence)
    live = [update["status"] for update in updates if update["status"].startswith("Running… step")]
    assert live and all(line.endswith(sentence) for line in live)      # the first step is always drawn


def test_a_run_whose_graphs_were_captured_says_nothing_of_them(tiny_engine):
    updates = run_updates(tiny_engine)
    trace = updates[-1]["trace"]
    assert trace.steps[-1].kv_target.capacity == 256 and trace.eager_reason is None
    assert updates[-1]["status"].startswith("Done:") and not any("graph" in update["status"] for update in updates)


def test_the_reason_travels_with_the_exported_trace(monkeypatch, tiny_engine):
    """The JSON keeps the sentence (an optional field: a run with its graphs writes none), and the Run
    tab's upload says it again on its status line."""
    from engine.formats.trace import Trace
    monkeypatch.setattr(engine.runtime.static_runner, "capture", failing_capture)
    trace = run_updates(tiny_engine)[-1]["trace"]
    document = trace.to_dict()
    assert document["eager_reason"] == trace.eager_reason
    back = Trace.from_json(trace.to_json())
    assert back.eager_reason == trace.eager_reason and back.to_json() == trace.to_json()
    status = dict(zip(Views.names(), Handlers(TinyStaticRunner()).upload(trace.to_json().encode(), False, None)))["status"]
    assert status.startswith("Replaying an uploaded trace:") and status.endswith(f" The target's {REASON}; the draft's {REASON}.")
    plain = dataclasses.replace(trace, eager_reason=None)
    assert "eager_reason" not in plain.to_dict() and Trace.from_json(plain.to_json()).eager_reason is None
