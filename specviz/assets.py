"""Files the UI ships with: css, example prompts, and recorded traces, sweeps and races that show without a model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.formats.race import Race, RaceFormatError
from engine.formats.sweep_format import SweepFormatError
from engine.formats.sweep_reader import SweepTable
from engine.formats.trace import Trace, TraceFormatError

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
DEMO_TRACE = "qwen-coder-greedy.json"   # recorded with the default pair; preferred on the first screen
SAMPLED_TRACE = "qwen-coder-sampled.json"  # the same pair sampling (T = 0.8), offered beside it
DEMO_SWEEP = "qwen-coder.json"          # the default pair's k x temperature sweep, shown on the Explore tab
TREE_SWEEP = "qwen-coder-trees.json"    # the default pair's node budgets at one k: the Explore tab's trees vs chain
DEMO_RACE = "qwen-coder.json"           # assets/races/: the default pair's race, shown on the Race tab
LAB_PREFIX = "lab-"                     # assets/traces/lab-A.json ...: the Lab tab's stages, never the demo trace


@dataclass(frozen=True)
class Example:
    name: str
    prompt: str
    note: str = ""


@dataclass(frozen=True)
class DemoTrace:
    """The trace shown before any model loads (None when no recorded trace could be read), and
    every recorded trace the Run tab offers, by file name, the shown one first."""

    trace: Trace | None
    name: str
    problems: tuple[str, ...] = ()
    choices: tuple[tuple[str, Trace], ...] = ()

    def offered(self) -> tuple[tuple[str, Trace], ...]:
        """The recorded traces to choose from: `choices`, or the shown trace alone."""
        if self.choices:
            return self.choices
        return ((self.name, self.trace),) if self.trace is not None else ()


def load_examples(assets_dir: Path = ASSETS_DIR) -> list[Example]:
    """Example prompts from examples.json; an unreadable file gives no examples rather than no app."""
    try:
        items = json.loads((assets_dir / "examples.json").read_text(encoding="utf-8"))
        return [Example(item["name"], item["prompt"], item.get("note", "")) for item in items]
    except (OSError, ValueError, KeyError, TypeError):
        return []


def trace_paths(assets_dir: Path = ASSETS_DIR) -> list[Path]:
    """Recorded traces in assets/traces, the default pair's greedy trace first, then its sampled one."""
    paths = sorted(path for path in (assets_dir / "traces").glob("*.json") if not path.name.startswith(LAB_PREFIX))
    return sorted(paths, key=lambda path: (path.name != DEMO_TRACE, path.name != SAMPLED_TRACE))


def load_demo_trace(assets_dir: Path = ASSETS_DIR) -> DemoTrace:
    """Every recorded trace that parses (the first is shown); the others' problems are kept for the status line."""
    problems, choices = [], []
    for path in trace_paths(assets_dir):
        try:
            choices.append((path.name, Trace.load(path)))
        except (OSError, TraceFormatError) as error:
            problems.append(f"{path.name}: {error}")
    if not choices:
        return DemoTrace(None, "", tuple(problems))
    return DemoTrace(choices[0][1], choices[0][0], tuple(problems), tuple(choices))


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


def load_tree_sweep(assets_dir: Path = ASSETS_DIR) -> RecordedSweep:
    """The default pair's sweep over node budgets (assets/sweeps/TREE_SWEEP), or None with the problem."""
    path = assets_dir / "sweeps" / TREE_SWEEP
    try:
        return RecordedSweep(SweepTable.load(path), path.name)
    except (OSError, SweepFormatError) as error:
        return RecordedSweep(None, "", (f"{path.name}: {getattr(error, 'strerror', None) or error}",))


def load_recorded_race(assets_dir: Path = ASSETS_DIR) -> tuple[Race | None, str]:
    """The default pair's race from assets/races, else the first other race that parses, and its file name."""
    paths = sorted((assets_dir / "races").glob("*.json"), key=lambda path: (path.name != DEMO_RACE, path.name))
    for path in paths:
        try:
            return Race.load(path), path.name
        except (OSError, RaceFormatError):
            continue
    return None, ""


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
