"""The Run tab's queue by lane (docs/architecture.md §9, "Runs on a vLLM server"): runs streamed from a
vLLM server are admitted up to `server_runs` at once, since the server batches them itself; the
in-process engine keeps one run at a time, and neither lane waits for the other. Waiting runs are told
their place in their lane and a wait that is the real wait; a stopped server run closes its stream.

Streaming runs go to the recorded vLLM 0.32 server replayed over real HTTP (tests/vllm_replay.py);
the lane rules alone use the fake runner, whose requests name a server it never calls.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import pytest

import engine.vllm.source as source
from app import EngineRunner
from control_values import controls
from fakes import FakeRunner
from specviz.controls import Controls
from specviz.serving.runner import VLLM_SERVER, ModelChoice, RunRequest
from specviz.serving.run_queue import IN_PROCESS, RunQueue, lane
from specviz.serving.shared_run import DONE, QUEUED, STOPPED, SharedRun
from vllm_replay import Faults, ReplayServer, load_recording

RECORDING = load_recording()
GREEDY = RECORDING["streams"]["greedy"]["body"]
NOWHERE = "http://127.0.0.1:9"          # a server address the fake runner never calls
ACCEPTED = (4, 2, 0, 4, 3, 1)


def wait_for(condition, what: str, limit: float = 30) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.01)


def request(prompt: str, server: str = "", seed: int = 0, max_new_tokens: int = 16) -> RunRequest:
    """A run request on the in-process tiny pair, or on the server at `server`."""
    config = Controls(*controls(max_new_tokens=max_new_tokens, seed=seed)).to_request().config
    return RunRequest(ModelChoice(preset="tiny-random", server=server), prompt, config)


def replay_request(url: str, seed: int) -> RunRequest:
    """The recorded greedy request on the replayed server; each seed is another run (the replay ignores it)."""
    values = controls(preset=VLLM_SERVER, server=url, prompt="abc", max_new_tokens=GREEDY["max_tokens"], k=3, seed=seed)
    return Controls(*values).to_request()


@dataclass
class LaneRunner:
    """In-process requests to one runner, server requests to another (a seam to hold one lane)."""

    in_process: object
    server: object

    def start(self, request: RunRequest, progress):
        return (self.server if request.models.server else self.in_process).start(request, progress)


def overlapped(runs: list[SharedRun]) -> bool:
    """Every run started before the first of them ended."""
    return max(run.running_since for run in runs) < min(run.finished_at for run in runs)


@pytest.fixture(scope="module")
def replay():
    server = ReplayServer(RECORDING, Faults(delay_s=0.03))
    yield server
    server.close()


def test_lanes_are_this_process_and_each_server_address_however_written():
    assert lane(request("a")) == IN_PROCESS
    assert lane(request("a", server="127.0.0.1:8000")) == lane(request("b", server="http://127.0.0.1:8000/v1"))
    assert lane(request("a", server="127.0.0.1:8000")) != lane(request("a", server="127.0.0.1:8001"))


@pytest.mark.parametrize("slots", [3, 1])
def test_server_runs_stream_at_once_up_to_the_setting_and_each_is_the_recorded_run(replay, slots):
    queue = RunQueue(EngineRunner(device="cpu"), server_runs=slots)
    seats = [queue.join(replay_request(replay.url, seed), threading.Event()) for seed in range(3)]
    runs = [seat.run.wait_until_ended(60) for seat in seats]
    assert [run.phase for run in runs] == [DONE] * 3, [run.error for run in runs]
    final = next(e for e in RECORDING["streams"]["greedy"]["events"] if not e.get("choices"))
    for run in runs:
        assert run.trace.complete and [s.num_accepted for s in run.trace.steps[1:]] == \
            final["metrics"]["speculative_decoding"]["per_step_accepted"]
    shared = [seat.run for seat in seats]
    assert overlapped(shared) == (slots > 1)
    if slots == 1:          # one at a time, in order of arrival
        assert all(a.finished_at <= b.running_since for a, b in zip(shared, shared[1:]))
    # the class log (Explore's "your class" star) kept each run as the server sent it
    served = queue.class_log.runs()
    assert [(s.times.output_tokens, s.accepted) for s in served] == \
        [(len(run.trace.output.token_ids), tuple(final["metrics"]["speculative_decoding"]["per_step_accepted"]))
         for run in runs]
    point = queue.class_log.point()
    assert (point.runs, point.peak_concurrency) == ((3, 3) if slots > 1 else (1, 1))
    assert point.server == replay.url.rstrip("/") and point.k == 3
    if slots == 1:          # a class of one run: one at once, by Little's law exactly
        assert point.mean_concurrency == 1.0


def test_a_server_run_does_not_wait_behind_an_in_process_run_nor_it_behind_the_server():
    release = threading.Event()
    held = FakeRunner(accepted=(1, 1), hold_after=0, release=release)
    queue = RunQueue(LaneRunner(in_process=held, server=FakeRunner(accepted=ACCEPTED)))
    first = queue.join(request("held"), threading.Event())
    wait_for(lambda: first.run.running_since is not None, "the in-process run holds its lane")
    second = queue.join(request("waits"), threading.Event())
    on_server = queue.join(request("streams", server=NOWHERE), threading.Event())
    assert queue.place(on_server.run) is None               # a free slot: admitted as it joins, never told a place
    assert on_server.run.wait_until_ended(30).phase == DONE                 # while the in-process run is held
    assert second.run.snapshot().phase == QUEUED and queue.place(second.run).place == 2
    release.set()
    assert first.run.wait_until_ended(30).phase == DONE and second.run.wait_until_ended(30).phase == DONE


def full_lane_wait(queue: RunQueue) -> tuple[int, float, float]:
    """Two server lanes' slots taken (a half way, b just started), then c joins: (c's place, its estimated
    wait, its real wait until its run started)."""
    timed = queue.join(request("timed first", server=NOWHERE), threading.Event())
    assert timed.run.wait_until_ended(30).phase == DONE                     # this server's speed, measured
    a = queue.join(request("a", server=NOWHERE), threading.Event())
    wait_for(lambda: a.run.running_since is not None, "a is under way")
    time.sleep(0.6)                                                         # half way through a (6 steps of 0.2 s)
    b = queue.join(request("b", server=NOWHERE), threading.Event())
    wait_for(lambda: b.run.running_since is not None, "b runs beside a")
    c = queue.join(request("c", server=NOWHERE), threading.Event())
    place = queue.place(c.run)
    wait_for(lambda: c.run.running_since is not None, "c starts")
    for seat in (a, b, c):
        queue.leave(seat)
    return place.place, place.wait_s, c.run.running_since - c.run.requested_at


def test_a_run_waiting_for_a_server_slot_is_told_its_place_and_the_real_wait():
    """c waits for the first of two slots to free: a's remaining half run, not a's half and b's whole."""
    place, estimate, real = full_lane_wait(RunQueue(FakeRunner(accepted=ACCEPTED, delay=0.2), server_runs=2))
    assert place == 3 and 0.3 < real < 1.0
    assert abs(estimate - real) <= 0.1 * real + 0.15, (estimate, real)


def test_a_planted_bug_in_the_server_lanes_estimate_is_caught(monkeypatch):
    """The estimate as if the server ran one request at a time (b's whole run added) is told apart."""
    real_wait_s = RunQueue._wait_s
    monkeypatch.setattr(RunQueue, "_wait_s", lambda self, running, waiting, slots: real_wait_s(
        self, running[:1], running[1:] + waiting, 1))
    _, estimate, real = full_lane_wait(RunQueue(FakeRunner(accepted=ACCEPTED, delay=0.2), server_runs=2))
    assert abs(estimate - real) > 0.1 * real + 0.15, (estimate, real)


def test_stopping_a_server_run_closes_its_stream_so_the_server_stops(replay, monkeypatch):
    closed: list[source.VllmGeneration] = []
    real_close = source.VllmGeneration.close

    def close(generation: source.VllmGeneration) -> None:
        closed.append(generation)
        real_close(generation)

    monkeypatch.setattr(source.VllmGeneration, "close", close)
    queue = RunQueue(EngineRunner(device="cpu"))
    seat = queue.join(replay_request(replay.url, seed=99), threading.Event())
    wait_for(lambda: (seat.run.snapshot().trace is not None and len(seat.run.snapshot().trace.steps) >= 2),
             "the run has streamed two steps")
    assert queue.leave(seat) == 0
    ended = seat.run.wait_until_ended(30)
    assert ended.phase == STOPPED and not ended.trace.complete
    assert len(closed) == 1 and not closed[0].is_done                      # closed mid-stream: vLLM aborts it


def test_the_page_server_takes_its_server_runs_from_the_command_line(monkeypatch, capsys):
    import app
    import specviz.run.tab as tab
    made: list[RunQueue] = []

    class Recorded(RunQueue):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(tab, "RunQueue", Recorded)
    app.boot(["--preset", "tiny-random", "--no-preload", "--vllm-runs", "3"])
    assert [queue.server_runs for queue in made] == [3]
    with pytest.raises(SystemExit):
        app.boot(["--preset", "tiny-random", "--no-preload", "--vllm-runs", "0"])
    assert "--vllm-runs must be at least 1" in capsys.readouterr().err
