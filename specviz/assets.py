"""Files the UI ships with: css, example prompts, and recorded traces that replay without a model."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.trace import Trace, TraceFormatError

ASSETS_DIR = Path(__file__).resolve().parent.parent / "assets"
DEMO_TRACE = "qwen-coder-greedy.json"   # recorded with the default pair; preferred on the first screen


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
    paths = sorted((assets_dir / "traces").glob("*.json"))
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


def read_css(assets_dir: Path = ASSETS_DIR) -> str:
    try:
        return (assets_dir / "specviz.css").read_text(encoding="utf-8")
    except OSError:
        return ""
