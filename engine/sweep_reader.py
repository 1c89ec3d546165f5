"""A k x temperature sweep (`specviz.sweep/1`, see engine.sweep_format) read back for the UI.

Strictly, since a person may upload any file: one clear SweepFormatError naming
the bad field. The whole document is kept for download. Torch-free.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine.json_document import parse_json
from engine.sweep_format import MAX_SWEEP_BYTES, SWEEP_SCHEMA, SweepCell, SweepFormatError, cells_to_csv

OPTIONAL = {"acceptance_rate", "mean_accepted_length", "estimated_alpha", "cost_ratio",
            "predicted_tokens_per_step", "predicted_speedup"}


@dataclass(frozen=True)
class TheoryFit:
    """The i.i.d. model's parameters at one temperature: means over that temperature's cells."""

    alpha: float
    cost_ratio: float | None


@dataclass(frozen=True)
class SweepTable:
    """A checked sweep document: its cells, its meta and the document itself."""

    cells: tuple[SweepCell, ...]
    meta: dict[str, Any]
    document: dict[str, Any]                    # the whole document, runs included

    @property
    def ks(self) -> list[int]:
        return sorted({cell.k for cell in self.cells})

    @property
    def temperatures(self) -> list[float]:
        return sorted({cell.temperature for cell in self.cells})

    @property
    def num_runs(self) -> int:
        return sum(cell.runs for cell in self.cells)

    def cell(self, k: int, temperature: float) -> SweepCell | None:
        return next((c for c in self.cells if c.k == k and c.temperature == temperature), None)

    def at(self, temperature: float) -> list[SweepCell]:
        """The cells at one temperature, by k."""
        return sorted((c for c in self.cells if c.temperature == temperature), key=lambda c: c.k)

    def best_k(self, temperature: float) -> int | None:
        """The k with the highest measured speedup at `temperature` (the smaller k on a tie)."""
        cells = self.at(temperature)
        return max(cells, key=lambda c: (c.speedup, -c.k)).k if cells else None

    def theory(self, temperature: float) -> TheoryFit | None:
        """a and c for the model curves at `temperature`; None without any estimate of a (n-gram drafts)."""
        cells = self.at(temperature)
        alphas = [c.estimated_alpha for c in cells if c.estimated_alpha is not None]
        costs = [c.cost_ratio for c in cells if c.cost_ratio is not None]
        if not alphas:
            return None
        return TheoryFit(statistics.fmean(alphas), statistics.fmean(costs) if costs else None)

    def to_json(self) -> str:
        return json.dumps(self.document, indent=1)

    def to_csv(self) -> str:
        """One row per cell: engine.sweep_format.cells_to_csv, the CSV the command line writes."""
        return cells_to_csv(self.cells)

    @classmethod
    def from_json(cls, text: str | bytes) -> "SweepTable":
        return cls.from_dict(parse_json(text, MAX_SWEEP_BYTES, SweepFormatError, "sweep"))

    @classmethod
    def from_dict(cls, data: Any) -> "SweepTable":
        if not isinstance(data, dict):
            raise SweepFormatError("expected a JSON object at the top level")
        if data.get("schema") != SWEEP_SCHEMA:
            raise SweepFormatError(f"schema is {data.get('schema')!r}, expected {SWEEP_SCHEMA!r}")
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise SweepFormatError("meta: expected an object")
        items = data.get("cells")
        if not isinstance(items, list):
            raise SweepFormatError("cells: expected a list")
        cells = tuple(_parse_cell(item, f"cells[{i}]") for i, item in enumerate(items))
        seen = {(c.k, c.temperature) for c in cells}
        if len(seen) != len(cells):
            raise SweepFormatError("cells: the same (k, temperature) appears twice")
        return cls(cells, meta, data)

    @classmethod
    def load(cls, path: str | Path) -> "SweepTable":
        return cls.from_json(Path(path).read_bytes())


def _parse_cell(item: Any, where: str) -> SweepCell:
    if not isinstance(item, dict):
        raise SweepFormatError(f"{where}: expected an object")
    values: dict[str, Any] = {}
    for field in fields(SweepCell):
        name = field.name
        if name not in item:
            raise SweepFormatError(f"{where}.{name}: missing")
        value = item[name]
        if name == "per_position_acceptance":
            if not isinstance(value, list):
                raise SweepFormatError(f"{where}.{name}: expected a list")
            values[name] = tuple(_number(v, f"{where}.{name}[{i}]", optional=True) for i, v in enumerate(value))
        elif name in ("k", "runs"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SweepFormatError(f"{where}.{name}: expected a whole number >= 1, got {value!r}")
            values[name] = value
        else:
            values[name] = _number(value, f"{where}.{name}", optional=name in OPTIONAL)
    if values["temperature"] < 0:
        raise SweepFormatError(f"{where}.temperature: must be >= 0, got {values['temperature']!r}")
    return SweepCell(**values)


def _number(value: Any, where: str, optional: bool) -> float | None:
    """A finite number; None (or NaN, which Python's json writes for a missing mean) where allowed."""
    if optional and (value is None or (isinstance(value, float) and math.isnan(value))):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SweepFormatError(f"{where}: expected a number, got {value!r}")
    return float(value)
