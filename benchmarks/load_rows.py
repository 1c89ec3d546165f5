"""bench.py --load: the load sweep (engine/load/, docs/architecture.md §11) on the preset's pair served by vLLM, with
speculation and then without, saved beside the results as <out>.load.json (specviz.load/1, the file Explore's
"Speculation under load" uploads) and summarised in the results' "load" part: per N the aggregate tokens/s with and
without speculation, their ratio, the batch cost model's predicted ratio, and where each says speculation stops
paying. The rows are printed under bench's table: they are a batch's speeds, not one request's, and never mix
with its columns. Torch-free."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from engine.config import SpecConfig
from engine.formats.load_format import save_load
from engine.load.batch_model import document_model
from engine.load.stats import aggregate_ratios, measured_crossover
from engine.load.sweep import DEFAULT_PROMPTS, Served, measure_servers, stopped, sweep_document

def run_load(served: Served, levels: Sequence[int], config: SpecConfig, out: Path, machine: dict[str, Any],
             provenance: dict[str, str], report: Callable[[str], None]) -> dict[str, Any]:
    """Measure the sweep, save its document as `out`, return the results' "load" part."""
    records = measure_servers(None, served, served.method, DEFAULT_PROMPTS, levels, config, report)
    document = sweep_document(records, served.target, served.draft, served.method, served.dtype, DEFAULT_PROMPTS,
                              levels, config, machine, provenance)
    save_load(document, out)
    return load_summary(document, out.name)


def load_summary(document: dict[str, Any], file: str) -> dict[str, Any]:
    """Per N: both servers' aggregate tokens/s, their ratio and the model's; the two crossovers (None: none)."""
    spec, plain = document["servers"]
    model = document_model(document)
    ratios = aggregate_ratios(document)
    rows = []
    for with_level, without_level in zip(spec["levels"], plain["levels"]):
        n = with_level["concurrency"]
        point = model.at(n) if model else None
        rows.append({"n": n, "with_tokens_per_s": with_level["aggregate_tokens_per_s"],
                     "without_tokens_per_s": without_level["aggregate_tokens_per_s"], "ratio": ratios.get(n),
                     "predicted_ratio": point.ratio if point else None})
    measured = measured_crossover(ratios)
    predicted = model.crossover() if model else None
    stop = stopped(document)
    return {"file": file, "k": document["pair"]["k"], "dtype": document["pair"]["dtype"], "rows": rows,
            "crossover": measured, "predicted_crossover": predicted.n if predicted else None,
            "model": model is not None, "stopped": {"server": stop[0], "concurrency": stop[1], "why": stop[2]}
            if stop else None}


def load_lines(summary: dict[str, Any]) -> str:
    """The printed rows, one per N, and the crossovers."""
    lines = [f"Under load (vLLM, k = {summary['k']}, {summary['dtype']}; {summary['file']}): N requests at once, "
             "the whole server's tokens/s",
             "| N | with speculation | without | with / without | batch cost model |", "|---|---|---|---|---|"]
    for row in summary["rows"]:
        ratio = f"{row['ratio']:.2f}x" if row["ratio"] is not None else "-"
        model = f"{row['predicted_ratio']:.2f}x" if row["predicted_ratio"] is not None else "-"
        lines.append(f"| {row['n']} | {row['with_tokens_per_s']:.1f} | {row['without_tokens_per_s']:.1f} | {ratio} | "
                     f"{model} |")
    if summary.get("stopped"):
        stop = summary["stopped"]
        lines.append(f"The sweep stopped at N = {stop['concurrency']} ({stop['server']}): {stop['why']}")
    measured, predicted = summary["crossover"], summary["predicted_crossover"]
    lines.append(f"Speculation stops paying at N = {measured} (measured)" if measured is not None else
                 "Speculation pays at every N measured")
    if summary["model"]:
        lines[-1] += (f"; the batch cost model predicts N = {predicted}." if predicted is not None else
                      "; the batch cost model predicts it pays at every N.")
    return "\n".join(lines)
