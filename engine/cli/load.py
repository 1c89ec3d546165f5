"""`python -m engine load`: the concurrency grid (engine/load/) on a vLLM server with speculation and
on the same weights without, written as specviz.load/1. Either two running servers (--server,
--nospec-server) or a pair to serve (--target, --draft): then the speculative server is started,
measured and stopped before the one without starts (memory is short). When the second server cannot be
measured, the first one's levels are saved as an unfinished run, and `--resume FILE` measures only the
missing server (a running one, or the file's pair started again) and writes the whole run. Torch-free."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from engine.cli.arguments import UsageError
from engine.cli.machine import machine_record, provenance
from engine.config import SpecConfig
from engine.formats.load_format import LoadFormatError, save_load, unfinished_document
from engine.formats.load_reader import read_load, read_unfinished
from engine.load.batch_model import disagreements, document_model, why_sentence
from engine.load.runner import DEFAULT_LEVELS, level_line, probe_line, stop_line
from engine.load.stats import aggregate_ratios, measured_crossover, other_traffic
from engine.load.sweep import DEFAULT_PROMPTS, BaselineMissing, Served, measure_servers, stopped, sweep_document
from engine.vllm.server_info import FIX_NAME
from engine.vllm.transport import VllmError


def add_load_parser(commands: Any, handler: Callable[[argparse.Namespace], int]) -> None:
    load = commands.add_parser("load", help="concurrent requests on a vLLM server with and without speculation")
    load.add_argument("--server", help="URL of the vLLM server with speculation")
    load.add_argument("--nospec-server", help="URL of the same model served without speculation")
    load.add_argument("--target", help="start the servers: the target model's folder")
    load.add_argument("--draft", help="the draft model's folder (method draft_model)")
    load.add_argument("--method", default="draft_model", choices=("draft_model", "ngram"), help="speculative method")
    load.add_argument("--k", type=int, default=3, help="draft tokens per step of a started server")
    load.add_argument("--dtype", default="float32", help="dtype of a started server")
    load.add_argument("--eager", action="store_true", help="started servers run eagerly (no torch.compile)")
    load.add_argument("--fix-cpu-sampler", action="store_true",
                      help="started servers run SpecViz's fix of vLLM 0.32's CPU sampler (vLLM #55005: as shipped, its "
                           "speculation at T > 0 does not sample the target's distribution)")
    load.add_argument("--levels", default=",".join(map(str, DEFAULT_LEVELS)), help="comma-separated concurrencies")
    load.add_argument("--max-tokens", type=int, default=32, help="new tokens per request")
    load.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    load.add_argument("--prompts", type=Path, help="JSON list of prompts or a text file with one per line")
    load.add_argument("--out", type=Path, help="write the specviz.load/1 document here")
    load.add_argument("--summary", type=Path, help="print a saved load run's levels, crossover and batch cost model "
                                                   "(runs nothing)")
    load.add_argument("--resume", type=Path, help="finish an unfinished run (its server without speculation could not "
                                                  "be measured): measure only that server, at --nospec-server or "
                                                  "started from the file's pair; the pair and settings are the file's")
    load.set_defaults(handler=handler)


def _levels(text: str) -> list[int]:
    try:
        levels = [int(word) for word in text.split(",") if word.strip()]
    except ValueError:
        raise UsageError(f"--levels must be comma-separated whole numbers, got {text!r}") from None
    if not levels or min(levels) < 1:
        raise UsageError(f"--levels must name at least one concurrency of 1 or more, got {text!r}")
    return levels


def _prompts(path: Path | None) -> list[str]:
    if path is None:
        return list(DEFAULT_PROMPTS)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise UsageError(f"cannot read prompts file {path}: {getattr(error, 'strerror', None) or error}") from None
    try:
        prompts = json.loads(text) if text.lstrip().startswith("[") else [line for line in text.splitlines()]
    except json.JSONDecodeError:
        raise UsageError(f"{path} starts like a JSON list but is not valid JSON") from None
    prompts = [p for p in prompts if isinstance(p, str) and p.strip()]
    if not prompts:
        raise UsageError(f"{path} holds no prompt")
    return prompts


def command_load(args: argparse.Namespace) -> int:
    if args.summary is not None:
        try:
            document = read_load(args.summary)
        except (LoadFormatError, OSError) as error:
            raise UsageError(f"cannot read {args.summary}: {getattr(error, 'strerror', None) or error}") from None
        print("\n".join(summary_lines(document)))
        return 0
    if args.resume is not None:
        return _resume(args)
    if args.out is None:
        raise UsageError("--out FILE is needed (or --summary FILE to print a saved run)")
    levels, prompts = _levels(args.levels), _prompts(args.prompts)
    if args.max_tokens < 1:
        raise UsageError("--max-tokens must be 1 or more")
    _check_out(args.out)
    urls = args.server is not None or args.nospec_server is not None
    if urls == (args.target is not None) or (urls and (args.server is None or args.nospec_server is None)):
        raise UsageError("give either both --server and --nospec-server, or --target (and --draft) to start them")
    if args.target is not None and args.method == "draft_model" and not args.draft:
        raise UsageError("--method draft_model needs --draft FOLDER")
    config = SpecConfig(temperature=args.temperature, max_new_tokens=args.max_tokens)
    served = (Served(args.target, args.draft, args.method, args.k, args.dtype, args.eager, args.fix_cpu_sampler)
              if args.target else None)
    if args.temperature > 0 and not args.fix_cpu_sampler:
        print("note: at T > 0 vLLM 0.32's CPU speculation does not sample the target's distribution (vLLM #55005); "
              "a started server takes SpecViz's fix with --fix-cpu-sampler, a running one with "
              "`scripts/vllm.sh start --fix-cpu-sampler` (each server's record names the fix when it ran)",
              file=sys.stderr)
    pair = {"target": args.target, "draft": args.draft, "method": args.method, "dtype": args.dtype}
    return _measure_and_save(args.out, (args.server, args.nospec_server) if urls else None, served, pair, prompts,
                             levels, config, provenance())


def _resume(args: argparse.Namespace) -> int:
    """Measure the missing server of an unfinished run and write the whole run (to --out, or over the file)."""
    if args.server is not None or args.target is not None or args.draft is not None:
        raise UsageError("--resume takes the pair and settings from the file: give only --nospec-server URL (or "
                         "nothing, to start the file's target alone), --eager and --out")
    try:
        unfinished = read_unfinished(args.resume)
    except (LoadFormatError, OSError) as error:
        raise UsageError(f"cannot resume {args.resume}: {getattr(error, 'strerror', None) or error}") from None
    out = args.out or args.resume
    _check_out(out)
    here, there = machine_record(), unfinished["machine"]
    if any(here.get(key) != there.get(key) for key in ("cpu_model", "cores")):
        raise UsageError(f"{args.resume} was measured on {there.get('cpu_model')} ({there.get('cores')} cores), this "
                         f"machine is {here.get('cpu_model')} ({here.get('cores')} cores): a load run compares its "
                         "two servers on one machine")
    pair, settings = unfinished["pair"], unfinished["settings"]
    config = SpecConfig(temperature=settings["temperature"], max_new_tokens=settings["max_tokens"])
    fixed = FIX_NAME in unfinished["servers"][0].get("engine", "")      # the baseline as the first server ran
    served = None if args.nospec_server else Served(pair["target"], pair["draft"], pair["method"], pair["k"],
                                                    pair["dtype"], args.eager, fixed or args.fix_cpu_sampler)
    resumed = provenance()
    return _measure_and_save(out, ("", args.nospec_server) if args.nospec_server else None, served, pair,
                             settings["prompts"], settings["levels"], config,
                             {"command": f"{unfinished['command']} ; resumed: {resumed['command']}",
                              "commit": unfinished["commit"]}, unfinished["servers"][0], unfinished["machine"])


def _check_out(out: Path) -> None:
    if not out.resolve().parent.is_dir():
        raise UsageError(f"cannot write {out}: its folder does not exist")


def _measure_and_save(out: Path, urls: tuple[str, str] | None, served: Served | None, pair: dict[str, Any],
                      prompts: list[str], levels: list[int], config: SpecConfig, origin: dict[str, str],
                      measured: dict[str, Any] | None = None, machine: dict[str, Any] | None = None) -> int:
    """Measure (only the second server when `measured` is the first's record), save, print the verdict; exit 1
    when the run stopped early or the second server could not be measured (then the first's levels are saved,
    unfinished, for --resume)."""
    def document_of(records: list[dict[str, Any]]) -> dict[str, Any]:
        return sweep_document(records, pair["target"], pair["draft"], pair["method"], pair["dtype"], prompts, levels,
                              config, machine or machine_record(), origin)
    try:
        records = measure_servers(urls, served, pair["method"], prompts, levels, config,
                                  lambda line: print(line, flush=True), measured)
    except BaselineMissing as missing:
        _save(unfinished_document(document_of([missing.measured]), str(missing)), out)
        kept = len(missing.measured["levels"])
        print(f"error: the server without speculation could not be measured: {missing} The server with "
              f"speculation's {kept} level{'s are' if kept > 1 else ' is'} saved in {out}, unfinished: finish the run "
              f"with `python -m engine load --resume {out}` (add --nospec-server URL for a running server)",
              file=sys.stderr)
        return 1
    except VllmError as error:
        raise UsageError(str(error)) from None
    document = document_of(records)
    _save(document, out)
    print("\n".join(verdict_lines(document)))
    print(f"wrote {out}")
    if (stop := stopped(document)) is not None:
        kept = len(records[0]["levels"])
        print(f"error: the run stopped at N={stop[1]} on {stop[0]}; what it measured before ({kept} "
              f"level{'s' if kept > 1 else ''}) is saved in {out}", file=sys.stderr)
        return 1
    return 0


def _save(document: dict[str, Any], out: Path) -> None:
    try:
        save_load(document, out)
    except OSError as error:
        raise UsageError(f"cannot write {out}: {error.strerror}") from None


def summary_lines(document: dict[str, Any]) -> list[str]:
    """What a run printed as it went (each level, the probe, a stop), then its verdict (a run cut short printed
    levels of the other server that it then dropped: each point needs both)."""
    lines = []
    for server in document["servers"]:
        if server.get("forward_probe"):
            lines.append(probe_line(server["forward_probe"]))
        lines += [level_line(server["speculative"], level) for level in server["levels"]]
        if server.get("stopped"):
            lines.append(stop_line(server["speculative"], server["stopped"]))
    return lines + verdict_lines(document)


def verdict_lines(document: dict[str, Any]) -> list[str]:
    """The crossover, other traffic, where the run stopped, and the batch cost model."""
    spec = document["servers"][0]
    measured = aggregate_ratios(document)
    lines = [crossover_line(measured)]
    if (stop := stopped(document)) is not None:
        lines.append(f"the run stopped at N={stop[1]} on {stop[0]}: the levels before it are kept")
    if shared := other_traffic(spec["levels"]):
        lines.append(f"the server with speculation served other requests too at N={','.join(map(str, shared))}: "
                     "those levels' numbers include that traffic")
    model = document_model(document)
    if model is None:
        return [*lines, "batch cost model: no forward probe in this run"]
    predicted = model.crossover()
    off = disagreements(model, measured)
    lines.append(f"batch cost model (calibrated at N={model.calibrated_n}): predicted "
                 + "  ".join(f"N={point.n}: {point.ratio:.2f}x" for point in model.points)
                 + f"; crossover predicted {f'N={predicted.n}' if predicted else 'nowhere'}")
    lines.append(why_sentence(model))
    lines.append("model off by more than 15 % at " + ", ".join(f"N={n} ({p:.2f}x predicted, {m:.2f}x measured)"
                                                              for n, p, m in off) if off else
                 "model within 15 % of the measured ratio at every N")
    return lines


def crossover_line(ratios: dict[int, float]) -> str:
    """The ratio of aggregate tokens/s per level and the first level where speculation stops paying."""
    text = "  ".join(f"N={n}: {ratio:.2f}x" for n, ratio in ratios.items())
    crossover = measured_crossover(ratios)
    return (f"aggregate speedup {text}; " + (f"speculation stops paying at N={crossover}" if crossover is not None
                                               else "speculation pays at every level"))
