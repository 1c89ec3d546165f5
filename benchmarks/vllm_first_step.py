"""How soon a live vLLM-backed run draws its first step: the goal "within 1 s of the server's first chunk"
(issue #32), measured through the Run tab's own handler path, not as a timed test.

A recorded vLLM 0.32 server (tests/data/vllm/tiny_draft_k3.json: greedy, sampled and long) is replayed over
real HTTP (tests/vllm_replay.py) at a steady pace per event, and the page's handler (`Handlers.run` with
app.py's real EngineRunner and the page's default redraw interval) runs each recorded stream, as a click
on Run does: probe, tokenize, stream, views. Two instants, both `time.perf_counter()` in this one process
(the replay server is a thread of it): when the replay server had flushed the run's first token chunk,
and when the handler first yielded views whose trace holds a step. Their gap is the figure; the JSON
(benchmarks/data/vllm-first-step.json) keeps every run's and the machine's load while it ran.

    .venv/bin/python benchmarks/vllm_first_step.py [--repeats 3] [--delay 0.05] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]        # app.py, and the replay server tests/vllm_replay.py

from app import EngineRunner                                   # noqa: E402
from control_values import controls, progress                  # noqa: E402
from specviz.run.handlers import Handlers                      # noqa: E402
from specviz.run.views import Views                            # noqa: E402
from specviz.serving.runner import VLLM_SERVER                 # noqa: E402
from vllm_replay import Faults, ReplayServer, load_recording   # noqa: E402

GOAL_S = 1.0
# The n-gram recording was served with prompt lookup 1..3; the page has no control for a server's lookup and
# asks for vLLM's default (5, 5), so its final split is refused there (a limitation noted in the JSON).
RECORDINGS = {"tiny_draft_k3": ("draft_model", (5, 5))}
NOT_MEASURED = ("tiny_ngram_k3 (served with prompt lookup 1..3): the page cannot tell the server's n-gram lookup and "
                "assumes vLLM's default 5..5, so that recording's final per-step split is refused through the page")
OUT = ROOT / "benchmarks" / "data" / "vllm-first-step.json"


class TimedEvents:
    """A stream's events that note when each one was flushed: the replay handler asks for the next event
    right after writing and flushing the previous one (tests/vllm_replay.py `_stream`)."""

    def __init__(self, events: list[dict[str, Any]]):
        self.events = events
        self.flushed_s: list[float] = []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self.events:
            yield event
            self.flushed_s.append(time.perf_counter())

    def first_chunk_s(self) -> float | None:
        """When the first event holding tokens had been flushed."""
        return next((at for event, at in zip(self.events, self.flushed_s) if event.get("choices")), None)


class TimedReplay(ReplayServer):
    """The replay server, keeping each completion request's events timed (the probe's two tokens too)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.streams: list[tuple[dict[str, Any], TimedEvents]] = []
        self._lock = threading.Lock()

    def events(self, body: dict[str, Any]) -> TimedEvents:       # type: ignore[override]
        timed = TimedEvents(super().events(body))
        with self._lock:
            self.streams.append((body, timed))
        return timed


def one_run(handlers: Handlers, replay: TimedReplay, recording: dict, stream: str, method: str,
            repeat: int) -> dict[str, Any]:
    """Run the recorded stream `stream` through the Run tab's handler; the seconds from the server's first
    chunk of this run to the handler's first yield with a step. Each repeat asks another seed (the replay
    answers by prompt and temperature), so the run queue runs it afresh instead of sharing a finished run."""
    body = recording["streams"][stream]["body"]
    prompt = next(text for text, ids in recording["tokenize"].items() if ids == body["prompt"])
    values = controls(preset=VLLM_SERVER, server=replay.url, prompt=prompt, max_new_tokens=body["max_tokens"],
                      temperature=body["temperature"], seed=body["seed"] + repeat, k=3,
                      drafter="ngram" if method == "ngram" else "model")
    names = Views.names()
    before = len(replay.streams)
    clicked = time.perf_counter()
    first_step_s, last = None, None
    for out in handlers.run(None, False, None, *values, progress=progress):
        last = dict(zip(names, out))
        trace = last["trace"]
        if first_step_s is None and trace is not None and trace.steps:
            first_step_s = time.perf_counter()
    ours = [timed for sent, timed in replay.streams[before:] if sent.get("max_tokens") == body["max_tokens"]]
    chunk_s = ours[-1].first_chunk_s() if ours else None
    trace = last["trace"] if last else None
    done = bool(trace is not None and trace.complete)
    return {"recording": recording["__name__"], "method": method, "stream": stream, "repeat": repeat, "done": done,
            "status": str(last["status"])[:120] if last else "",
            "steps": len(trace.steps) if trace is not None else 0,
            "click_to_first_chunk_s": None if chunk_s is None else round(chunk_s - clicked, 4),
            "first_chunk_to_first_step_s": None if chunk_s is None or first_step_s is None
            else round(first_step_s - chunk_s, 4)}


def measure(repeats: int, delay_s: float) -> dict[str, Any]:
    runs = []
    load_before = os.getloadavg()
    for name, (method, _) in RECORDINGS.items():
        recording = load_recording(name) | {"__name__": name}
        replay = TimedReplay(recording, Faults(delay_s=delay_s))
        try:
            handlers = Handlers(EngineRunner(device="cpu"))      # the page's default redraw interval
            for repeat in range(repeats):
                for stream in sorted(recording["streams"]):
                    runs.append(one_run(handlers, replay, recording, stream, method, repeat))
        finally:
            replay.close()
    gaps = [run["first_chunk_to_first_step_s"] for run in runs if run["first_chunk_to_first_step_s"] is not None]
    warm = gaps[1:]          # the process's first run also builds its first figures (imports, caches)
    return {
        "goal": f"a live vLLM-backed run draws its first step within {GOAL_S:g} s of the server's first chunk",
        "path": "specviz/run/handlers.py Handlers.run (app.py EngineRunner, run queue, Watch, views) against "
                "tests/vllm_replay.py replaying tests/data/vllm/ over real HTTP",
        "not_measured": NOT_MEASURED, "replay_delay_per_event_s": delay_s, "repeats": repeats, "runs": runs,
        "first_chunk_to_first_step_s": {"median": round(statistics.median(gaps), 4) if gaps else None,
                                        "max": round(max(gaps), 4) if gaps else None, "n": len(gaps),
                                        "first_run_of_the_process": gaps[0] if gaps else None,
                                        "median_after_the_first": round(statistics.median(warm), 4) if warm else None},
        "within_goal": bool(gaps) and len(gaps) == len(runs) and max(gaps) <= GOAL_S and all(r["done"] for r in runs),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "loadavg_1_5_15_before": [round(x, 2) for x in load_before],
                    "loadavg_1_5_15_after": [round(x, 2) for x in os.getloadavg()],
                    "note": "a shared 2-core machine, loaded by other work while this ran: a ceiling, not a typical figure"},
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.05, help="the replay server's pause before each event, s")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    result = measure(args.repeats, args.delay)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    summary = result["first_chunk_to_first_step_s"]
    print(f"first chunk -> first step drawn: median {summary['median']} s, max {summary['max']} s over {summary['n']} "
          f"runs; within {GOAL_S:g} s: {result['within_goal']} (written to {args.out})")


if __name__ == "__main__":
    main()
