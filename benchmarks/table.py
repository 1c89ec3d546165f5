"""The benchmark's table and closing note, from the measured rows.

Two references, kept apart so the headline never mixes the two gains: target-only decoding
on the **stock float32 target** (what speculation and the kernels buy together) and
target-only decoding on **the same prepacked target** (what speculation alone buys on the
same kernels). "vs assisted" divides by transformers' assisted generation at the same k. With
vLLM's rows (bench.py --peer vllm), "vs vLLM's best speculative row" divides by vLLM's fastest
speculative row of the same temperature, and the audit column counts the tokens of each vLLM row
that the target would sample less than once in a million (engine/audit/).

Token-tree rows (docs/architecture.md §2, "Token trees") are measured like any row: tokens per
target forward and tokens/s. The i.i.d. theory E(a, k) / (k c + 1) does not describe them (a
tree's candidates are deterministic top-b tokens with no per-position overlap a, and a tree
verifies more rows than k + 1), so their theory cells read "n/a: trees", not a missing value.
"""

from __future__ import annotations

from benchmarks.configurations import SUITES, Configuration, Suite
from benchmarks.rows import Row, target_step_ms, theory, theory_at_measured_verify
from engine.metrics import tokens_per_verify_step

COLUMNS = ("configuration", "T", "tok/s", "vs {stock}", "vs {same}",
           "code prompt vs stock", "vs assisted (same k)", "acceptance", "tokens per target forward", "theory",
           "measured/theory", "draft cost c", "verify cost", "measured/theory at verify cost", "identical")
PEER_COLUMNS = ("vs vLLM's best speculative row", "audit: tokens under 1e-6")   # with vLLM's rows only
TREES = "n/a: trees"          # a tree row's theory cells: the i.i.d. chain theory does not describe it


def _ratio(numerator: float, denominator: float | None) -> float | None:
    return round(numerator / denominator, 3) if denominator else None


def tokens_per_step(row: Row) -> float | None:
    """τ as vLLM reports it (mean_acceptance_length, engine/metrics.py): 1 + accepted / the steps that
    verified drafts, so SpecViz's rows and vLLM's share one definition; a row that never drafted makes
    one token a forward."""
    if row.verify_steps:
        return round(tokens_per_verify_step(row.accepted, row.verify_steps), 3)
    return round(row.tokens / row.steps, 3) if row.steps else None


def table_row(row: Row, configuration: Configuration, rows: list[Row], k: int, suite: Suite = SUITES["cpu"]) -> dict:
    same = {r.name: r for r in rows if r.temperature == row.temperature}
    stock, packed = same[suite.reference_stock], same.get(suite.reference_same_kernels)
    assisted = same.get(suite.assisted_same_k.format(k=k))
    unit = packed if suite.theory_on_same_kernels and packed is not None else stock     # one target step
    predicted, at_verify = theory(row, unit), theory_at_measured_verify(row, unit)
    speedup = _ratio(row.tokens_per_s, stock.tokens_per_s)
    measured = _ratio(row.tokens_per_s, unit.tokens_per_s)          # against the theory's own unit
    no_theory = TREES if configuration.changes.get("tree_nodes") else None
    return {"name": row.name, "temperature": row.temperature, "headline": configuration.headline,
            "tokens_per_s": round(row.tokens_per_s, 2), "speedup": speedup,
            "vs_same_kernels": _ratio(row.tokens_per_s, packed.tokens_per_s if packed else None),
            "code_speedup": _ratio(row.prompt_tokens_per_s("code"), stock.prompt_tokens_per_s("code")),
            "vs_assisted": _ratio(row.tokens_per_s, assisted.tokens_per_s if assisted else None),
            "acceptance_rate": round(row.accepted / row.drafted, 3) if row.drafted else None,
            "mean_accepted_length": tokens_per_step(row),
            "theoretical_speedup": round(predicted, 3) if predicted else None,
            "measured_over_theory": _ratio(measured, predicted) if measured else None,
            "draft_cost": (round(row.draft_ms / row.drafted / target_step_ms(unit), 3)
                           if row.drafted and unit.tokens else None),
            "verify_cost": (round(row.verify_ms / row.steps / target_step_ms(unit), 3)
                            if row.steps and unit.tokens else None),
            "theory_at_verify_cost": round(at_verify, 3) if at_verify else None,
            "measured_over_theory_at_verify_cost": _ratio(measured, at_verify) if measured else None,
            "theory_note": no_theory, "identical": row.identical, "tokens": row.tokens, "wall_s": round(row.wall_s, 2),
            "phases_ms_per_token": row.phases(configuration.kind)}


def markdown(results: dict) -> str:
    def cell(value, fmt="{:.2f}", suffix=""):
        if value is None:
            return "-"
        return "yes" if value is True else "no" if value is False else fmt.format(value) + suffix
    suite = SUITES[results.get("device", "cpu")]
    weights = " (random weights at its shapes: acceptance is about 0, so these rows measure costs)" \
        if results.get("random_weights") else ""
    columns = [column.format(stock=suite.stock_words, same=suite.same_words) for column in COLUMNS]
    peer = "vllm" in results                    # vLLM's rows ran (benchmarks/vllm_peer.py)
    if peer:
        columns += list(PEER_COLUMNS)
    lines = [f"Preset `{results['preset']}`{weights}, k={results['k']}, {results['max_new_tokens']} new tokens, "
             f"{len(results['prompts'])} prompts, median of {results['repeats']} ({results['machine']}).", "",
             "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in results["rows"]:
        note = r.get("theory_note")          # "n/a: trees" in place of the chain theory's cells
        values = [r["name"], f"{r['temperature']:g}", cell(r["tokens_per_s"], "{:.1f}"), cell(r["speedup"], suffix="x"),
                  cell(r["vs_same_kernels"], suffix="x"), cell(r["code_speedup"], suffix="x"),
                  cell(r["vs_assisted"], suffix="x"), cell(r["acceptance_rate"], "{:.0%}"),
                  cell(r["mean_accepted_length"]), note or cell(r["theoretical_speedup"], suffix="x"),
                  note or cell(r["measured_over_theory"]), cell(r.get("draft_cost")), cell(r["verify_cost"]),
                  note or cell(r["measured_over_theory_at_verify_cost"]), cell(r["identical"])]
        if peer:
            values += [cell(r.get("vs_vllm_best"), suffix="x"), cell(r.get("marked"), "{:d}")]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def closing_note(results: dict) -> str:
    """The headline: the suite's `best` row at the run's k (on a CPU the app's default configuration)
    against each reference, greedy and sampled."""
    suite = SUITES[results.get("device", "cpu")]
    best = suite.best.format(k=results["k"])
    parts = []
    for r in results["rows"]:
        if r["name"] != best:
            continue
        mode = "greedy" if r["temperature"] == 0 else f"T = {r['temperature']:g}"
        same = "identical greedy output" if r["identical"] else ("greedy output DIFFERS" if r["identical"] is False else "")
        parts.append(f"{mode}: {_x(r['speedup'])} vs {suite.stock_words}, {_x(r['vs_same_kernels'])} vs "
                     f"{suite.same_words}, {_x(r['vs_assisted'])} vs transformers' assisted generation "
                     f"at the same k" + (f", {_x(r['vs_vllm_best'])} vs vLLM's best speculative row "
                                         f"({r['vllm_best']})" if r.get("vllm_best") else "")
                     + (f" ({same})" if same else ""))
    if not parts:
        return f"{best}: not measured in this run."
    return f"{best}: " + "; ".join(parts) + "."


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def phase_text(phases: dict[str, float]) -> str:
    """A row's phases (Row.phases: ms per generated token) in words, each with its share of the whole."""
    total = sum(phases.values())
    return ", ".join(f"{name.replace('_', ' ')} {ms:.1f} ({ms / total:.0%})" for name, ms in phases.items())


def phase_lines(results: dict) -> list[str]:
    """Where each timed row's time went, ms per generated token (Row.phases), one line per row and temperature."""
    return [f"Where time goes, {r['name']}, T = {r['temperature']:g}: {phase_text(r['phases_ms_per_token'])} ms per "
            "token." for r in results["rows"] if r.get("phases_ms_per_token")]
