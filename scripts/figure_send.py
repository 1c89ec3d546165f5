"""What one redraw of the Run tab costs the server: its figures built and written as the JSON gr.Plot sends.

For each bundled trace (specviz/assets/traces) and each screen (a laptop, a phone, a projector with large text),
the Run tab's views are rendered as the page's last update of a run renders them (`specviz.run.views.render`), and
every figure is written as Plotly JSON two ways, alternated in one run:

- `dicts`: as SpecViz sends them (specviz/figures/common.py: the dicts written by `plotly.io.to_json` without
  validation);
- `validated`: as plotly.py's `go.Figure` of the same dicts is built and written (what gr.Plot sent before: every
  property validated as the figure is built, then copied again to be written).

It prints each trace's median milliseconds a redraw both ways and their ratio, and with --out saves them as JSON with
the machine's CPU flags and the commit. The models are not involved: this is the part of a live run's time that
the page's drawing takes from the two cores the models run on.

    python scripts/figure_send.py --out benchmarks/data/figure-send-<date>.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import plotly.graph_objects as go  # noqa: E402  (after the path: a script run from anywhere)

from engine.cli.machine import machine_record, provenance  # noqa: E402
from engine.formats.trace import Trace  # noqa: E402
from specviz.assets import ASSETS_DIR  # noqa: E402
from specviz.figures.common import Figure  # noqa: E402
from specviz.run.views import render  # noqa: E402
from specviz.style import FigureStyle  # noqa: E402

SCREENS = {"laptop": (False, 1440), "phone": (False, 390), "projector": (True, 1280)}     # (large text, width px)


def figures_of(trace: Trace, style: FigureStyle) -> list[Figure]:
    """The Run tab's figures for `trace` (a tree run's draft tree among them), freshly built."""
    views = render(trace, "", style=style)
    return [value for name in views.names() if isinstance(value := getattr(views, name), Figure)]


def as_dicts(trace: Trace, style: FigureStyle) -> int:
    """One redraw as SpecViz sends it; the bytes written (so nothing is optimised away)."""
    return sum(len(figure.to_json()) for figure in figures_of(trace, style))


def validated(trace: Trace, style: FigureStyle) -> int:
    """One redraw as plotly.py's validated figures of the same dicts, written as gr.Plot wrote them."""
    return sum(len(go.Figure(data=figure.traces, layout=figure.spec).to_json()) for figure in figures_of(trace, style))


def timed(redraw: Callable[[], int], times: list[float]) -> None:
    """Run `redraw` once and add its milliseconds to `times`."""
    start = time.perf_counter()
    redraw()
    times.append(1000 * (time.perf_counter() - start))


def measure(trace: Trace, style: FigureStyle, repeats: int) -> dict[str, Any]:
    """The median of `repeats` redraws each way, alternated (after one of each to warm up)."""
    ways = {"dicts": as_dicts, "validated": validated}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for way in ways.values():
        way(trace, style)
    for _ in range(repeats):
        for name, way in ways.items():
            timed(lambda: way(trace, style), times[name])
    medians = {name: round(statistics.median(values), 2) for name, values in times.items()}
    return {"figures": len(figures_of(trace, style)), **{f"{name}_ms": value for name, value in medians.items()},
            "validated_over_dicts": round(medians["validated"] / medians["dicts"], 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="redraws each way per trace and screen (median)")
    parser.add_argument("--out", type=Path, help="save the results here as JSON")
    args = parser.parse_args(argv)
    rows = []
    for path in sorted((ASSETS_DIR / "traces").glob("*.json")):
        trace = Trace.load(path)
        for screen, (large, width) in SCREENS.items():
            row = {"trace": path.name, "steps": len(trace.steps), "screen": screen,
                   **measure(trace, FigureStyle.for_screen(large, width), args.repeats)}
            rows.append(row)
            print(f"{path.name:40} {screen:9} {row['steps']:3} steps {row['figures']} figures: "
                  f"{row['dicts_ms']:7.2f} ms as dicts, {row['validated_ms']:7.2f} ms validated "
                  f"({row['validated_over_dicts']}x)", flush=True)
    ratios = sorted(row["validated_over_dicts"] for row in rows)
    print(f"validated over dicts: median {statistics.median(ratios)}x, from {ratios[0]}x to {ratios[-1]}x")
    if args.out:
        document = {"schema": "specviz.figure-send/1", "what": __doc__.split("\n\n")[0], **provenance(argv),
                    "machine": machine_record(), "repeats": args.repeats, "rows": rows,
                    "median_ratio": statistics.median(ratios), "lowest_ratio": ratios[0], "highest_ratio": ratios[-1]}
        args.out.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
