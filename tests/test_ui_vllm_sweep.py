"""Explore's temperature sweep against a vLLM server (issue #32, item 3): one run per (temperature, prompt,
seed) at the server's own k, whatever ks are ticked, and the page says so; each row carries the server's own
counts; the document passes the strict sweep reader and every Explore view draws it; a server fault is one
sentence. The server is the recorded vLLM 0.32 server replayed over real HTTP (tests/vllm_replay.py)."""

from __future__ import annotations

import gradio as gr
import pytest

from engine.formats.sweep_reader import SweepTable
from fakes import FakeRunner
from specviz.explore.handlers import ExploreHandlers, SweepControls
from specviz.explore.views import ExploreViews
from specviz.serving.policy import Policy
from specviz.serving.runner import VLLM_SERVER
from vllm_replay import Faults, ReplayServer, load_recording

NAMES = ExploreViews.names()
RECORDING = load_recording()


def recorded(name: str) -> dict:
    return next(e["metrics"]["speculative_decoding"] for e in RECORDING["streams"][name]["events"]
                if not e.get("choices"))


@pytest.fixture(scope="module")
def replay():
    server = ReplayServer(RECORDING)
    yield server
    server.close()


def sweep(url: str, policy: Policy = Policy(), **changes) -> list[dict]:
    values = dict(preset=VLLM_SERVER, draft="", target="", drafter="model", ks=[2, 4, 6], temperatures=[0.0, 0.8],
                  prompts=["abc", "Hello, world"], seeds="1", max_new_tokens=24, server=url)
    values.update(changes)
    runner = FakeRunner()
    handlers = ExploreHandlers(runner, min_interval=0.0, policy=policy)
    updates = [dict(zip(NAMES, out)) for out in handlers.sweep(None, None, False, None,
                                                               *(values[n] for n in SweepControls.__dataclass_fields__),
                                                               progress=lambda *a, **k: None)]
    assert runner.requests == []                   # SpecViz's own engine never ran
    return updates


def test_a_sweep_on_the_server_runs_its_temperatures_at_its_own_k(replay):
    replay.faults = Faults()
    final = sweep(replay.url)[-1]
    table: SweepTable = final["table"]
    assert len(table.runs) == 4 and {run.k for run in table.runs} == {3}            # ks ticked: not used
    assert "k = 3 is the vLLM server's own setting" in final["status"] and final["status"].startswith("Done")
    greedy, sampled = (recorded(name)["num_accepted_draft_tokens"] / recorded(name)["num_draft_tokens"]
                       for name in ("greedy", "sampled"))
    # the replay answers ("abc", 0) and ("Hello, world", 0.8) as recorded, anything else with the greedy stream
    assert table.cell(3, 0.0).acceptance_rate == pytest.approx(greedy)
    assert table.cell(3, 0.8).acceptance_rate == pytest.approx((greedy + sampled) / 2)
    assert table.meta["engine"] == "vllm 0.32.0" and table.meta["ks"] == [3]
    again = SweepTable.from_json(table.to_json())                  # downloads and uploads like any sweep
    assert [(cell.k, cell.temperature) for cell in again.cells] == [(3, 0.0), (3, 0.8)]
    assert all(run.speedup is None for run in table.runs)       # no target-only baseline on a server


def test_a_server_fault_in_a_sweep_is_one_sentence(replay):
    replay.faults = Faults(detailed=False)
    with pytest.raises(gr.Error, match="Could not start the sweep: The vLLM server at .* does not report each step"):
        sweep(replay.url)
    replay.faults = Faults()


def test_a_hosted_page_sweeps_only_the_servers_its_operator_lists(replay):
    replay.faults = Faults()
    asked = len(replay.requests)
    with pytest.raises(gr.Error, match="This hosted server does not connect to vLLM servers typed on the page"):
        sweep(replay.url, Policy.hosted_default(), max_new_tokens=24)
    assert len(replay.requests) == asked                          # not one request left the page's server
    listed = Policy.hosted_default(frozenset({replay.url}))
    assert sweep(replay.url, listed, temperatures=[0.0], prompts=["abc"])[-1]["status"].startswith("Done")


def test_two_runs_side_by_side_are_refused_on_a_server_in_one_sentence():
    from specviz.explore.compare import CompareHandlers
    with pytest.raises(gr.Error, match="Two runs side by side use SpecViz's own engine"):
        list(CompareHandlers(FakeRunner()).compare(False, None, VLLM_SERVER, "", "", "abc", 16, 0, 3, 0.0, "model",
                                                   5, 0.0, "model"))
