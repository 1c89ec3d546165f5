"""bench.py: SpecViz's engine against target-only decoding and transformers' assisted
generation, in one process on one machine (docs/benchmark.md).

    python bench.py                      # the default rows, 5 prompts, 32 tokens (+ a bf16 target where native)
    python bench.py --grid --repeats 2   # every configuration (benchmarks/configurations.py)
    python bench.py --quick              # tiny-random: checks that everything runs, in a minute
    python bench.py --device cuda        # on a GPU: eager against CUDA graphs, transformers' assisted generation
    python bench.py --device cuda --random-weights .gpu-carry/qwen-shapes   # a GPU without the preset's weights
    python bench.py --peer vllm --vllm-threads 1,2 --vllm-probabilistic   # vLLM's rows beside (benchmarks/vllm_peer.py)

Every configuration runs every prompt `--repeats` times; the median wall time per
(configuration, prompt) is kept and tokens/s are summed over prompts. Ratios within one run,
not absolute times, are the figures of merit. Each row is divided by two references:
target-only decoding on the stock float32 target, and on the same (prepacked) target, so
what speculation buys stays apart from what the kernels buy. On a GPU (--device cuda) the two
references are target-only eager and target-only on the same CUDA graphs; the JSON adds the
device's measured costs (c, v per k), the graphs' capture time and the peak GPU memory. With
--random-weights (no preset weights there) acceptance is about 0: the rows measure costs, and
scripts/gpu_check.py turns them into predicted speedups at real-weight acceptance. A fresh process first measures
the warm start (seconds to the first step) and the peak resident memory of the app's default
pair. With a vLLM environment installed (.venv-vllm, scripts/vllm.sh) the run adds vLLM's rows on
the same weights (`--peer vllm`; `--peer none` leaves them out) and the ratio "vs vLLM's best
speculative row"; their emitted tokens are saved beside the results for `python -m engine.audit`.
Writes bench-results.json (and with --figure the SVG of docs/benchmark.md) and prints a
markdown table and a closing note.
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import tempfile
from pathlib import Path

from benchmarks.configurations import INT4_DERIVED, SUITES, TARGET_ONLY, selected
from benchmarks.figure import write_figure
from benchmarks.prompts import PROMPTS
from benchmarks.rows import Row
from benchmarks.runners import load_pairs, measure
from benchmarks.startup import measure_startup, startup_line
from benchmarks.table import closing_note, markdown, phase_lines, table_row
from benchmarks.load_rows import load_lines
from benchmarks.vllm_peer import peer_line
from engine.cli.machine import describe_machine, machine_record, provenance
from engine.config import SpecConfig
from engine.vllm.transport import VllmError

BF16_PAIR = "bf16-target"       # benchmarks/configurations.py PAIRS: the int8 draft on a bf16 target where native
BF16_TARGET_PAIRS = (BF16_PAIR, INT4_DERIVED)   # pairs running that same target: checked against its target-only
CPU_REPEATS = 1      # a CPU run of the default rows takes about 10 minutes already
GPU_REPEATS = 3      # a GPU row takes seconds: each (row, prompt) is the median of three, after the warm-up

# The closing note quotes each suite's `best` row: on a CPU the app's default configuration (the
# Run tab starts from the bundled greedy trace's settings, k = 5 fixed; adaptive k measured slower
# on the Xeon and the EPYC, docs/benchmark.md); on a GPU the model drafter on graphs. With --k N
# the note quotes the k = N row instead.


def run(args: argparse.Namespace) -> dict:
    suite = SUITES[args.suite or args.device]
    cpu = machine_record()                          # the CPU, its kernel flags and its load as the run starts
    preset = "tiny-random" if args.quick else args.preset
    startup = {} if args.no_startup or suite.device == "cuda" else measure_startup(preset)
    configurations = selected(args.grid, args.only, args.k, suite, native_bf16=_native_bf16(suite, preset))
    random_weights = Path(args.random_weights) if args.random_weights else None
    pairs = load_pairs(preset, configurations, suite, random_weights, device=args.device,
                       shape="small" if args.quick else "default")
    rows: list[Row] = []
    measured: dict[float, list[tuple[Row, object]]] = {temperature: [] for temperature in args.temperatures}
    stock: dict[float, dict] = {}            # temperature -> the stock target-only outputs (greedy rows' identity)
    own_target: dict[str, dict] = {}         # pair -> its greedy target-only outputs (the bf16 target's identity)
    # Each configuration runs at every temperature back to back, so its greedy and sampled rows are minutes apart:
    # a machine's speed drifts over a run, and with every greedy row first the prepacked target-only row read 30 %
    # slower at T = 0.7 (2026-11-28), where alternating the two in one process measured no gap (docs/benchmark.md).
    for configuration in configurations:
        for temperature in args.temperatures:
            name = configuration.label(args.k)
            print(f"  T={temperature:g} {name}", file=sys.stderr)
            row = Row(name, temperature)
            config = SpecConfig(k=args.k, temperature=temperature, max_new_tokens=args.max_new_tokens,
                                seed=0).replace(**configuration.changes)
            outputs = measure(configuration, row, pairs[configuration.pair], config, args.repeats,
                              stock.get(0.0) if temperature == 0 else None)
            if configuration.name == suite.reference_stock:
                stock[temperature] = outputs
                row.identical = True if temperature == 0 else None
            if configuration.kind == TARGET_ONLY and temperature == 0:
                own_target[configuration.pair] = outputs
            if configuration.pair in BF16_TARGET_PAIRS and temperature == 0:     # the same bf16 target's own output
                reference = own_target.get(BF16_PAIR)
                row.identical = None if reference is None else outputs == reference
            rows.append(row)
            measured[temperature].append((row, configuration))
    table = [table_row(row, configuration, rows, args.k, suite)
             for temperature in args.temperatures for row, configuration in measured[temperature]]
    greedy_reference = stock.get(0.0)
    # read before the peer's rows free every pair but the audit's (a run of 2026-11-29 lost it there)
    bf16_target = bf16_target_record(pairs[BF16_PAIR].target_dtype) if BF16_PAIR in pairs else None
    peer = _peer(args, suite, preset, pairs, rows, table, greedy_reference) if _wants_peer(args, suite) else None
    results = {"preset": preset, "device": suite.device, "random_weights": random_weights is not None,
               **provenance(args.argv), "machine": describe_machine(), "cpu": cpu | {"load_average_after": machine_record()["load_average"]},
               "repeats": args.repeats, "k": args.k,
               "max_new_tokens": args.max_new_tokens, "prompts": PROMPTS, "startup": startup, "rows": table}
    if bf16_target is not None:
        results["bf16_target"] = bf16_target
    if peer is not None:
        results["vllm"] = peer
    if args.load:
        results["load"] = _load(args, preset)
    costs = [pair.device_costs.to_dict() for pair in pairs.values() if pair.device_costs is not None]
    if costs:
        results["device_costs"] = costs[0]          # c, v per k, capture seconds (engine/device_costs.py)
    if any(pair.device.type == "cuda" for pair in pairs.values()):
        import torch
        results["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return results




def _native_bf16(suite, preset: str) -> bool:
    """Whether this CPU computes bfloat16 natively (engine/runtime/cpu/native_bf16.py), so the default run adds the
    bfloat16 target's rows: the fastest exact configuration there. Not for tiny-random (--quick), whose rows only
    check that everything runs."""
    if suite.device != "cpu" or preset == "tiny-random":
        return False
    from engine.runtime.cpu.native_bf16 import native_bf16_refusal
    return native_bf16_refusal() is None


def bf16_target_record(target_dtype: str) -> dict:
    """The bf16-target rows' dtype, why float32 ran instead where it did, and what their "identical" means."""
    from engine.runtime.cpu.native_bf16 import native_bf16_refusal
    return {"target_dtype": target_dtype, "fallback_reason": native_bf16_refusal() if target_dtype != "bfloat16" else None,
            "claim": f"greedy rows on this pair are compared with target-only decoding of the same {target_dtype} "
                     "target; identity with the float32 target's output is a different claim"}


def bf16_target_line(results: dict) -> str:
    """One sentence under the table on the bf16-target rows, or "" when they did not run."""
    record = results.get("bf16_target")
    if not record:
        return ""
    ran = f"The bf16-target rows ran a {record['target_dtype']} target"
    why = f" ({record['fallback_reason']})" if record.get("fallback_reason") else ""
    return f"{ran}{why}; {record['claim']}."


def _load(args: argparse.Namespace, preset: str) -> dict:
    """The load sweep on the preset's pair (benchmarks/load_rows.py), saved as <out>.load.json."""
    from benchmarks.load_rows import run_load
    from benchmarks.vllm_peer import local_folders
    from engine.load.sweep import Served
    target, draft = local_folders(preset)
    out = Path(args.out)
    served = Served(target, draft, "draft_model" if draft else "ngram", args.k, args.load_dtype,
                    fix_cpu_sampler=args.vllm_fix_cpu_sampler)
    config = SpecConfig(temperature=0.0, max_new_tokens=args.max_new_tokens)
    return run_load(served, args.load_levels, config, out.with_name(out.stem + ".load.json"), machine_record(),
                    provenance(args.argv), lambda line: print(f"  load: {line}", file=sys.stderr))


def _wants_peer(args: argparse.Namespace, suite) -> bool:
    """vLLM's rows run when asked (--peer vllm), or by default where a vLLM environment is installed
    and the run is a CPU run on a preset's real weights."""
    from engine.vllm.server import vllm_python
    if args.peer == "auto":
        return vllm_python() is not None and suite.device == "cpu" and not args.quick
    return args.peer == "vllm"


def _peer(args: argparse.Namespace, suite, preset: str, pairs: dict, rows: list[Row], table: list[dict],
          greedy_reference: dict | None) -> dict:
    """vLLM's rows (benchmarks/vllm_peer.py), added to `table`; returns the results' "vllm" part."""
    import torch
    from engine.audit.runs import emitted_document
    from benchmarks.vllm_peer import (add_vs_best_peer, local_folders, peer_configurations, peer_table_row, run_peer,
                                      speed_dtype)
    target, draft = local_folders(preset)
    plain = pairs["plain"]
    for key in [key for key in pairs if key != "plain"]:     # memory for the server: only the audit's target stays
        del pairs[key]
    gc.collect()
    prompts = {name: plain.encode_prompt(text) for name, text in PROMPTS.items()}
    reference = {name: greedy_reference[text] for name, text in PROMPTS.items()} if greedy_reference else None
    configurations = peer_configurations(args.vllm_threads, args.vllm_probabilistic, speed_dtype(args.vllm_dtype),
                                         args.vllm_bindings, args.vllm_fix_cpu_sampler)
    base = SpecConfig(k=args.k, max_new_tokens=args.max_new_tokens, seed=0)
    out = Path(args.out)
    logs = Path(tempfile.mkdtemp(prefix="specviz-vllm-bench-"))         # the servers' logs, kept after the run
    measured = run_peer(configurations, target, draft, prompts, args.temperatures, base, args.repeats, reference,
                        logs, audit_pair=plain)
    table += [peer_table_row(peer, rows, args.k, suite) for peer in measured.peers]
    table.sort(key=lambda row: row["temperature"])          # stable: each temperature's SpecViz rows, then vLLM's
    add_vs_best_peer(table)
    emitted = out.with_name(out.stem + ".vllm-emitted.json")
    emitted.write_text(json.dumps(emitted_document(measured.emitted)), encoding="utf-8")
    return {"engine": measured.peers[0].engine if measured.peers else "", "target": target, "draft": draft,
            "servers": measured.servers, "specviz_threads": torch.get_num_threads(), "emitted": str(emitted)}


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="qwen-coder")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                        help="cpu (default): the CPU kernels' rows; cuda: eager against CUDA graphs")
    parser.add_argument("--suite", choices=sorted(SUITES), default=None,
                        help="another device's rows on this one (the GPU suite on a CPU: its tests)")
    parser.add_argument("--random-weights", default="", metavar="FOLDER",
                        help="random weights at the preset's shapes (FOLDER: draft/ and target/ configs, the "
                             "target's tokenizer); for a GPU without the preset's weights")
    parser.add_argument("--quick", action="store_true", help="tiny-random: checks that every row runs")
    parser.add_argument("--grid", action="store_true", help="every configuration, not only the default rows")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"timed runs per prompt, the median kept (default {CPU_REPEATS}; {GPU_REPEATS} with "
                             "--device cuda, where a run takes seconds)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--temperatures", default="0,0.7", help="comma-separated; 0 is greedy")
    parser.add_argument("--only", default="", help="parts of row names to run, separated by | "
                        "(the two target-only references always run)")
    parser.add_argument("--no-startup", action="store_true", help="skip the fresh-process warm-start and memory measurement")
    parser.add_argument("--figure", default="", help="also write the speedup figure (SVG) to this path")
    parser.add_argument("--out", default="bench-results.json")
    parser.add_argument("--peer", choices=("auto", "vllm", "none"), default="auto",
                        help="vllm: add vLLM's rows on the same weights (a server per configuration); auto (default): "
                             "when .venv-vllm is installed and the run is a CPU run on a preset's weights")
    parser.add_argument("--vllm-threads", default="2", help="comma-separated OMP_NUM_THREADS for vLLM's rows")
    parser.add_argument("--vllm-dtype", default="auto",
                        help="vLLM's speed rows' dtype (its identity row is float32); auto (default): bfloat16 where "
                             "the CPU computes it natively (AVX-512 BF16 or AMX), else float32, vLLM's fastest there")
    parser.add_argument("--vllm-bind-all", action="store_true",
                        help="vLLM's engine computes on cores 0..n-1 for n threads (by default vLLM keeps a core "
                             "for its API process: on 2 cores it computes on one); same as --vllm-bindings all")
    parser.add_argument("--vllm-bindings", default="auto",
                        help="comma-separated: auto (vLLM's own core binding), all (every core); each gets its rows")
    parser.add_argument("--vllm-probabilistic", action="store_true",
                        help="also vLLM's draft-model row with draft_sample_method 'probabilistic'")
    parser.add_argument("--vllm-fix-cpu-sampler", action="store_true",
                        help="every vLLM server runs SpecViz's CPU sampler fix (vLLM #55005: as shipped its T > 0 "
                             "speculative rows do not follow the target's law); each row says so")
    parser.add_argument("--load", action="store_true",
                        help="also the load sweep: N requests at once on a vLLM server of the pair with speculation "
                             "and without (saved as <out>.load.json, drawn by Explore's 'Speculation under load')")
    parser.add_argument("--load-levels", default="1,2,4,8,16", help="comma-separated N for --load")
    parser.add_argument("--load-dtype", default="float32", help="the load sweep's servers' dtype")
    args = parser.parse_args(argv)
    if args.repeats is None:
        args.repeats = GPU_REPEATS if (args.suite or args.device) == "cuda" else CPU_REPEATS
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    args.vllm_bindings = ("all",) if args.vllm_bind_all else tuple(args.vllm_bindings.split(","))
    if not args.vllm_bindings or not set(args.vllm_bindings) <= {"auto", "all"}:
        parser.error("--vllm-bindings takes auto, all or both, separated by a comma")
    try:
        args.temperatures = [float(t) for t in args.temperatures.split(",")]
    except ValueError:
        parser.error(f"--temperatures must be comma-separated numbers, got {args.temperatures!r}")
    args.vllm_threads = _counts(parser, "--vllm-threads", args.vllm_threads, "thread count")
    args.only = [part for part in args.only.split("|") if part]
    args.load_levels = _counts(parser, "--load-levels", args.load_levels, "N")
    args.argv = list(sys.argv[1:] if argv is None else argv)        # saved with the run: the command it came from
    if args.random_weights and (args.suite or args.device) != "cuda":
        parser.error("--random-weights stands in for the preset's weights on a GPU: it runs the cuda suite "
                     "(--device cuda, or --suite cuda on a CPU)")
    return args


def _counts(parser: argparse.ArgumentParser, option: str, text: str, what: str) -> list[int]:
    """Comma-separated whole numbers of 1 or more, at least one; else the parser's error naming `option`."""
    try:
        counts = [int(n) for n in text.split(",")]
    except ValueError:
        parser.error(f"{option} must be comma-separated whole numbers, got {text!r}")
    if not counts or min(counts) < 1:
        parser.error(f"{option} needs at least one {what} of 1 or more")
    return counts


def stop_cleanly_on_sigterm() -> None:
    """A SIGTERM (`kill`, a CI's time-out) ends the run as Ctrl-C would, through every `finally`: each vLLM server
    bench.py started is stopped there. Python's default SIGTERM exits at once, which left a server computing (on
    10 GiB) after its bench.py was killed on 2026-11-29 (the next run was then killed for memory)."""
    def leave(signum: int, frame) -> None:
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, leave)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    try:
        results = run(args)
    except (ValueError, VllmError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(results, handle, indent=1)
    if args.figure:
        write_figure(results, Path(args.figure))
    print(markdown(results))
    print()
    if results["startup"]:
        print(startup_line(results["startup"]))
    if results.get("vllm"):
        print(peer_line(results))
    if results.get("bf16_target"):
        print(bf16_target_line(results))
    if results.get("load"):
        print(load_lines(results["load"]))
    for line in phase_lines(results):
        print(line)
    print(closing_note(results))
    return 0


if __name__ == "__main__":
    stop_cleanly_on_sigterm()         # as a program only: a test calling main() keeps pytest's own signal handling
    sys.exit(main())
