"""Every GPU figure the README and docs quote is read from a saved run in docs/gpu/ (issue 34).

Each quoted figure is listed below as (document, the text around it with `{}` where the figure
sits, saved report, path in it, format); the test formats the report's value and finds the text
in the document, so a hand-edited number, or a saved run replaced without the docs, fails. The
bench table in docs/benchmark.md, "GPU", is checked row by row against bench-h200.json; and every
decimal figure in that section must be one of the checked ones (a new unsourced figure fails).
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "docs" / "gpu"
BENCH = "docs/benchmark.md"
README, ARCHITECTURE, USAGE = "README.md", "docs/architecture.md", "docs/usage.md"
CHECK, ROWS, COMPILE, PREDICTED = "gpu_check-h200.json", "bench-h200.json", "compile-h200.json", "predicted-h200.json"
GPU_SECTION = "## GPU: NVIDIA H200"
DEFAULT, SEVEN_B = "costs/default", "costs/7b-target"
BEST_DEFAULT, BEST_7B = "predicted/default", "predicted/7b-target"

# (document, text with {} for the figure, report, path in the report, format spec)
FIGURES = [
    (BENCH, "every check passed, {} s of work", CHECK, "elapsed_s", ".0f"),
    (BENCH, "float32 identical in {} of", CHECK, "identity/0/identical", "d"),
    (BENCH, "identical in 32 of {}\nruns", CHECK, "identity/0/runs", "d"),
    (BENCH, "bfloat16 identical in {} of 32", CHECK, "identity/1/identical", "d"),
    (BENCH, "sampled runs finish ({} of 4 per dtype)", CHECK, "identity/1/sampled_runs_finished", "d"),
    (BENCH, "memcpy records: {}, 1, 1", CHECK, "steps/copies_per_step/0", "d"),
    (BENCH, "accept ~0 at T = 0 and {} at T = 0.7 (the draft model on graphs)", ROWS, "rows/13/acceptance_rate", ".0%"),
    (BENCH, "| 0.5B → 1.5B (default pair) | {} |", CHECK, f"{DEFAULT}/eager/target_token_ms", ".1f"),
    (BENCH, "(default pair) | 25.0 | **{}** |", CHECK, f"{DEFAULT}/graphs/target_token_ms", ".2f"),
    (BENCH, "| **3.93** | {} |", CHECK, f"{DEFAULT}/eager/draft_token_ms", ".1f"),
    (BENCH, "| 28.1 | {} |", CHECK, f"{DEFAULT}/graphs/draft_token_ms", ".2f"),
    (BENCH, "| 2.91 | {} |", CHECK, f"{DEFAULT}/graphs/cost_ratio", ".2f"),
    (BENCH, "| 0.74 | {} / ", CHECK, f"{DEFAULT}/graphs/verify_cost/1", ".2f"),
    (BENCH, "| 1.07 / {} / ", CHECK, f"{DEFAULT}/graphs/verify_cost/5", ".2f"),
    (BENCH, "| 1.07 / 1.10 / {} |", CHECK, f"{DEFAULT}/graphs/verify_cost/8", ".2f"),
    (BENCH, "/ 1.11 | {} s |", CHECK, f"{DEFAULT}/capture_s", ".2f"),
    (BENCH, "| 0.5B → 7B | {} |", CHECK, f"{SEVEN_B}/eager/target_token_ms", ".1f"),
    (BENCH, "| 0.5B → 7B | 23.2 | {} |", CHECK, f"{SEVEN_B}/graphs/target_token_ms", ".2f"),
    (BENCH, "| 6.85 | {} |", CHECK, f"{SEVEN_B}/eager/draft_token_ms", ".1f"),
    (BENCH, "| 34.8 | {} |", CHECK, f"{SEVEN_B}/graphs/draft_token_ms", ".2f"),
    (BENCH, "| 2.92 | {} |", CHECK, f"{SEVEN_B}/graphs/cost_ratio", ".2f"),
    (BENCH, "| 0.43 | {} / ", CHECK, f"{SEVEN_B}/graphs/verify_cost/1", ".2f"),
    (BENCH, "| 1.05 / {} / ", CHECK, f"{SEVEN_B}/graphs/verify_cost/5", ".2f"),
    (BENCH, "| 1.05 / 1.08 / {} |", CHECK, f"{SEVEN_B}/graphs/verify_cost/8", ".2f"),
    (BENCH, "/ 1.10 | {} s |", CHECK, f"{SEVEN_B}/capture_s", ".2f"),
    (BENCH, "graphs made a target token {}x (1.5B)", CHECK, f"{DEFAULT}/graphs_speedup_target_token", ".2f"),
    (BENCH, "and {}x (7B) faster", CHECK, f"{SEVEN_B}/graphs_speedup_target_token", ".2f"),
    (BENCH, "goal met:\n{} ms a token", CHECK, "goals/target_token_ms/measured", ".2f"),
    (BENCH, "(goal {} ms;", CHECK, "goals/target_token_ms/goal", ".1f"),
    (BENCH, "own\nloop: {} ms)", CHECK, "steps/target_only_ms_per_token/static", ".2f"),
    (BENCH, "twice the {} rows", CHECK, f"{DEFAULT}/capacity", "d"),
    (BENCH, "cost {} ms (target)", CHECK, f"{DEFAULT}/graphs_at_twice_the_capacity/target_token_ms", ".2f"),
    (BENCH, "and\n{} ms (draft)", CHECK, f"{DEFAULT}/graphs_at_twice_the_capacity/draft_token_ms", ".2f"),
    (BENCH, "Peak GPU memory: {} GiB", CHECK, f"{DEFAULT}/peak_memory_gib", ".2f"),
    (BENCH, "(default pair),\n{} GiB", CHECK, f"{SEVEN_B}/peak_memory_gib", ".2f"),
    (BENCH, "draft\n{} ms (five", CHECK, "steps/median_step_ms/draft", ".1f"),
    (BENCH, "verify {} ms, **engine", CHECK, "steps/median_step_ms/verify", ".2f"),
    (BENCH, "forwards {} ms** (goal", CHECK, "steps/median_step_ms/engine", ".2f"),
    (BENCH, "(goal <= {} ms)", CHECK, "goals/engine_ms_per_step/goal", ".0f"),
    (BENCH, "step {} ms. That", CHECK, "steps/median_step_ms/total", ".1f"),
    (BENCH, "one token per step): {} measured", CHECK, "steps/speedup_vs_target_only_graphs", ".3f"),
    (BENCH, "gave the same to 4 digits", CHECK, "steps/cost_model_speedup", ""),
    (BENCH, "({} ms against the probe's", CHECK, "steps/target_only_ms_per_token/static", ".2f"),
    (BENCH, "probe's {} ms a token)", CHECK, f"{DEFAULT}/graphs/target_token_ms", ".2f"),
    (BENCH, "cancels the engine's {} ms a step", CHECK, "steps/median_step_ms/engine", ".2f"),
    (BENCH, "Capture at load: {} s for the pair", ROWS, "device_costs/capture_s", ".2f"),
    (BENCH, "peak GPU memory {} GiB", ROWS, "peak_gpu_memory_gib", ".2f"),
    (BENCH, "eager\nSpecViz row, {}x, is about", ROWS, "rows/4/vs_assisted", ".2f"),
    (BENCH, "greedy generate ({} tok/s)", ROWS, "rows/2/tokens_per_s", ".1f"),
    (BENCH, "own sampled\nrun ({})", ROWS, "rows/10/tokens_per_s", ".1f"),
    (BENCH, "tokens per step {} at k = 1", PREDICTED, f"{BEST_DEFAULT}/model_drafter/0/tokens_per_step", ".2f"),
    (BENCH, "{} at k = 8; n-gram", PREDICTED, f"{BEST_DEFAULT}/model_drafter/6/tokens_per_step", ".2f"),
    (BENCH, "`benchmarks/data/qwen-coder-ngram-edits.json`: {} / ", PREDICTED,
     f"{BEST_DEFAULT}/ngram_edits/0/tokens_per_step", ".2f"),
    (BENCH, ": 2.62 / {} / ", PREDICTED, f"{BEST_DEFAULT}/ngram_edits/1/tokens_per_step", ".2f"),
    (BENCH, "2.62 / 3.28 / {} tokens per step", PREDICTED, f"{BEST_DEFAULT}/ngram_edits/2/tokens_per_step", ".2f"),
    (BENCH, "(the default pair) | {} |", PREDICTED, f"{BEST_DEFAULT}/model_drafter_best/k", "d"),
    (BENCH, "(the default pair) | 1 | **{}x**", PREDICTED, f"{BEST_DEFAULT}/model_drafter_best/predicted_speedup", ".2f"),
    (BENCH, "**0.93x** (k = 5: {}x)", PREDICTED, f"{BEST_DEFAULT}/model_drafter/4/predicted_speedup", ".2f"),
    (BENCH, "(k = 5: 0.85x) | {} |", PREDICTED, f"{BEST_DEFAULT}/break_even_acceptance/model_drafter", ".0%"),
    (BENCH, "1.5B target, edit prompts | {} |", PREDICTED, f"{BEST_DEFAULT}/ngram_edits_best/k", "d"),
    (BENCH, "edit prompts | 8 | **{}x**", PREDICTED, f"{BEST_DEFAULT}/ngram_edits_best/predicted_speedup", ".2f"),
    (BENCH, "**3.13x** (k = 5: {}x)", PREDICTED, f"{BEST_DEFAULT}/ngram_edits/1/predicted_speedup", ".2f"),
    (BENCH, "(k = 5: 2.57x) | {} |", PREDICTED, f"{BEST_DEFAULT}/break_even_acceptance/ngram", ".1%"),
    (BENCH, "acceptance assumed) | {} |", PREDICTED, f"{BEST_7B}/model_drafter_best/k", "d"),
    (BENCH, "acceptance assumed) | 5 | {}x |", PREDICTED, f"{BEST_7B}/model_drafter_best/predicted_speedup", ".2f"),
    (BENCH, "| 1.27x | {} |", PREDICTED, f"{BEST_7B}/break_even_acceptance/model_drafter", ".0%"),
    (BENCH, "7B shape, edit prompts | 8 | {}x |", PREDICTED, f"{BEST_7B}/ngram_edits_best/predicted_speedup", ".2f"),
    (BENCH, "| 3.36x | {} |", PREDICTED, f"{BEST_7B}/break_even_acceptance/ngram", ".1%"),
    (BENCH, "(c = {}: both models", CHECK, f"{DEFAULT}/graphs/cost_ratio", ".2f"),
    (BENCH, "predict {}x, below", PREDICTED, f"{BEST_DEFAULT}/model_drafter_best/predicted_speedup", ".2f"),
    (BENCH, "below the\n{} break-even", PREDICTED, f"{BEST_DEFAULT}/break_even_acceptance/model_drafter", ".0%"),
    (BENCH, "compiled in {} s", COMPILE, "compiled_decode/compile_s", ".1f"),
    (BENCH, "decoded a token in **{} ms**", COMPILE, "compiled_decode/target_token_ms", ".2f"),
    (BENCH, "our captured graph took\n{} ms.", COMPILE, "compiled_decode/our_graphs_target_token_ms", ".2f"),
    (BENCH, "its {} ms for our graph matches", COMPILE, "compiled_decode/our_graphs_target_token_ms", ".2f"),
    (BENCH, "matches the {}-row figure", CHECK, f"{DEFAULT}/capacity", "2x"),
    (README, "decoded a 1.5B target token in {} ms", CHECK, f"{DEFAULT}/graphs/target_token_ms", ".2f"),
    (README, "(eager: {} ms in the same run)", CHECK, f"{DEFAULT}/eager/target_token_ms", ".1f"),
    (README, "at k = 5 ran {}x the speed", ROWS, "rows/5/vs_assisted", ".2f"),
    (README, "costs {} of a target token", CHECK, f"{DEFAULT}/graphs/cost_ratio", ".2f"),
    (README, "(predicted {}x)", PREDICTED, f"{BEST_DEFAULT}/model_drafter_best/predicted_speedup", ".2f"),
    (README, "is predicted at {}x", PREDICTED, f"{BEST_DEFAULT}/ngram_edits_best/predicted_speedup", ".2f"),
    (ARCHITECTURE, "host ({} ms a token for the 1.5B shape", CHECK, f"{DEFAULT}/eager/target_token_ms", ".1f"),
    (ARCHITECTURE, "against\n{} ms on graphs", CHECK, f"{DEFAULT}/graphs/target_token_ms", ".2f"),
    (ARCHITECTURE, "The capture took\n{} s for the default pair's", CHECK, f"{DEFAULT}/capture_s", ".2f"),
    (ARCHITECTURE, "a target token in {} ms against", COMPILE, "compiled_decode/target_token_ms", ".2f"),
    (ARCHITECTURE, "against {} ms for our graphs", COMPILE, "compiled_decode/our_graphs_target_token_ms", ".2f"),
    (ARCHITECTURE, "that cache ({} ms on the 256", CHECK, f"{DEFAULT}/graphs/target_token_ms", ".2f"),
    (ARCHITECTURE, "on the {} rows prepared now", CHECK, f"{DEFAULT}/capacity", "d"),
    (ARCHITECTURE, "took\n{} s to compile", COMPILE, "compiled_decode/compile_s", ".1f"),
    (ARCHITECTURE, "graphs ({} s for all", CHECK, f"{DEFAULT}/capture_s", ".2f"),
    (ARCHITECTURE, "draft costs {} of a target token", CHECK, f"{DEFAULT}/graphs/cost_ratio", ".2f"),
    (ARCHITECTURE, "only above {} acceptance", PREDICTED, f"{BEST_DEFAULT}/break_even_acceptance/model_drafter", ".0%"),
    (ARCHITECTURE, "predict {}x. n-gram", PREDICTED, f"{BEST_DEFAULT}/model_drafter_best/predicted_speedup", ".2f"),
    (ARCHITECTURE, "pays above {}.", PREDICTED, f"{BEST_DEFAULT}/break_even_acceptance/ngram", ".1%"),
    (USAGE, "({} s for the default pair's shapes in the saved H200 run", CHECK, f"{DEFAULT}/capture_s", ".2f"),
]
BENCH_COLUMNS = (("tokens_per_s", ".1f", ""), ("speedup", ".2f", "x"), ("vs_same_kernels", ".2f", "x"),
                 ("vs_assisted", ".2f", "x"))
IDENTICAL = {True: ("yes", "yes (the reference)"), False: ("no", "**no**"), None: ("not checked",)}
DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")        # 3.93, not 2.11.0 or a file name


@cache
def report(name: str) -> dict:
    return json.loads((GPU / name).read_text())


@cache
def document(name: str) -> str:
    return (ROOT / name).read_text()


def value(name: str, path: str):
    node = report(name)
    for part in path.split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def quoted(text: str, name: str, path: str, spec: str | None) -> str | None:
    """The text with the report's figure in its place (None: a line that quotes no figure)."""
    if spec is None:
        return None
    figure = value(name, path)
    if spec == "2x":
        return text.format(2 * figure)
    if spec == "":                                           # the figure is said in words ("to 4 digits")
        return text
    return text.format(format(figure, spec))


def gpu_section() -> str:
    """docs/benchmark.md's GPU section, up to the next section."""
    text = document(BENCH)
    start = text.index(GPU_SECTION)
    end = text.find("\n## ", start + len(GPU_SECTION))
    return text[start:end if end >= 0 else len(text)]


@pytest.mark.parametrize("doc, text, name, path, spec", [entry for entry in FIGURES if entry[4] is not None],
                         ids=[f"{entry[0]}:{entry[3]}" for entry in FIGURES if entry[4] is not None])
def test_each_quoted_figure_is_the_saved_runs(doc, text, name, path, spec):
    expected = quoted(text, name, path, spec)
    assert expected in document(doc), f"{doc} should say {expected!r} ({name} {path} = {value(name, path)!r})"


def test_the_compared_speeds_agree_to_four_digits():
    """The sentence 'gave the same to 4 digits' is the saved run's measured and modelled ratios."""
    assert format(value(CHECK, "steps/speedup_vs_target_only_graphs"), ".4f") == \
        format(value(CHECK, "steps/cost_model_speedup"), ".4f")


def bench_table() -> list[list[str]]:
    rows = [line for line in gpu_section().splitlines()
            if line.startswith("| ") and "tok/s" not in line and not line.startswith("|---")]
    cells = [[cell.strip().strip("*") for cell in line.strip("|").split("|")] for line in rows]
    return [row for row in cells if len(row) == 7]


def test_the_bench_table_is_bench_h200_row_by_row():
    """Every row of bench-h200.json is in the table, with its tok/s, the three ratios and whether its
    output was identical to eager target-only's (shown as the run recorded it, False included)."""
    table = bench_table()
    saved = report(ROWS)["rows"]
    assert len(table) == len(saved)
    for row, cells in zip(saved, table, strict=True):
        assert cells[0] == row["name"] and float(cells[1]) == row["temperature"], (cells, row["name"])
        for cell, (field, spec, unit) in zip(cells[2:6], BENCH_COLUMNS, strict=True):
            assert cell == format(row[field], spec) + unit, (row["name"], row["temperature"], field, cell)
        assert cells[6].strip("*") in {word.strip("*") for word in IDENTICAL[row["identical"]]}, (row["name"], cells[6])


def test_every_decimal_figure_in_the_gpu_section_is_checked():
    """A figure added to the GPU section without a saved source fails here: each decimal number in
    it sits in a checked quote, the checked bench table, or is a version or a CPU sweep's setting."""
    text = gpu_section()
    covered = [(match.start(), match.end()) for doc, entry_text, name, path, spec in FIGURES
               if doc == BENCH and spec is not None
               for match in re.finditer(re.escape(quoted(entry_text, name, path, spec)), text)]
    table_lines = {line for line in text.splitlines() if line.startswith("| ")}
    unsourced = []
    for match in DECIMAL.finditer(text):
        line = text[text.rfind("\n", 0, match.start()) + 1:text.find("\n", match.start())]
        if line in table_lines and any(row[0] in line for row in bench_table()):
            continue
        if any(start <= match.start() and match.end() <= end for start, end in covered):
            continue
        if match.group() in ("0.7", "1.5", "0.5"):            # T = 0.7; the 0.5B / 1.5B shapes' names
            continue
        unsourced.append(f"{match.group()} in: {line.strip()[:100]}")
    assert not unsourced, "figures with no saved source:\n" + "\n".join(unsourced)
