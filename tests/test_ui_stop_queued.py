"""Stop reaches a run still waiting in the queue: it never starts. First the stop signals alone
(specviz/serving/stop.py), then two sessions on a launched server with the fake runner: A runs, B waits
behind it in the Run tab's queue (specviz/serving/) and presses Stop, B never reaches the runner
and A finishes."""

from __future__ import annotations

import threading
import time
from typing import Callable

from gradio_client import Client

from fakes import FakeRunner
from specviz.serving.stop import StopSignals
from specviz.run.views import Views
from ui_server import serve

NAMES = [name for name in Views.names() if name != "trace"]     # gr.State is not part of the API
NEVER_STARTED = "Stopped while waiting in the queue: the run never started."


def run_args(prompt: str) -> dict:
    return dict(large=False, width=1280, preset="tiny-random", draft="", target="", drafter="model", prompt=prompt,
                k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0, max_new_tokens=24, seed=0,
                draft_dtype="float32", target_dtype="float32", with_baseline=False)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll until `condition` holds (the limit only keeps a broken build from hanging the suite)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.02)


def test_a_stop_reaches_the_runs_of_its_session_that_wait_and_no_later_one():
    signals = StopSignals()
    assert not signals.request_stop("a")               # nothing waiting or running: nothing to stop
    signals.queued("a")
    signals.queued("b")
    assert signals.request_stop("a")
    signals.queued("a")                                # joined the queue after the Stop
    stopped, later, other = signals.open("a", was_queued=True), signals.open("a", was_queued=True), \
        signals.open("b", was_queued=True)
    assert stopped.is_set() and not later.is_set() and not other.is_set()
    assert not signals.open("a", was_queued=True).is_set()     # a run that never queued (a direct call)
    assert signals.num_running == 4
    for session, event in (("a", stopped), ("a", later), ("b", other)):
        signals.close(session, event)
    assert signals.num_running == 1


def test_a_replay_does_not_take_the_signal_of_a_run_waiting_in_its_session():
    signals = StopSignals()
    signals.queued("a")
    replay = signals.open("a")
    signals.request_stop("a")
    signals.close("a", replay)
    assert replay.is_set() and signals.open("a", was_queued=True).is_set()    # the waiting run's own, stopped


def test_stop_cancels_a_run_waiting_in_the_queue_and_the_running_one_finishes():
    release = threading.Event()
    runner = FakeRunner(accepted=(4, 2, 0, 4, 3, 1), hold_after=1, release=release)   # each run holds at step 2
    demo, url = serve(runner)
    try:
        session_a, session_b = Client(url, verbose=False), Client(url, verbose=False)
        running = session_a.submit(**run_args("A runs"), api_name="/run")
        wait_for(lambda: [request.prompt for request in runner.requests] == ["A runs"], "A started")
        waiting = session_b.submit(**run_args("B waits"), api_name="/run")
        wait_for(lambda: any("Waiting in the queue: **place 2** (1 run ahead of yours)" in dict(zip(NAMES, out))["status"]
                             for out in waiting.outputs()), "B waits in the queue behind A, and is told so")
        session_b.predict(api_name="/stop")
        release.set()
        b_out = dict(zip(NAMES, waiting.result(timeout=120)))
        a_out = dict(zip(NAMES, running.result(timeout=120)))
        assert b_out["status"] == NEVER_STARTED, (b_out["status"], [dict(zip(NAMES, o))["status"] for o in waiting.outputs()])
        assert a_out["status"].startswith("Done") and "incomplete" not in a_out["output"]
        assert [request.prompt for request in runner.requests] == ["A runs"]     # B never reached the runner
        again = session_b.submit(**run_args("B again"), api_name="/run")       # the session's next run is not stopped
        assert dict(zip(NAMES, again.result(timeout=120)))["status"].startswith("Done")
    finally:
        release.set()
        demo.close()


def test_every_long_event_takes_its_stop_signal_in_the_queue_and_stop_reaches_it():
    """Run, Compare, the sweep and the Lab: each long event's validator is its handlers' `queued`,
    and the tab's Stop button calls the same handlers' `stop`, so a Stop pressed while it waits
    cancels it."""
    from specviz.layout import build_demo

    demo = build_demo(FakeRunner())
    by_name = {fn.api_name: fn for fn in demo.fns.values()}
    for run_name, stop_name in (("run", "stop"), ("compare_run", "compare_stop"), ("explore_sweep", "explore_stop"),
                                ("lab_run", "lab_stop")):
        run, stop = by_name[run_name], by_name[stop_name]
        handlers = stop.fn.__self__
        assert run.validator == handlers.queued and stop.fn == handlers.stop, run_name
        if getattr(run.fn, "__self__", None) is not None:
            assert run.fn.__self__ is handlers, run_name


class _Session:
    session_hash = "waiting-session"


def test_the_compare_sweep_and_lab_handlers_never_start_a_run_stopped_in_the_queue():
    from specviz.explore.compare import CompareHandlers
    from specviz.explore.handlers import ExploreHandlers
    from specviz.lab.handlers import LabHandlers

    runner = FakeRunner()
    calls = {
        CompareHandlers: lambda h: h.compare(False, 1280, "tiny-random", "", "", "a prompt", 16, 0, 2, 0.0, "model",
                                             3, 0.0, "model", request=_Session()),
        ExploreHandlers: lambda h: h.sweep(None, 0.0, False, 1280, "tiny-random", "", "", "model", [2, 3], [0.0],
                                           ["a prompt"], "0", 16, request=_Session(), progress=lambda *a, **k: None),
        LabHandlers: lambda h: h.run(None, "A", False, 1280, "tiny-random", "", "", "a prompt", 3, 16,
                                     request=_Session(), progress=lambda *a, **k: None),
    }
    for kind, call in calls.items():
        handlers = kind(runner)
        handlers.stops.queued(_Session.session_hash)     # joined the queue ...
        handlers.stop(_Session())                          # ... and Stop came while it waited
        updates = list(call(handlers))
        assert len(updates) == 1 and NEVER_STARTED in updates[0], kind.__name__
        assert runner.requests == [] and runner.sweep_requests == [], kind.__name__
        assert handlers.stops.num_running == 0
