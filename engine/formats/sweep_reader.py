"""A k x temperature sweep (`specviz.sweep/1`, see engine.formats.sweep_format) read back for the UI.

Strictly, since a person may upload any file: one clear SweepFormatError naming
the bad field. Every number must lie where a recorded sweep can put it (`RANGES`: k, node
budgets and temperatures within SpecConfig's ranges, rates in [0, 1], speeds, times and costs
never negative, a verify forward's cost above 0, no more positions than the cell's k), so
whatever is accepted can be drawn (tests/test_upload_walk.py walks every field). The whole
document is kept for download. Torch-free.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine.config import MAX_K, MAX_SEED, MAX_TEMPERATURE, MAX_TREE_NODES
from engine.formats.json_document import parse_json
from engine.formats.sweep_format import MAX_SWEEP_BYTES, SWEEP_SCHEMA, SweepCell, SweepFormatError, cells_to_csv, ratio
from engine.formats.sweep_meta import check_meta, check_text
from engine.formats.trace_fields import MAX_WHOLE, show

OPTIONAL = {"acceptance_rate", "mean_accepted_length", "estimated_alpha", "cost_ratio",
            "predicted_tokens_per_step", "predicted_speedup", "draft_cost", "verify_cost"}
LATER = {field.name for field in fields(SweepCell) if field.default is None}   # absent from older files
NOT_NEGATIVE = (0.0, None)
RANGES: dict[str, tuple[float | None, float | None]] = {   # a number's (least, most); None: no bound
    "temperature": (0.0, MAX_TEMPERATURE), "acceptance_rate": (0.0, 1.0), "estimated_alpha": (0.0, 1.0),
    "per_position_acceptance": (0.0, 1.0)}
POSITIVE = {"verify_cost"}               # the i.i.d. model divides by k c + v: a verify forward costs something


@dataclass(frozen=True)
class RunPoint:
    """One run of the sweep (one prompt and seed at one cell): the spread behind a cell's mean."""

    k: int
    temperature: float
    prompt_index: int
    seed: int
    mean_accepted_length: float | None          # tokens per step, bonus included
    speedup: float | None                       # this run's tokens/s over its target-only baseline's
    tree_nodes: int = 0                         # the node budget (0 = a chain; absent in older files)
    tokens_per_s: float | None = None
    verify_cost: float | None = None            # verify_ms / target_token_ms (None where not recorded)
    target_token_ms: float | None = None        # one target-only decoding forward, its prefill left out


@dataclass(frozen=True)
class TheoryFit:
    """The i.i.d. model's parameters at one temperature: means over that temperature's cells."""

    alpha: float
    cost_ratio: float | None                    # draft token / verify forward (older sweeps' only cost)
    draft_cost: float | None = None             # draft token / one target decoding forward


@dataclass(frozen=True)
class SweepTable:
    """A checked sweep document: its cells, its meta and the document itself."""

    cells: tuple[SweepCell, ...]
    meta: dict[str, Any]
    document: dict[str, Any]                    # the whole document, runs included
    runs: tuple[RunPoint, ...] = ()             # every run behind the cells (none in a document without runs)

    def meta_list(self, key: str) -> list[Any]:
        """The meta's list under `key` (prompts, seeds, ks, ...), [] when it is missing or not a list."""
        value = self.meta.get(key)
        return value if isinstance(value, list) else []

    def runs_at(self, k: int, temperature: float, tree_nodes: int = 0) -> list[RunPoint]:
        """The runs averaged into the cell (k, temperature, tree_nodes), by prompt then seed."""
        return sorted((r for r in self.runs if r.k == k and r.temperature == temperature
                       and r.tree_nodes == tree_nodes),
                      key=lambda r: (r.prompt_index, r.seed))

    @property
    def ks(self) -> list[int]:
        return sorted({cell.k for cell in self.cells})

    @property
    def temperatures(self) -> list[float]:
        return sorted({cell.temperature for cell in self.cells})

    @property
    def num_runs(self) -> int:
        return sum(cell.runs for cell in self.cells)

    @property
    def tree_budgets(self) -> list[int]:
        """The node budgets swept (0 = chains); [0] for a sweep of chains only."""
        return sorted({cell.tree_nodes for cell in self.cells})

    def cell(self, k: int, temperature: float, tree_nodes: int = 0) -> SweepCell | None:
        return next((c for c in self.cells if c.k == k and c.temperature == temperature
                     and c.tree_nodes == tree_nodes), None)

    def at(self, temperature: float, tree_nodes: int = 0) -> list[SweepCell]:
        """The cells at one temperature and node budget (0: the chains), by k."""
        return sorted((c for c in self.cells if c.temperature == temperature and c.tree_nodes == tree_nodes),
                      key=lambda c: c.k)

    def best_k(self, temperature: float) -> int | None:
        """The k with the highest measured speedup at `temperature` (the smaller k on a tie)."""
        cells = self.at(temperature)
        return max(cells, key=lambda c: (c.speedup, -c.k)).k if cells else None

    def theory(self, temperature: float) -> TheoryFit | None:
        """a and c for the model curves at `temperature`; None without any estimate of a (n-gram drafts)."""
        cells = self.at(temperature)
        alphas = [c.estimated_alpha for c in cells if c.estimated_alpha is not None]
        costs = [c.cost_ratio for c in cells if c.cost_ratio is not None]
        drafts = [c.draft_cost for c in cells if c.draft_cost is not None]
        if not alphas:
            return None
        return TheoryFit(statistics.fmean(alphas), statistics.fmean(costs) if costs else None,
                         statistics.fmean(drafts) if drafts else None)

    def to_json(self) -> str:
        return json.dumps(self.document, indent=1)

    def to_csv(self) -> str:
        """One row per cell: engine.formats.sweep_format.cells_to_csv, the CSV the command line writes."""
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
        check_text(data)
        meta = data.get("meta", {})
        if not isinstance(meta, dict):
            raise SweepFormatError("meta: expected an object")
        check_meta(meta)
        items = data.get("cells")
        if not isinstance(items, list):
            raise SweepFormatError("cells: expected a list")
        cells = tuple(_parse_cell(item, f"cells[{i}]") for i, item in enumerate(items))
        seen = {(c.k, c.temperature, c.tree_nodes) for c in cells}
        if len(seen) != len(cells):
            raise SweepFormatError("cells: the same (k, temperature, tree_nodes) appears twice")
        items = data.get("runs", [])
        if not isinstance(items, list):
            raise SweepFormatError("runs: expected a list")
        return cls(cells, meta, data, tuple(_parse_run(item, f"runs[{i}]") for i, item in enumerate(items)))

    @classmethod
    def load(cls, path: str | Path) -> "SweepTable":
        return cls.from_json(Path(path).read_bytes())


def _parse_cell(item: Any, where: str) -> SweepCell:
    if not isinstance(item, dict):
        raise SweepFormatError(f"{where}: expected an object")
    values: dict[str, Any] = {}
    for field in fields(SweepCell):
        name = field.name
        if name == "tree_nodes":
            values[name] = _tree_nodes(item, where)
            continue
        if name not in item:
            if name in LATER:
                continue
            raise SweepFormatError(f"{where}.{name}: missing")
        value = item[name]
        if name == "per_position_acceptance":
            if not isinstance(value, list):
                raise SweepFormatError(f"{where}.{name}: expected a list")
            values[name] = tuple(_number(v, f"{where}.{name}[{i}]", optional=True, name=name)
                                 for i, v in enumerate(value))
        elif name in ("k", "runs"):
            values[name] = _whole(value, f"{where}.{name}", least=1, most=MAX_K if name == "k" else MAX_WHOLE)
        else:
            values[name] = _number(value, f"{where}.{name}", optional=name in OPTIONAL, name=name)
    positions = len(values["per_position_acceptance"])
    if positions > values["k"]:
        raise SweepFormatError(f"{where}.per_position_acceptance: {positions} positions, more than the cell's k "
                               f"({values['k']})")
    return SweepCell(**values)


def _parse_run(item: Any, where: str) -> RunPoint:
    """A run's identity and the values the Explore tab spreads out; its other fields stay in the document."""
    if not isinstance(item, dict):
        raise SweepFormatError(f"{where}: expected an object")
    whole = {"tree_nodes": _tree_nodes(item, where)}
    for name in ("k", "prompt_index", "seed"):
        whole[name] = _whole(item.get(name), f"{where}.{name}", least=1 if name == "k" else 0,
                             most={"k": MAX_K, "prompt_index": MAX_WHOLE, "seed": MAX_SEED}[name])
    if "temperature" not in item:
        raise SweepFormatError(f"{where}.temperature: missing")
    rates = {name: _number(item.get(name), f"{where}.{name}", optional=True, name=name)
             for name in ("tokens_per_s", "baseline_tokens_per_s", "mean_accepted_length", "verify_ms",
                          "target_token_ms")}
    speed, baseline = rates["tokens_per_s"], rates["baseline_tokens_per_s"]
    verify, one_token = rates["verify_ms"], rates["target_token_ms"]
    return RunPoint(temperature=_number(item["temperature"], f"{where}.temperature", optional=False,
                                        name="temperature"), **whole,
                    mean_accepted_length=rates["mean_accepted_length"],
                    speedup=ratio(speed, baseline), tokens_per_s=speed, verify_cost=ratio(verify, one_token),
                    target_token_ms=one_token)


def _tree_nodes(item: dict[str, Any], where: str) -> int:
    """The node budget of a cell or run: 0 (a chain) where absent, as in sweeps from before token trees."""
    return _whole(item.get("tree_nodes", 0), f"{where}.tree_nodes", least=0, most=MAX_TREE_NODES)


def _whole(value: Any, where: str, least: int, most: int) -> int:
    """A whole number (not a bool) from `least` to `most`."""
    if not isinstance(value, int) or isinstance(value, bool) or not least <= value <= most:
        raise SweepFormatError(f"{where}: expected a whole number from {least} to {most}, got {show(value)}")
    return value


def _number(value: Any, where: str, optional: bool, name: str) -> float | None:
    """A finite number in the range of the field `name` (RANGES; never negative unless listed; above 0
    for POSITIVE); None (or NaN, which Python's json writes for a missing mean) where allowed."""
    if optional and (value is None or (isinstance(value, float) and math.isnan(value))):
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SweepFormatError(f"{where}: expected a number, got {show(value)}")
    least, most = RANGES.get(name, NOT_NEGATIVE)
    if (least is not None and value < least) or (most is not None and value > most) or (
            name in POSITIVE and value <= 0):
        bounds = ("above 0" if name in POSITIVE else f">= {least:g}" if most is None
                  else f"from {least:g} to {most:g}")
        raise SweepFormatError(f"{where}: expected a number {bounds}, got {show(value)}")
    return float(value)
