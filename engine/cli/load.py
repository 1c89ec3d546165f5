"""`python -m engine load`: the concurrency grid (engine/load/) on a vLLM server with speculation and
on the same weights without, written as specviz.load/1. Either two running servers (--server,
--nospec-server) or a pair to serve (--target, --draft): then the speculative server is started,
measured and stopped before the one without starts (memory is short). Torch-free."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from engine.cli.arguments import UsageError
from engine.cli.machine import machine_record, provenance
from engine.config import SpecConfig
from engine.formats.load_format import LoadFormatError, save_load
from engine.formats.load_reader import read_load
from engine.load.batch_model import disagreements, document_model, why_sentence
from engine.load.runner import DEFAULT_LEVELS, level_line, probe_line, stop_line
from engine.load.stats import aggregate_ratios, measured_crossover, other_traffic
from engine.load.sweep import DEFAULT_PROMPTS, Served, measure_servers, stopped, sweep_document
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
    load.add_argument("--levels", default=",".join(map(str, DEFAULT_LEVELS)), help="comma-separated concurrencies")
    load.add_argument("--max-tokens", type=int, default=32, help="new tokens per request")
    load.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    load.add_argument("--prompts", type=Path, help="JSON list of prompts or a text file with one per line")
    load.add_argument("--out", type=Path, help="write the specviz.load/1 document here")
    load.add_argument("--summary", type=Path, help="print a saved load run's levels, crossover and batch cost model "
                                                   "(runs nothing)")
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
    if args.out is None:
        raise UsageError("--out FILE is needed (or --summary FILE to print a saved run)")
    levels, prompts = _levels(args.levels), _prompts(args.prompts)
    if args.max_tokens < 1:
        raise UsageError("--max-tokens must be 1 or more")
    if not args.out.resolve().parent.is_dir():
        raise UsageError(f"cannot write {args.out}: its folder does not exist")
    urls = args.server is not None or args.nospec_server is not None
    if urls == (args.target is not None) or (urls and (args.server is None or args.nospec_server is None)):
        raise UsageError("give either both --server and --nospec-server, or --target (and --draft) to start them")
    if args.target is not None and args.method == "draft_model" and not args.draft:
        raise UsageError("--method draft_model needs --draft FOLDER")
    config = SpecConfig(temperature=args.temperature, max_new_tokens=args.max_tokens)
    served = Served(args.target, args.draft, args.method, args.k, args.dtype, args.eager) if args.target else None
    try:
        records = measure_servers((args.server, args.nospec_server) if urls else None, served, args.method, prompts,
                                  levels, config, lambda line: print(line, flush=True))
    except VllmError as error:
        raise UsageError(str(error)) from None
    document = sweep_document(records, args.target, args.draft, args.method, args.dtype, prompts, levels, config,
                              machine_record(), provenance())
    try:
        save_load(document, args.out)
    except OSError as error:
        raise UsageError(f"cannot write {args.out}: {error.strerror}") from None
    print("\n".join(verdict_lines(document)))
    print(f"wrote {args.out}")
    if (stop := stopped(document)) is not None:
        kept = len(records[0]["levels"])
        print(f"error: the run stopped at N={stop[1]} on {stop[0]}; what it measured before ({kept} "
              f"level{'s' if kept > 1 else ''}) is saved in {args.out}", file=sys.stderr)
        return 1
    return 0


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
