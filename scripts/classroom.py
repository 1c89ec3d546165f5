"""A class pressing Run at once: `python scripts/classroom.py --clients 30 [--preset NAME] [--same-prompt]
[--vllm-server URL [--vllm-drafter ngram]]`.

Starts the app (`app.py --preset NAME` on a free port; or uses `--url`), waits for its models with
one warm-up run, times one run alone (the first client's request with other seeds: the median of
three), then presses Run from `--clients` gradio_client sessions at once, each with its own prompt
(or all the same one with `--same-prompt`), and prints per client the time to its first word from
the server (its queue place, or the run itself), to its first step and to Done, the failures, and
the server's memory: its peak resident memory during the lone runs and during the class (sampled
from /proc, a server this script started; not measured with `--url`). The goals (issue #28; docs/benchmark.md quotes the saved runs) are ratios within
this one run: identical requests all done within 1.3x one run; distinct ones each told its place within
2 s; memory within 1 GB of one run's peak. `--json PATH` also writes every figure.

With `--vllm-server URL` every run is the page's "vLLM server" source streaming from that running vLLM
server (docs/architecture.md §10; the page started here loads no models of its own, `--no-preload`), so
the class goes through the queue's server lane, up to `server_runs` at once (§9, "lanes"), and the
ratio of the last Done to one run alone shows what the server's batching gives a class. Every report
states the machine: its cores and its load average before and after.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import app_server  # noqa: E402
from engine.cli.machine import machine_record, provenance  # noqa: E402
from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER  # noqa: E402
from engine.presets import DEFAULT_PRESET, PRESETS  # noqa: E402
from specviz.assets import load_examples  # noqa: E402
from specviz.serving.notices import told_wait_s  # noqa: E402
from specviz.serving.runner import VLLM_SERVER  # noqa: E402

POLL_S = 0.05               # how often each client looks for new updates (the times' resolution)
START_LIMIT_S = 1800        # the server's start and the warm-up run (the first start converts the weights)
REQUEST_LIMIT_S = 600       # one request to the server (joining the queue, a stream's next event)
CLIENTS_PER_PROCESS = 5
ALONE_SEED = 999            # the lone runs' first seed; the class's is 0
ALONE_RUNS = 3
GB = 1024 ** 3


@dataclass
class ClientTimes:
    """One client's press of Run; every time in seconds after the press (None: it never came)."""

    client: int
    prompt: str
    first_word_s: float | None = None         # the first update of any kind: queue place, models ready, a step
    queue_place_s: float | None = None        # the first "Waiting in the queue" line (None: it never waited)
    estimated_wait_s: float | None = None     # the wait that first line estimated
    waited_s: float | None = None             # until the first update that is not a queue line: the run began
    first_step_s: float | None = None
    done_s: float | None = None
    shared: bool = False                      # the page said it was served by an identical run
    error: str = ""
    statuses: list[str] = field(default_factory=list)


class MemorySampler:
    """The resident memory of one process, sampled on a thread: its peak since `reset`."""

    def __init__(self, pid: int | None):
        self.pid, self.peak = pid, 0
        self._lock, self._since = threading.Lock(), 0      # the resets so far: a sample taken before one is dropped
        if pid is not None:
            threading.Thread(target=self._sample, daemon=True).start()

    def reset(self) -> None:
        rss = self.rss()
        with self._lock:
            self.peak, self._since = rss, self._since + 1

    def rss(self) -> int:
        return 0 if self.pid is None else app_server.rss_bytes(self.pid)

    def _sample(self) -> None:
        while True:
            time.sleep(0.1)
            with self._lock:
                since = self._since
            try:
                rss = self.rss()
            except (OSError, RuntimeError):       # the server is gone (or a zombie without memory)
                return
            with self._lock:
                if since == self._since:
                    self.peak = max(self.peak, rss)


def cpu_seconds(server: subprocess.Popen | None) -> float:
    """The CPU time the server process has used (user + system), from /proc; 0 without one."""
    if server is None:
        return 0.0
    after_name = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")     # utime, stime


def run_args(args: argparse.Namespace, prompt: str, seed: int = 0) -> dict:
    """The /run endpoint's arguments: the preset's pair, or the vLLM server `--vllm-server` names."""
    model = (dict(preset=VLLM_SERVER, server=args.vllm_server, drafter=args.vllm_drafter) if args.vllm_server else
             dict(preset=args.preset, server="", drafter=PRESETS[args.preset].default_drafter))
    return dict(large=False, width=1280, draft="", target="", **model,
                prompt=prompt, k=args.k, adaptive_k=False, tree_nodes=0, tree_branch=3, temperature=args.temperature,
                top_p=1.0, top_k=0, max_new_tokens=args.max_new_tokens, seed=seed, draft_dtype="auto",
                target_dtype="float32", with_baseline=False)


def machine() -> dict:
    """The machine the figures come from: its CPU, kernel flags and class, cores, and its load average now
    (1, 5 and 15 minutes; engine/cli/machine.py)."""
    return {"cpu_count": os.cpu_count()} | machine_record() | provenance()


def press_run(client: Client, number: int, arguments: dict, start: threading.Event) -> ClientTimes:
    """Wait for `start`, press Run, and time what comes back."""
    times = ClientTimes(number, arguments["prompt"])
    start.wait()
    pressed = time.monotonic()
    job = client.submit(**arguments, api_name="/run")
    seen = 0
    while True:
        done = job.done()
        outputs = job.outputs()
        for output in outputs[seen:]:
            at, status = time.monotonic() - pressed, str(output[-1])
            times.statuses.append(status)
            times.first_word_s = times.first_word_s if times.first_word_s is not None else at
            if "Waiting in the queue" in status and times.queue_place_s is None:
                times.queue_place_s = at
                times.estimated_wait_s = told_wait_s(status)
            if "Waiting in the queue" not in status and times.queue_place_s is not None and times.waited_s is None:
                times.waited_s = at
            if status.startswith(("Running… step", "Done")) and times.first_step_s is None:
                times.first_step_s = at
            if status.startswith("Done"):
                times.done_s = at
            times.shared = times.shared or "Shared run" in status
        seen = len(outputs)
        if done:
            break
        time.sleep(POLL_S)
    try:
        job.result()
    except Exception as error:  # the server's refusal or failure, as the page would show it
        times.error = str(error).splitlines()[0][:200]
    if times.done_s is None and not times.error:
        times.error = f"ended without Done: {times.statuses[-1] if times.statuses else 'no update'}"
    return times


def open_page(url: str) -> Client:
    """A session as a page open before the lesson: connected (its first call made, a Stop that stops
    nothing), and patient as a browser is (httpx's default gives up on a request after 5 s)."""
    client = Client(url, verbose=False, httpx_kwargs={"timeout": REQUEST_LIMIT_S})
    client.predict(api_name="/stop")
    return client


def press_group(url: str, group: list[tuple[int, dict]], ready: Any) -> tuple[list[ClientTimes], float]:
    """One process's clients: open their pages, wait at `ready` (a barrier of every process and the
    conductor), then all press Run together; their times, and this process's CPU seconds from the press."""
    clients = [(number, open_page(url), arguments) for number, arguments in group]
    start, results = threading.Event(), {}

    def one(number: int, client: Client, arguments: dict) -> None:
        results[number] = press_run(client, number, arguments, start)

    threads = [threading.Thread(target=one, args=item) for item in clients]
    for thread in threads:
        thread.start()
    ready.wait()
    cpu = time.process_time()
    start.set()
    for thread in threads:
        thread.join()
    return [results[number] for number, _ in group], time.process_time() - cpu


@dataclass
class Press:
    """Every client's times, and what the press cost: its wall time, and the CPU seconds of the server
    (None: not started here) and of this script's clients from the press to the last Done."""

    times: list[ClientTimes]
    wall_s: float
    server_cpu_s: float | None
    clients_cpu_s: float


def press_together(url: str, arguments: list[dict], server: subprocess.Popen | None = None) -> Press:
    """One session per arguments, all pressing Run at the same moment. The sessions are spread over
    processes of CLIENTS_PER_PROCESS, as a class's browsers are spread over machines: one Python
    process reading thirty streams would delay every update it reads (its lock, not the server)."""
    numbered = list(enumerate(arguments, start=1))
    groups = [numbered[i:i + CLIENTS_PER_PROCESS] for i in range(0, len(numbered), CLIENTS_PER_PROCESS)]
    context = multiprocessing.get_context("spawn")
    with context.Manager() as manager, ProcessPoolExecutor(len(groups), mp_context=context) as pool:
        ready = manager.Barrier(len(groups) + 1)
        futures = [pool.submit(press_group, url, group, ready) for group in groups]
        ready.wait(timeout=REQUEST_LIMIT_S)
        server_cpu, started = cpu_seconds(server), time.monotonic()
        done = [future.result() for future in futures]
        wall_s = time.monotonic() - started
    return Press([times for group, _ in done for times in group], wall_s,
                 cpu_seconds(server) - server_cpu if server is not None else None, sum(cpu for _, cpu in done))


def start_server(preset: str, preload: bool = True) -> tuple[subprocess.Popen, str]:
    """app.py on `preset` in a process of its own (benchmarks/app_server.py), its output in a log file
    that a failure names; without `preload`, a page that loads no models until asked (a vLLM-backed class)."""
    log = Path(tempfile.mkdtemp(prefix="specviz-classroom-")) / "server.log"
    try:
        return app_server.start_server(("--preset", preset, *(() if preload else ("--no-preload",))), log,
                                       timeout_s=START_LIMIT_S)
    except RuntimeError as error:
        raise SystemExit(f"{error} (the server's log: {log})") from None


def class_prompts(count: int, same: bool) -> list[str]:
    examples = [example.prompt for example in load_examples()]
    if same:
        return [examples[0]] * count
    return [f"{examples[i % len(examples)]} (Student {i + 1}.)" for i in range(count)]


def spread(values: list[float | None]) -> str:
    present = sorted(v for v in values if v is not None)
    if not present:
        return "-"
    return f"median {statistics.median(present):.1f} s, max {present[-1]:.1f} s"


def report(args: argparse.Namespace, alone: ClientTimes, lone: list[ClientTimes], pupils: list[ClientTimes],
           figures: dict) -> dict:
    kind = "identical" if args.same_prompt else "distinct"
    source = f"vLLM server {args.vllm_server} ({args.vllm_drafter})" if args.vllm_server else f"preset {args.preset}"
    print(f"\n{args.clients} clients, {kind} prompts, {source}, k = {args.k}, "
          f"{args.max_new_tokens} new tokens, T = {args.temperature:g}")
    each = ", ".join(f"{t.done_s:.1f}" if t.done_s is not None else t.error for t in lone)
    print(f"one run alone (the median of {len(lone)}): first step {alone.first_step_s:.1f} s, "
          f"done {alone.done_s:.1f} s (each: {each} s)")
    print(f"{'client':>6} {'first word':>10} {'queue place':>11} {'est. wait':>9} {'waited':>6} {'first step':>10} "
          f"{'done':>6}  note")
    for times in pupils:
        cells = [times.first_word_s, times.queue_place_s, times.estimated_wait_s, times.waited_s, times.first_step_s,
                 times.done_s]
        shown = [f"{value:.1f}" if value is not None else "-" for value in cells]
        print(f"{times.client:>6} {shown[0]:>10} {shown[1]:>11} {shown[2]:>9} {shown[3]:>6} {shown[4]:>10} "
              f"{shown[5]:>6}  {'shared' if times.shared else ''}{times.error}")
    failures = [times for times in pupils if times.error]
    last_done = max((t.done_s for t in pupils if t.done_s is not None), default=None)
    waited = [t.queue_place_s for t in pupils if t.queue_place_s is not None]
    summary = {
        "clients": args.clients, "prompts": kind, "preset": None if args.vllm_server else args.preset,
        "vllm_server": args.vllm_server, "vllm_drafter": args.vllm_drafter if args.vllm_server else None, "k": args.k,
        "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
        "alone_first_step_s": alone.first_step_s, "alone_done_s": alone.done_s,
        "alone_each_done_s": [t.done_s for t in lone],
        "first_word": spread([t.first_word_s for t in pupils]), "first_step": spread([t.first_step_s for t in pupils]),
        "done": spread([t.done_s for t in pupils]), "failures": len(failures),
        "shared": sum(t.shared for t in pupils), "waited": len(waited),
        "max_queue_place_s": max(waited, default=None),
        "estimate_error": spread([abs(t.estimated_wait_s - (t.waited_s - t.queue_place_s)) for t in pupils
                                  if t.estimated_wait_s is not None and t.waited_s is not None]),
        "last_done_over_alone": last_done / alone.done_s if last_done is not None and alone.done_s else None,
        **figures}
    print(f"first word: {summary['first_word']} · first step: {summary['first_step']} · done: {summary['done']}")
    print(f"failures: {len(failures)} · served by a shared run: {summary['shared']} · waited in the queue: "
          f"{len(waited)}, told their place after at most {summary['max_queue_place_s'] or 0:.1f} s; "
          f"their first estimate of the wait was off by {summary['estimate_error']}")
    if summary["last_done_over_alone"] is not None:
        print(f"last client done after {summary['last_done_over_alone']:.2f}x one run alone")
    if figures.get("class_server_cpu_s") is not None:
        print(f"CPU time from the press to the last Done ({figures['class_wall_s']:.1f} s, {os.cpu_count()} cores): "
              f"the server {figures['class_server_cpu_s']:.1f} s, this script's clients "
              f"{figures['class_clients_cpu_s']:.1f} s (in a classroom, the students' own machines)")
    if figures.get("machine_before") is not None:
        print(f"machine: {figures['machine_before']['cpu_count']} cores, load average (1, 5, 15 min) "
              f"{figures['machine_before']['load_average']} before, {figures['machine_after']['load_average']} after")
    if figures.get("alone_peak_gb") is not None:
        print(f"server memory, peak resident: {figures['alone_peak_gb']:.2f} GB during the lone run, "
              f"{figures['class_peak_gb']:.2f} GB during the class (+{figures['class_over_alone_gb']:.2f} GB)")
    else:
        print("server memory: not measured (a server this script did not start)")
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Press Run from many clients at once and time what they see.")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=sorted(PRESETS))
    parser.add_argument("--same-prompt", action="store_true", help="every client sends the same request")
    parser.add_argument("--url", default=None, help="a running SpecViz server (default: start one)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--json", type=Path, default=None, help="also write every figure here")
    parser.add_argument("--vllm-server", default="", metavar="URL",
                        help="every run streams from this running vLLM server (the page's vLLM server source); "
                             "--k is then ignored (the server's own k)")
    parser.add_argument("--vllm-drafter", default=MODEL_DRAFTER, choices=(MODEL_DRAFTER, NGRAM_DRAFTER),
                        help="what that server speculates with: a draft model (default) or n-gram lookup")
    args = parser.parse_args(argv)
    if args.clients < 1:
        parser.error("--clients must be at least 1")
    server, url = (None, args.url) if args.url else start_server(args.preset, preload=not args.vllm_server)
    before = machine()
    memory = MemorySampler(server.pid if server is not None else None)
    try:
        print(f"server at {url}; warming up (the first run waits for the models to load)…", flush=True)
        warm = press_together(url, [run_args(args, "Warm-up: say hello.", seed=12345)]).times[0]
        if warm.error:
            raise SystemExit(f"the warm-up run failed: {warm.error}")
        memory.reset()
        prompts = class_prompts(args.clients, args.same_prompt)
        # The class's first request with other seeds: the same work (greedy, the seed changes nothing;
        # sampled, runs of the same length), but not the same run, so the class cannot share it. The
        # median of ALONE_RUNS, as a shared machine's single runs vary.
        lone = [press_together(url, [run_args(args, prompts[0], seed=ALONE_SEED + i)]).times[0]
                for i in range(ALONE_RUNS)]
        failed = [times for times in lone if times.error]
        if failed:
            raise SystemExit(f"a lone run failed: {failed[0].error}")
        alone = sorted(lone, key=lambda times: times.done_s if times.done_s is not None else float("inf"))[
            len(lone) // 2]
        alone_peak = memory.peak
        memory.reset()
        press = press_together(url, [run_args(args, prompt) for prompt in prompts], server)
        pupils = press.times
        figures = {"alone_peak_gb": alone_peak / GB if server else None,
                   "class_peak_gb": memory.peak / GB if server else None,
                   "class_over_alone_gb": (memory.peak - alone_peak) / GB if server else None,
                   "class_wall_s": press.wall_s, "class_server_cpu_s": press.server_cpu_s,
                   "class_clients_cpu_s": press.clients_cpu_s,
                   "machine_before": before, "machine_after": machine()}
        summary = report(args, alone, lone, pupils, figures)
        if args.json is not None:
            args.json.write_text(json.dumps({"summary": summary, "alone": asdict(alone),
                                             "clients": [asdict(t) for t in pupils]}, indent=1))
    finally:
        if server is not None:
            app_server.stop_server(server)


if __name__ == "__main__":
    main()
