"""Files the UI ships with: css, example prompts, and recorded traces and sweeps that show without a model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.sweep_format import SweepFormatError
from engine.sweep_reader import SweepTable
from engine.trace import Trace, TraceFormatError

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
DEMO_TRACE = "qwen-coder-greedy.json"   # recorded with the default pair; preferred on the first screen
DEMO_SWEEP = "qwen-coder.json"          # the default pair's k x temperature sweep, shown on the Explore tab
LAB_PREFIX = "lab-"                     # assets/traces/lab-A.json ...: the Lab tab's stages, never the demo trace


@dataclass(frozen=True)
class Example:
    name: str
    prompt: str
    note: str = ""


@dataclass(frozen=True)
class DemoTrace:
    """The trace shown before any model loads (None when no recorded trace could be read)."""

    trace: Trace | None
    name: str
    problems: tuple[str, ...] = ()


def load_examples(assets_dir: Path = ASSETS_DIR) -> list[Example]:
    """Example prompts from examples.json; an unreadable file gives no examples rather than no app."""
    try:
        items = json.loads((assets_dir / "examples.json").read_text(encoding="utf-8"))
        return [Example(item["name"], item["prompt"], item.get("note", "")) for item in items]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def trace_paths(assets_dir: Path = ASSETS_DIR) -> list[Path]:
    """Recorded traces in assets/traces, the default pair's greedy trace first."""
    paths = sorted(path for path in (assets_dir / "traces").glob("*.json") if not path.name.startswith(LAB_PREFIX))
    return sorted(paths, key=lambda path: path.name != DEMO_TRACE)


def load_demo_trace(assets_dir: Path = ASSETS_DIR) -> DemoTrace:
    """The first recorded trace that parses; the others' problems are kept for the status line."""
    problems = []
    for path in trace_paths(assets_dir):
        try:
            return DemoTrace(Trace.load(path), path.name, tuple(problems))
        except (OSError, TraceFormatError) as error:
            problems.append(f"{path.name}: {error}")
    return DemoTrace(None, "", tuple(problems))


@dataclass(frozen=True)
class RecordedSweep:
    """The sweep shown before anything runs (None when no recorded sweep could be read)."""

    table: SweepTable | None
    name: str
    problems: tuple[str, ...] = ()


def load_recorded_sweep(assets_dir: Path = ASSETS_DIR) -> RecordedSweep:
    """The default pair's sweep from assets/sweeps, else the first other sweep that parses."""
    paths = sorted((assets_dir / "sweeps").glob("*.json"), key=lambda path: (path.name != DEMO_SWEEP, path.name))
    problems = []
    for path in paths:
        try:
            return RecordedSweep(SweepTable.load(path), path.name, tuple(problems))
        except (OSError, SweepFormatError) as error:
            problems.append(f"{path.name}: {error}")
    return RecordedSweep(None, "", tuple(problems))


def load_lab_traces(keys: tuple[str, ...], assets_dir: Path = ASSETS_DIR) -> dict[str, Trace]:
    """The recorded lab traces assets/traces/lab-<key>.json that exist and parse, by key."""
    traces = {}
    for key in keys:
        try:
            traces[key] = Trace.load(assets_dir / "traces" / f"{LAB_PREFIX}{key}.json")
        except (OSError, TraceFormatError):
            continue
    return traces


def read_css(assets_dir: Path = ASSETS_DIR) -> str:
    try:
        return (assets_dir / "specviz.css").read_text(encoding="utf-8")
    except OSError:
        return ""
