"""Soak: many runs through a real SpecViz server, counting failures and watching its memory.

    python tests/soak.py [--runs 200] [--sessions 8] [--max-new-tokens 32]

Starts `python app.py --preset tiny-random` on a free loopback port (a process of its own,
so its resident memory is the server's alone) and drives it with gradio_client from a few
sessions in turn, the way a classroom does: a handful of users, many runs each. Runs vary
between greedy and sampled, k from 1 to 8, model and n-gram drafters; every tenth has the
target-only comparison, one in ten is stopped halfway, one in ten sends bad input (a clear
error is the expected answer), and every fifth exports its session's trace and checks it.
VmRSS is read from /proc/<pid>/status before the first run, after the warm-up runs, after
every run (peak) and at the end. Exit code 1 when any run failed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from gradio_client import Client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.app_server import rss_bytes, start_server, stop_server  # noqa: E402
from engine.formats.trace import Trace  # noqa: E402

PROMPTS = ("def fibonacci(n):", "The quick brown fox", "SELECT name FROM users WHERE", "Once upon a time, a",
           "import numpy as np\n", "abc abc abc abc")
BAD_INPUTS = ((dict(k="four"), "k must be a number"), (dict(prompt="   "), "The prompt is empty"),
              (dict(temperature=5.0), "temperature must be between 0 and 2"),
              (dict(max_new_tokens=10_000), "max new tokens must be a whole number from 1 to 512"))


@dataclass
class SoakReport:
    runs: int
    completed: int = 0              # finished with "Done"
    stopped: int = 0                # stopped halfway on request
    refused: int = 0                # bad input, answered with the expected clear error
    exported: int = 0               # traces fetched and checked
    failures: list[str] = field(default_factory=list)
    rss_start_mb: float = 0.0       # server up, no run yet (torch not imported)
    rss_warm_mb: float = 0.0        # after the warm-up runs
    rss_peak_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_mb: list[float] = field(default_factory=list)      # after each run
    run_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0

    def summary(self) -> str:
        p50 = statistics.median(self.run_s) if self.run_s else 0.0
        p95 = sorted(self.run_s)[int(0.95 * (len(self.run_s) - 1))] if self.run_s else 0.0
        lines = [f"runs {self.runs}: {self.completed} done, {self.stopped} stopped, {self.refused} refused as "
                 f"expected, {self.exported} traces exported and checked, {len(self.failures)} failures",
                 f"server RSS MB: start {self.rss_start_mb:.0f}, after warm-up {self.rss_warm_mb:.0f}, "
                 f"peak {self.rss_peak_mb:.0f}, end {self.rss_end_mb:.0f}",
                 f"run latency s: median {p50:.2f}, p95 {p95:.2f}; wall {self.wall_s:.0f} s"]
        if self.rss_mb:
            every = max(1, len(self.rss_mb) // 10)
            lines.append("RSS MB by run: " + ", ".join(f"{i + 1}: {self.rss_mb[i]:.0f}"
                                                        for i in range(every - 1, len(self.rss_mb), every)))
        return "\n".join(lines + [f"FAILED {failure}" for failure in self.failures])


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid` in MB."""
    return rss_bytes(pid) / 2**20


def run_args(index: int, max_new_tokens: int) -> dict:
    """The controls of run `index`: prompt, seed and settings vary from run to run."""
    return dict(large=False, width=1280, preset="tiny-random", draft="", target="",
                drafter="ngram" if index % 6 == 4 else "model", prompt=f"{PROMPTS[index % len(PROMPTS)]} #{index}",
                k=1 + index % 8, adaptive_k=index % 9 == 2, temperature=(0.0, 0.7, 1.0)[index % 3], top_p=1.0,
                top_k=0, max_new_tokens=max_new_tokens, seed=index, draft_dtype="float32", target_dtype="float32",
                with_baseline=index % 10 == 5)


def one_run(client: Client, index: int, max_new_tokens: int, report: SoakReport, last_prompt: dict) -> None:
    """Run `index` through `client`'s session; appends to report.failures on anything unexpected."""
    args = run_args(index, max_new_tokens)
    kind = index % 10
    if kind == 3:                                   # bad input: the answer must be the clear error
        changes, message = BAD_INPUTS[index // 10 % len(BAD_INPUTS)]
        try:
            client.predict(**(args | changes), api_name="/run")
        except Exception as error:  # gradio_client raises AppError carrying the gr.Error message
            if message in str(error):
                report.refused += 1
                return
            report.failures.append(f"run {index}: expected {message!r}, got {type(error).__name__}: {error}")
            return
        report.failures.append(f"run {index}: bad input {changes} was accepted")
        return
    if kind == 7:                                   # stopped halfway
        args["max_new_tokens"] = max_new_tokens * 4
        job = client.submit(**args, api_name="/run")
        deadline = time.monotonic() + 60
        while len(job.outputs()) < 2 and not job.done() and time.monotonic() < deadline:
            time.sleep(0.01)
        client.predict(api_name="/stop")
        status = job.result(timeout=120)[-1]
    else:
        status = client.predict(**args, api_name="/run")[-1]
    if status.startswith("Stopped: the "):
        report.stopped += 1
    elif status.startswith("Done"):
        report.completed += 1
    else:
        report.failures.append(f"run {index}: unexpected final status {status[:120]!r}")
        return
    last_prompt[client.session_hash] = args["prompt"]
    if index % 5 == 4:
        check_export(client, args, report, index)


def check_export(client: Client, args: dict, report: SoakReport, index: int) -> None:
    paths = client.predict(api_name="/export")
    trace = Trace.load(next(path for path in paths if Path(path).name == "specviz-trace.json"))
    problems = []
    if trace.prompt.text != args["prompt"] or trace.config.seed != args["seed"]:
        problems.append(f"exported the trace of {trace.prompt.text!r} seed {trace.config.seed}")
    if Trace.from_json(trace.to_json()) != trace:
        problems.append("the trace does not round-trip through JSON")
    if trace.complete and trace.summary.new_tokens > args["max_new_tokens"]:
        problems.append(f"{trace.summary.new_tokens} new tokens, over {args['max_new_tokens']}")
    for path in paths:
        Path(path).unlink(missing_ok=True)          # keep the client's download folder small
    if problems:
        report.failures.append(f"run {index}: " + "; ".join(problems))
    else:
        report.exported += 1


def run_soak(runs: int = 200, sessions: int = 8, max_new_tokens: int = 32, warmup: int | None = None,
             log: Path | None = None) -> SoakReport:
    """Start a server, make `runs` runs through it, stop it; the report of what happened."""
    log = log or Path(tempfile.mkdtemp(prefix="specviz-soak-")) / "server.log"
    warmup = warmup if warmup is not None else max(5, runs // 10)
    report = SoakReport(runs=runs)
    started = time.monotonic()
    process, url = start_server(("--preset", "tiny-random", "--device", "cpu"), log)
    try:
        report.rss_start_mb = report.rss_peak_mb = rss_mb(process.pid)
        downloads = Path(tempfile.mkdtemp(prefix="specviz-soak-downloads-"))
        clients = [Client(url, verbose=False, download_files=str(downloads)) for _ in range(sessions)]
        last_prompt: dict[str, str] = {}
        for index in range(runs):
            run_started = time.monotonic()
            try:
                one_run(clients[index % sessions], index, max_new_tokens, report, last_prompt)
            except Exception as error:  # any other exception is a failed run: record it and go on
                report.failures.append(f"run {index}: {type(error).__name__}: {str(error)[:200]}")
            report.run_s.append(time.monotonic() - run_started)
            rss = rss_mb(process.pid)
            report.rss_mb.append(rss)
            report.rss_peak_mb = max(report.rss_peak_mb, rss)
            if index == warmup - 1:
                report.rss_warm_mb = rss
            if process.poll() is not None:
                report.failures.append(f"the server died after run {index}")
                break
        report.rss_end_mb = rss_mb(process.pid)
    finally:
        stop_server(process)
    report.wall_s = time.monotonic() - started
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=8, help="clients (browser sessions) taking turns")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--log", type=Path, help="server log file (default: a temporary folder)")
    args = parser.parse_args(argv)
    report = run_soak(args.runs, args.sessions, args.max_new_tokens, log=args.log)
    print(report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
