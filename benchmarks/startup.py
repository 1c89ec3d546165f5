"""Warm start and memory, measured in a fresh process: load a preset's fast pair (the app's
default) from the converted-weight cache, run its first step, and report the seconds to
each point and the peak resident memory (VmHWM: file-backed pages mapped into the process
count too). A fresh process, because the benchmark's own process holds several pairs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
started = time.perf_counter()
from engine import SpecConfig, SpeculativeEngine, load_pair
imported = time.perf_counter()
pair = load_pair(sys.argv[1], draft_dtype="auto")          # what the app loads
loaded = time.perf_counter()
SpeculativeEngine(pair).start("Write hello world in Python.", SpecConfig(max_new_tokens=4)).step()
stepped = time.perf_counter()
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
print(json.dumps({"import_s": imported - started, "load_s": loaded - imported, "first_step_s": stepped - loaded,
                  "to_first_step_s": stepped - started, "peak_rss_gb": int(status["VmHWM"].split()[0]) / 1024 ** 2,
                  "target_kernel": pair.target_kernel, "draft_kernel": pair.draft_kernel}))
"""


def measure_startup(preset: str) -> dict:
    """The fresh process's figures; {"error": ...} when it could not run (e.g. no /proc)."""
    if not Path("/proc/self/status").exists():
        return {"error": "peak memory is read from /proc/self/status, which this OS does not have"}
    result = subprocess.run([sys.executable, "-c", CHILD, preset], cwd=ROOT, capture_output=True, text=True, timeout=900)
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    if result.returncode != 0 or not lines:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the startup measurement failed: {tail}"}
    return json.loads(lines[-1])


def startup_line(startup: dict) -> str:
    if "error" in startup:
        return startup["error"]
    return (f"Warm start (fresh process, converted weights cached): {startup['to_first_step_s']:.1f} s to the first "
            f"step (import {startup['import_s']:.1f} s, load {startup['load_s']:.1f} s, first step "
            f"{startup['first_step_s']:.1f} s); peak resident memory {startup['peak_rss_gb']:.1f} GB; "
            f"kernels: target {startup['target_kernel']}, draft {startup['draft_kernel']}.")
