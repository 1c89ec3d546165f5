"""The measured parts of README.md and docs/benchmark.md, rendered from the saved runs in
benchmarks/data/ (issue 37): a new run saved there, named in RUNS below, updates the docs with
`python scripts/benchmark_doc.py --write`; `--check` (and tests/test_figures_traced.py) fails
when a generated block differs from what the saved runs give.

A generated block sits between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->`;
nothing else in the file is touched. Every ratio in a block is computed here from the saved
tok/s of one run, so a row and the ratios quoted beside it always come from the same run."""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.figure import speedup_svg  # noqa: E402  (after the path: a script run from anywhere)
from benchmarks.table import phase_text  # noqa: E402

DATA = ROOT / "benchmarks" / "data"
README, BENCH, SVG = ROOT / "README.md", ROOT / "docs" / "benchmark.md", ROOT / "docs" / "benchmark-speedup.svg"
DEFAULT_ROW = "SpecViz fast (int8 draft, prepacked fp32 target), k=5"
PREPACKED, STOCK = "target-only, prepacked fp32 target", "target-only, stock fp32 target"
# benchmarks/configurations.py's bfloat16-target rows, in a default run where the CPU computes bfloat16 natively
BF16_ROW = "SpecViz, int8 draft, prepacked bf16 target (where native), k=5"
INT4_ROW = "SpecViz, int4 draft, prepacked bf16 target (where native), k=5"      # from the run of 2026-11-29 evening
BF16_REFERENCE = "target-only, prepacked bf16 target (where native)"
SPECVIZ_ROWS = (DEFAULT_ROW, BF16_ROW, INT4_ROW)       # SpecViz's speculative rows that README and the verdict quote
ROLES = {DEFAULT_ROW: "the app's default", BF16_ROW: "target dtype bfloat16 on the page",
         INT4_ROW: "the page's **Use the fastest here** (target bfloat16, draft int4)"}
DRAFT_OF = {BF16_ROW: "int8 draft, ", INT4_ROW: "int4 draft, ", BF16_REFERENCE: ""}
BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)", re.S)


@dataclass(frozen=True)
class Run:
    """One saved bench.py run and what the docs say about it that the file does not record."""

    file: str
    cpu_class: str
    command: str
    command_note: str = ""


RUNS = (
    Run("bench-vllm-peer-2026-11-30.json", "AVX-512 + BF16",
        "python bench.py --peer vllm --vllm-bindings all --vllm-fix-cpu-sampler --no-startup"),
    Run("bench-avx2-2026-11-28.json", "AVX2 (no AVX-512)",
        "python bench.py --peer vllm --vllm-bind-all --temperatures 0",
        " (the file does not record its command: these are the options its rows imply)"),
)
# Earlier runs on the AVX-512 machine, kept for what the current one does not measure: vLLM on its own core binding
# beside both cores and with its CPU sampler as shipped (11-28), the first run with the sampler fixed (11-29), the
# first with the bfloat16 target (11-29 evening, before the int4 draft), and the first with the int4 draft (11-29
# night, before the CPU draw of 11-30).
EARLIER = (
    Run("bench-vllm-peer-2026-11-28.json", "AVX-512",
        "python bench.py --peer vllm --vllm-bindings auto,all --no-startup"),
    Run("bench-vllm-peer-fixed-2026-11-29.json", "AVX-512",
        "python bench.py --peer vllm --vllm-bindings all --vllm-fix-cpu-sampler --no-startup"),
    Run("bench-vllm-peer-bf16-2026-11-29.json", "AVX-512 + BF16",
        "python bench.py --peer vllm --vllm-bindings all --vllm-fix-cpu-sampler --no-startup"),
    Run("bench-vllm-peer-int4-2026-11-29.json", "AVX-512 + BF16",
        "python bench.py --peer vllm --vllm-bindings all --vllm-fix-cpu-sampler --no-startup"),
)
RERUN = "bench-default-rows-2026-11-28.json"
K_SCAN = "int4-draft-k-scan-2026-11-29.json"           # bench.py --grid --only "int4 draft": the int4 draft at each k
COST_MODEL = ("gpu_check-cpu-small-2026-11-28-phases.json", "gpu_check-cpu-small-2026-11-28.json")
AUDITS = ("vllm-tiny-audit.json", "vllm-qwen-coder-probabilistic-audit.json")
SAMPLED_RUNS = "vllm-sampled-runs-2026-11-29.json"      # scripts/record_vllm_sampled.py: the Run tab's sampled vLLM runs
CLASSROOMS = ("classroom-vllm-tiny-10-distinct.json", "classroom-inprocess-tiny-random-10-distinct.json",
              "classroom-vllm-tiny-10-distinct-dispatcher.json")


def load(name: str) -> dict:
    """A saved run from benchmarks/data, by file name."""
    path = DATA / name
    if not path.is_file():
        raise SystemExit(f"benchmarks/data/{name} is missing: the docs quote it, so restore it or drop it from RUNS.")
    return json.loads(path.read_text(encoding="utf-8"))


def date_of(name: str) -> str:
    """The run's date, from its file name (bench.py's JSON does not record one)."""
    found = re.search(r"\d{4}-\d{2}-\d{2}", name)
    return found.group() if found else "date not recorded"


def machine_record(results: dict) -> dict | None:
    """The run's machine record (engine/cli/machine.py): bench.py's "cpu", gpu_check's "environment.cpu",
    or a "machine" block; None for runs saved before they kept one."""
    for record in (results.get("cpu"), (results.get("environment") or {}).get("cpu"), results.get("machine")):
        if isinstance(record, dict):
            return record
    return None


def machine_of(results: dict) -> str:
    """The machine in words: the machine record when the run saved one, else its one-line description."""
    record = machine_record(results)
    if record is None:
        return str(results.get("machine") or "machine not recorded")
    def first(*keys: str):
        return next((record[key] for key in keys if record.get(key) not in (None, "", [], {})), None)
    flags = first("flags", "cpu_flags") or []
    if isinstance(flags, dict):                       # {"avx2": true, "avx512f": false, ...}
        flags = [name for name, present in flags.items() if present]
    cores = first("cores", "cpu_count")
    load = first("load_average", "loadavg")
    caps = first("caps") or {}
    parts = [str(first("cpu_model", "model") or "CPU model not recorded"),
             f"{cores} cores" if cores is not None else "cores not recorded",
             ("flags " + " ".join(str(flag) for flag in flags)) if flags else "no flags recorded"]
    parts += [f"{name}={value}" for name, value in caps.items()]
    if isinstance(load, (list, tuple)) and load:
        parts.append("load average " + " / ".join(f"{value:.2f}" for value in load))
    return ", ".join(parts)


def cpu_class_of(run: "Run", results: dict) -> str:
    """The CPU class the run recorded (engine/cli/machine.py's cpu_class), else the one RUNS names."""
    record = machine_record(results) or {}
    return str(record.get("cpu_class") or run.cpu_class)


def servers(results: dict) -> dict[str, dict]:
    return {server["name"]: server for server in (results.get("vllm") or {}).get("servers", [])}


def kernels(row_name: str, results: dict) -> str:
    """Which kernels and dtypes a row ran on."""
    server = servers(results).get(row_name)
    if server is not None:
        dtype = server["dtype"]
        what = {"none": f"{dtype} target", "draft_model": f"{dtype} draft and target",
                "ngram": f"{dtype} target, n-gram lookup"}[server["method"]]
        return f"vLLM's CPU kernels, {what}"
    if row_name in DRAFT_OF:
        dtype = (results.get("bf16_target") or {}).get("target_dtype", "bfloat16")
        return DRAFT_OF[row_name] + f"oneDNN-prepacked {dtype} target"
    if row_name.startswith("SpecViz fast"):
        return "int8 draft, oneDNN-prepacked float32 target"
    if row_name == PREPACKED:
        return "oneDNN-prepacked float32 target"
    if row_name == STOCK:
        return "stock PyTorch float32 target"
    if row_name.startswith("transformers assisted"):
        return "stock PyTorch float32 draft and target"
    raise SystemExit(f"No kernels known for the row {row_name!r}: add it to scripts/benchmark_doc.py's kernels().")


def reference(row_name: str, results: dict) -> str:
    """The target-only row on the same kernels and dtype as `row_name` (speculation's own gain is over it)."""
    server = servers(results).get(row_name)
    if server is not None:
        return row_name if server["method"] == "none" else "vLLM target-only" + row_name[row_name.index(" ("):]
    if row_name in DRAFT_OF:
        return BF16_REFERENCE
    if row_name.startswith("SpecViz fast") or row_name == PREPACKED:
        return PREPACKED
    return STOCK


def row(results: dict, name: str, temperature: float) -> dict | None:
    return next((r for r in results["rows"] if r["name"] == name and r["temperature"] == temperature), None)


def ratio(results: dict, name: str, over: str, temperature: float) -> float | None:
    top, bottom = row(results, name, temperature), row(results, over, temperature)
    if top is None or bottom is None:
        return None
    return top["tokens_per_s"] / bottom["tokens_per_s"]


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def label(temperature: float) -> str:
    return "greedy" if temperature == 0 else f"T = {temperature:g}"


def fastest_peer(results: dict, temperature: float) -> dict:
    """The fastest row that is not SpecViz's own (transformers' or vLLM's), at this temperature."""
    peers = [r for r in results["rows"] if r["temperature"] == temperature
             and (r["name"].startswith("vLLM") or r["name"].startswith("transformers"))]
    return max(peers, key=lambda r: r["tokens_per_s"])


def fastest_speculative_peer(results: dict, temperature: float) -> dict | None:
    """vLLM's fastest speculative row (draft model or n-gram) at this temperature; None when it has none."""
    peers = [r for r in results["rows"] if r["temperature"] == temperature and r["name"].startswith("vLLM")
             and servers(results).get(r["name"], {}).get("method") in ("draft_model", "ngram")]
    return max(peers, key=lambda r: r["tokens_per_s"], default=None)


def cpu_table(results: dict) -> list[str]:
    """Every row of one run: kernels, tok/s, speculation's own gain over its own target-only, and the rest."""
    lines = ["| configuration | T | kernels and dtypes | tok/s | over target-only on the same kernels and dtype "
             "| vs stock fp32 target-only | acceptance | tokens per target forward | identical | audit: tokens under 1e-6 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results["rows"]:
        own = reference(r["name"], results)
        gain = "1.00x (a reference)" if own == r["name"] else f"{times(ratio(results, r['name'], own, r['temperature']))} over {own}"
        acceptance = "-" if r.get("acceptance_rate") is None else f"{r['acceptance_rate']:.0%}"
        tau = "-" if r.get("mean_accepted_length") is None else f"{r['mean_accepted_length']:.2f}"
        identical = {True: "yes", False: "no", None: "-"}[r.get("identical")]
        audit = r.get("audit_marked", r.get("marked", "-"))
        lines.append(f"| {r['name']} | {r['temperature']:g} | {kernels(r['name'], results)} | {r['tokens_per_s']:.1f} | {gain} "
                     f"| {times(r['speedup'])} | {acceptance} | {tau} | {identical} | {audit if audit is not None else '-'} |")
    return lines


def binding_lines(results: dict) -> list[str]:
    """vLLM on both cores over vLLM on its own binding, per configuration, when the run has both."""
    out = []
    for temperature in sorted({r["temperature"] for r in results["rows"]}):
        pairs = []
        for r in results["rows"]:
            if r["temperature"] == temperature and r["name"].endswith(" on cores 0-1)"):
                own = r["name"].replace(" on cores 0-1)", ")")
                gain = ratio(results, r["name"], own, temperature)
                if gain is not None:
                    pairs.append(f"{r['name'][5:r['name'].index(' (')]}: {gain:.2f}x")
        if pairs:
            out.append(f"- Binding both cores (`--vllm-bindings all`) over vLLM's own binding, {label(temperature)}: "
                       + ", ".join(pairs) + ".")
    return out


def server_lines(results: dict) -> list[str]:
    out = []
    for server in servers(results).values():
        if server.get("error"):
            out.append(f"- {server['name']} did not serve: {server['error']}")
    started = [f"{name} {server['startup_s']:.0f} s" for name, server in servers(results).items() if "startup_s" in server]
    if started:
        out.append("- Server start-ups (not in any row): " + ", ".join(started) + ".")
    return out


def cpu_block(run: Run) -> str:
    results = load(run.file)
    engine = (results.get("vllm") or {}).get("engine", "no vLLM")
    head = [f"**{cpu_class_of(run, results)}**: `benchmarks/data/{run.file}`, {date_of(run.file)}, {machine_of(results)}; "
            f"{engine}. Command: `{run.command}`{run.command_note}. Preset `{results['preset']}`, k = {results['k']}, "
            f"{results['max_new_tokens']} new tokens, {len(results['prompts'])} prompts, median of {results['repeats']}.", ""]
    return "\n".join(head + cpu_table(results) + [""] + binding_lines(results) + server_lines(results)) + "\n"


def readme_rows(results: dict, temperature: float) -> list[str]:
    """The README's rows of one run: SpecViz's default first, then each reference and each peer."""
    peer = fastest_peer(results, temperature)
    names = [*SPECVIZ_ROWS, PREPACKED, BF16_REFERENCE, STOCK] + [
        r["name"] for r in results["rows"] if r["temperature"] == temperature and r["name"] in servers(results)
        and "on cores 0-1" in r["name"]]
    names += [] if peer["name"] in names else [peer["name"]]
    lines = []
    for name in names:
        r = row(results, name, temperature)
        if r is None:
            continue
        own = reference(name, results)
        gain = "(reference)" if own == name else times(ratio(results, name, own, temperature))
        over_peer = times(ratio(results, name, peer["name"], temperature))
        cells = [name, kernels(name, results), f"{r['tokens_per_s']:.1f}", gain, over_peer, times(r["speedup"])]
        if name in ROLES:
            cells = [f"**{cells[0]}**: {ROLES[name]}", cells[1], cells[2], f"**{gain}**", f"**{over_peer}**", cells[5]]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def readme_block() -> str:
    """README's Speed section: each CPU class's greedy rows apart, then the first run's T = 0.7 ratios."""
    out = []
    for run in RUNS:
        results = load(run.file)
        peer = fastest_peer(results, 0.0)
        out += [f"**{cpu_class_of(run, results)}**: {machine_of(results)}, {date_of(run.file)}, `{run.command}`{run.command_note}, "
                f"saved as `benchmarks/data/{run.file}`; the fastest peer: {peer['name']}.", "",
                "| greedy | kernels and dtypes | tok/s | speculation's gain over target-only on the same kernels "
                "| vs the fastest peer | vs stock fp32 target-only (reference) |",
                "|---|---|---|---|---|---|", *readme_rows(results, 0.0), ""]
        failed = [line[2:] for line in server_lines(results) if "did not serve" in line]
        out += [" ".join(failed), ""] if failed else []
    out.append(sampled_sentence(RUNS[0]))
    return "\n".join(out) + "\n"


def sampled_sentence(run: Run) -> str:
    """SpecViz's speculative rows at T = 0.7 against vLLM's fastest speculative row of the same run, each also over
    the target-only row on its own kernels, which ran right after its greedy twin."""
    results = load(run.file)
    peer = fastest_speculative_peer(results, 0.7)
    parts = []
    for name in SPECVIZ_ROWS:
        own = row(results, name, 0.7)
        if own is None:
            continue
        reference_row = reference(name, results)
        parts.append(f"{name} {own['tokens_per_s']:.1f} tok/s, {times(ratio(results, name, reference_row, 0.7))} over "
                     f"{reference_row} ({row(results, reference_row, 0.7)['tokens_per_s']:.1f} tok/s; greedy "
                     f"{row(results, reference_row, 0.0)['tokens_per_s']:.1f})"
                     + (f", **{times(own['tokens_per_s'] / peer['tokens_per_s'])}** vLLM's fastest speculative row"
                        if peer else ""))
    if not parts:
        return ""
    against = ((f"{peer['name']} at {peer['tokens_per_s']:.1f} tok/s"
                + ("" if peer.get("acceptance_rate") is None else f", {peer['acceptance_rate']:.0%} accepted"))
               if peer else "no vLLM speculative row")
    return f"At T = 0.7 in the {cpu_class_of(run, results)} run: " + "; ".join(parts) + f"; against {against}."


def verdict_block() -> str:
    """The current AVX-512 run's speculative rows against vLLM's fastest speculative row, per temperature."""
    run = RUNS[0]
    results = load(run.file)
    lines = [f"From `benchmarks/data/{run.file}` ({cpu_class_of(run, results)}):", ""]
    for temperature in sorted({r["temperature"] for r in results["rows"]}):
        peer = fastest_speculative_peer(results, temperature)
        if peer is None:
            continue
        mine = [f"{name} {own['tokens_per_s']:.1f} tok/s, **{times(own['tokens_per_s'] / peer['tokens_per_s'])}**"
                for name in SPECVIZ_ROWS if (own := row(results, name, temperature)) is not None]
        lines.append(f"- {label(temperature)}: against {peer['name']} at {peer['tokens_per_s']:.1f} tok/s: "
                     + "; ".join(mine) + ".")
    return "\n".join(lines) + "\n"


def phases_block() -> str:
    """Where each timed row's time went in the current AVX-512 run (bench.py's phases_ms_per_token)."""
    results = load(RUNS[0].file)
    lines = ["| configuration | T | where the time goes, ms per generated token (share) | wall ms per token |",
             "|---|---|---|---|"]
    for r in results["rows"]:
        if r.get("phases_ms_per_token"):
            lines.append(f"| {r['name']} | {r['temperature']:g} | {phase_text(r['phases_ms_per_token'])} "
                         f"| {1000 * r['wall_s'] / r['tokens']:.1f} |")
    return "\n".join(lines) + "\n"


def k_scan_block() -> str:
    """The int4 draft on the bfloat16 target at each k of one run: tok/s and acceptance, greedy and sampled."""
    results = load(K_SCAN)
    int4_name = INT4_ROW.rsplit(", k=", 1)[0]                  # the row's name without its k
    ks = sorted({int(r["name"].rsplit("k=", 1)[1]) for r in results["rows"] if r["name"].startswith(int4_name + ", k=")})
    lines = [f"`benchmarks/data/{K_SCAN}`, {date_of(K_SCAN)}, {machine_of(results)}. Command: `python "
             f"{results['command']}`.", "", "| k | greedy tok/s | greedy acceptance | T = 0.7 tok/s | T = 0.7 acceptance |",
             "|---|---|---|---|---|"]
    for k in ks:
        greedy, sampled = (row(results, f"{int4_name}, k={k}", t) for t in (0.0, 0.7))
        lines.append(f"| {k} | {greedy['tokens_per_s']:.1f} | {greedy['acceptance_rate']:.0%} | "
                     f"{sampled['tokens_per_s']:.1f} | {sampled['acceptance_rate']:.0%} |")
    return "\n".join(lines) + "\n"


def rerun_block() -> str:
    """The prepacked target's T = 0.7 slowdown measured again, minutes after the peer run."""
    results = load(RERUN)
    lines = [f"`benchmarks/data/{RERUN}` ({machine_of(results)}, `python bench.py --peer none --only "
             f"\"prepacked fp32 target\"`):", "", "| configuration | greedy tok/s | T = 0.7 tok/s | T = 0.7 over greedy |",
             "|---|---|---|---|"]
    for name in dict.fromkeys(r["name"] for r in results["rows"]):
        greedy, sampled = row(results, name, 0.0), row(results, name, 0.7)
        if greedy and sampled:
            lines.append(f"| {name} | {greedy['tokens_per_s']:.1f} | {sampled['tokens_per_s']:.1f} "
                         f"| {times(sampled['tokens_per_s'] / greedy['tokens_per_s'])} |")
    return "\n".join(lines) + "\n"


def cost_model_block() -> str:
    """gpu_check's three acceptance levels: the model fed the measured tokens per step, and the i.i.d. model."""
    lines = ["| saved run | level | acceptance | tokens per step: measured / i.i.d. model | measured tok/s "
             "| predicted from measured tokens per step (error: the file's median of measured / predicted - 1) "
             "| predicted by the i.i.d. model (error: measured / predicted - 1) |",
             "|---|---|---|---|---|---|---|"]
    for name in COST_MODEL:
        for level in load(name)["acceptance_levels"]:
            measured = level["measured_tok_s"]
            iid = level["iid_predicted_tok_s"]
            lines.append(f"| `{name}` | {level['level']} | {level['acceptance']:.1%} | {level['tokens_per_step']:.2f} / "
                         f"{level['iid_tokens_per_step']:.2f} | {measured:.0f} | {level['predicted_tok_s']:.0f} "
                         f"({level['error']:+.0%}) | {iid:.0f} ({measured / iid - 1:+.0%}) |")
    return "\n".join(lines) + "\n"


def audit_block() -> str:
    lines = ["| saved run | pair, dtype | method, k | T | tokens | marked (under 1e-6) | marked by kind | tokens by kind "
             "| sampling from the target would mark |", "|---|---|---|---|---|---|---|---|---|"]
    for name in AUDITS:
        s = load(name)["summary"]
        by_kind = ", ".join(f"{kind} {count}" for kind, count in s["marked_by_kind"].items())
        tokens = ", ".join(f"{kind} {count}" for kind, count in s["tokens_by_kind"].items())
        lines.append(f"| `{name}` | {s.get('preset', 'tiny random pair')}, {s['dtype']} | {s['method']} "
                     f"({s['draft_sample_method']} drafts), {s['k']} | {s['temperature']:g} | {s['tokens']} | **{s['marked']}** "
                     f"| {by_kind} | {tokens} | {s['expected_marked']:.2g} |")
    return "\n".join(lines) + "\n"


def sampled_runs_block() -> str:
    """The Run tab's recorded sampled vLLM runs (scripts/record_vllm_sampled.py) and what the audit marked in each."""
    run = load(SAMPLED_RUNS)
    lines = [f"Recorded {date_of(SAMPLED_RUNS)} on {machine_of(run)} (`{SAMPLED_RUNS}`): the default pair, float32, "
             f"draft model, k = {run['k']}, T = {run['temperature']:g}, seed {run['seed']}, up to {run['max_tokens']} "
             "tokens of the Run tab's default prompt, audited by " + run["scored_by"] + ".", "",
             "| asset (assets/traces/) | vLLM's sampler | steps | tokens | marked (under 1e-6) | marked steps "
             "| sampling from the target would mark |", "|---|---|---|---|---|---|---|"]
    for r in run["runs"]:
        sampler = "SpecViz's fix (`--fix-cpu-sampler`)" if r["fixed_sampler"] else "as shipped (issue #55005)"
        steps = ", ".join(map(str, r["marked_steps"])) or "none"
        lines.append(f"| `{r['asset']}` | {sampler} | {r['steps']} | {r['tokens']} | **{r['marked']}** | {steps} "
                     f"| {r['expected_marked']:.2g} |")
    return "\n".join(lines) + "\n"


def classroom_block() -> str:
    lines = ["| saved run | source | one run alone (median of 3) | first word | first step | Done | last Done / one run "
             "| failures | server process's CPU during the class | load average (1 min) before -> after |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in CLASSROOMS:
        s = load(name)["summary"]
        source = "vLLM server, tiny pair" if s["vllm_server"] else f"in-process {s['preset']}"
        lines.append(f"| `{name}` | {source}, {s['clients']} {s['prompts']} | {s['alone_done_s']:.1f} s | {s['first_word']} "
                     f"| {s['first_step']} | {s['done']} | **{s['last_done_over_alone']:.2f}x** | {s['failures']} "
                     f"| {s['class_server_cpu_s']:.1f} s | {s['machine_before']['load_average'][0]:.1f} -> "
                     f"{s['machine_after']['load_average'][0]:.1f} |")
    return "\n".join(lines) + "\n"


def blocks() -> dict[str, str]:
    """Every generated block, by name."""
    return {"readme-speed": readme_block(), "cpu-avx512": cpu_block(RUNS[0]), "cpu-avx2": cpu_block(RUNS[1]),
            "cpu-avx512-2026-11-28": cpu_block(EARLIER[0]), "cpu-avx512-fixed": cpu_block(EARLIER[1]),
            "cpu-avx512-bf16": cpu_block(EARLIER[2]), "cpu-avx512-int4": cpu_block(EARLIER[3]),
            "peer-verdict": verdict_block(), "phases": phases_block(),
            "prepacked-rerun": rerun_block(), "int4-k-scan": k_scan_block(), "cost-model": cost_model_block(),
            "vllm-audit": audit_block(),
            "vllm-sampled-runs": sampled_runs_block(), "classroom-vllm": classroom_block()}


def render(text: str, rendered: dict[str, str]) -> str:
    """`text` with each generated block's body replaced by its rendering."""
    def body(match: re.Match) -> str:
        if match.group("name") not in rendered:
            raise SystemExit(f"Unknown generated block {match.group('name')!r}: scripts/benchmark_doc.py renders "
                             f"{', '.join(rendered)}.")
        return match.group(1) + rendered[match.group("name")] + match.group(4)
    return BLOCK.sub(body, text)


def figure() -> str:
    """docs/benchmark-speedup.svg: the headline rows of the AVX-512 run."""
    return speedup_svg(load(RUNS[0].file))


def outputs() -> dict[Path, str]:
    """Each file this script owns the measured parts of, as it should read."""
    rendered = blocks()
    return {README: render(README.read_text(encoding="utf-8"), rendered),
            BENCH: render(BENCH.read_text(encoding="utf-8"), rendered), SVG: figure()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the generated blocks and the figure")
    parser.add_argument("--check", action="store_true", help="exit 1 when a file differs from the saved runs")
    args = parser.parse_args(argv)
    stale = [path for path, text in outputs().items() if path.read_text(encoding="utf-8") != text]
    if args.write:
        for path, text in outputs().items():
            path.write_text(text, encoding="utf-8")
        print("wrote " + ", ".join(str(path.relative_to(ROOT)) for path in stale) if stale else "up to date")
        return 0
    for path in stale:
        print(f"{path.relative_to(ROOT)} differs from the saved runs: run python scripts/benchmark_doc.py --write")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
