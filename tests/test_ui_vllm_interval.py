"""The whole server's acceptance by position over a run (issue #32, item 3: a server with other traffic).

The page reads the vLLM server's /metrics counters before it joins the run and after the run, and draws
the interval beside the run's own bars, named as covering the whole server. The server is the recorded
vLLM 0.32 server replayed over real HTTP, whose /metrics pages were recorded before and after three
requests (the greedy run the page asks for, and two others: the other traffic). The oracle is the three
requests' own per-step arrays: accepted at position i among the steps that accepted every draft before it."""

from __future__ import annotations

from http.server import ThreadingHTTPServer
import threading

import pytest

from app import EngineRunner
from control_values import controls, progress
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from specviz.serving.runner import VLLM_SERVER
from vllm_replay import ReplayServer, _handler, load_recording
from vllm_traces import vllm_trace

NAMES = Views.names()
RECORDING = load_recording()
GREEDY = RECORDING["streams"]["greedy"]["body"]


class WithMetrics(ReplayServer):
    """The replay server with /metrics: the page recorded before the three requests until the page's run has
    been asked for, the one recorded after them from then on (`metrics_ok` False: /metrics is missing)."""

    metrics_ok = True

    def __post_init__(self) -> None:
        replay = self

        class Handler(_handler(self)):
            def do_GET(self) -> None:
                if self.path != "/metrics":
                    return super().do_GET()
                if not replay.metrics_ok:
                    return self._json({"error": {"message": "Not Found"}}, 404)
                ran = any(r["path"] == "/v1/completions" and r.get("max_tokens") != 3 for r in replay.requests)
                data = RECORDING["metrics_after" if ran else "metrics_before"].encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()


@pytest.fixture
def replay():
    server = WithMetrics(RECORDING)
    yield server
    server.close()


def run(url: str, handlers: Handlers | None = None) -> list[dict]:
    values = controls(preset=VLLM_SERVER, server=url, prompt="abc", max_new_tokens=GREEDY["max_tokens"], k=3,
                      seed=GREEDY["seed"])
    handlers = handlers or Handlers(EngineRunner(device="cpu"), min_interval=0.0)
    return [dict(zip(NAMES, out)) for out in handlers.run(None, False, None, *values, progress=progress)]


def all_requests_by_position() -> list[tuple[float, int]]:
    """(accepted at d(i+1) / steps that reached it, steps that reached it) over every recorded request."""
    accepted = [a for stream in RECORDING["streams"].values() for e in stream["events"] if not e.get("choices")
                for a in e["metrics"]["speculative_decoding"]["per_step_accepted"]]
    reached = [sum(a >= i for a in accepted) for i in range(3)]
    return [(sum(a > i for a in accepted) / reached[i], reached[i]) for i in range(3)]


def test_the_whole_servers_interval_is_drawn_beside_the_run(replay):
    handlers = Handlers(EngineRunner(device="cpu"), min_interval=0.0)
    updates = run(replay.url, handlers)
    done = next(update for update in updates if str(update["status"]).startswith("Done"))
    final = updates[-1]
    assert final["trace"] is done["trace"]                          # the run itself is unchanged
    bars = {bar.meta: bar for bar in final["positions"].data}
    server = bars["server"]
    assert "whole server" in server.name and "any other traffic" in server.hovertemplate
    expected = all_requests_by_position()
    assert [round(y, 9) for y in server.y] == [round(rate, 9) for rate, _ in expected]
    assert list(server.customdata) == [n for _, n in expected]
    own = done["trace"].summary.per_position_acceptance
    assert list(bars["per_position"].y) == [rate or 0.0 for rate in own]
    assert list(server.y) != list(bars["per_position"].y)        # the other traffic shows
    large = dict(zip(NAMES, handlers.restyle(done["trace"], None, True, None, final["status"])))   # large text
    assert [bar.meta for bar in large["positions"].data] == [bar.meta for bar in final["positions"].data]
    other = dict(zip(NAMES, handlers.restyle(vllm_trace("long"), None, True, None, "")))           # another trace
    assert "server" not in [bar.meta for bar in other["positions"].data]


def test_a_server_without_metrics_leaves_the_run_and_says_so(replay):
    replay.metrics_ok = False
    final = run(replay.url)[-1]
    assert "The server's /metrics counters could not be read, so only this run's own counts are drawn" in \
        final["status"] and final["status"].startswith("Done")
    assert final["trace"].complete
