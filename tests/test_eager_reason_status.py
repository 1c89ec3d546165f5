"""A capture that fails at Run time reaches the page: the Run tab's status line says why the run went
without its CUDA graphs (docs/architecture.md §7, issue #34 item 7).

The Generation is real (the tiny pair, static caches whose runners capture with the eager stand-in of
CUDA graphs, tests/test_static_cache_pool.py); the failure is planted in the capture as CUDA raises
one; the runner around it stands in for app.py's model loading only, and the Run tab's real handler
drives the run through the run queue.
"""

from __future__ import annotations

from dataclasses import dataclass

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

LONG_RUN = 300          # new tokens: past the 256-row runner the pair captured at load, so the run needs a new one
REASON = f"the graph capture for a 512-row cache failed ({CAPTURE_ERROR}): its forwards run eagerly"


@dataclass
class TinyStaticRunner(FakeRunner):
    """The Runner protocol over a real speculative engine on static caches (no loading to isolate)."""

    engine: SpeculativeEngine | None = None

    def start(self, request, progress):
        self.requests.append(request)
        return self.engine.start(request.prompt, request.config.replace(cache="static"))


@pytest.fixture
def tiny_engine() -> SpeculativeEngine:
    return SpeculativeEngine(replaying_graphs(build_tiny_pair(seed=0, max_context=2048)))


def final_status(spec_engine: SpeculativeEngine, max_new_tokens: int) -> tuple[str, object]:
    handlers = Handlers(TinyStaticRunner(engine=spec_engine), min_interval=0.0)
    names = Views.names()
    updates = [dict(zip(names, out)) for out in handlers.run(None, False, None, *controls(max_new_tokens=max_new_tokens),
                                                             progress=progress)]
    return updates[-1]["status"], updates[-1]["trace"]


def test_a_run_whose_capture_failed_says_why_on_its_status_line(monkeypatch, tiny_engine):
    monkeypatch.setattr(engine.runtime.static_runner, "capture", failing_capture)
    status, trace = final_status(tiny_engine, LONG_RUN)
    assert status.startswith("Done:") and trace.complete and trace.steps[-1].kv_target.capacity == 512
    assert trace.eager_reason == f"the target's {REASON[4:]}; the draft's {REASON[4:]}"
    assert status.endswith(f" The target's {REASON[4:]}; the draft's {REASON[4:]}.")


def test_a_run_whose_graphs_were_captured_says_nothing_of_them(tiny_engine):
    status, trace = final_status(tiny_engine, LONG_RUN)
    assert trace.steps[-1].kv_target.capacity == 512 and trace.eager_reason is None
    assert "graph" not in status and status.startswith("Done:")
