"""`python -m engine load`: the concurrency grid (engine/load/) on a vLLM server with speculation and
on the same weights without, written as specviz.load/1. Either two running servers (--server,
--nospec-server) or a pair to serve (--target, --draft): then the speculative server is started,
measured and stopped before the one without starts (memory is short). Torch-free."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any, Callable

from engine.cli.arguments import UsageError
from engine.cli.machine import machine_record, provenance
from engine.config import SpecConfig
from engine.formats.load_format import load_document, save_load
from engine.load.runner import DEFAULT_LEVELS, run_server
from engine.vllm.transport import VllmError

DEFAULT_PROMPTS = ("Write a Python function that returns the n-th Fibonacci number.",
                   "Explain in two sentences what a hash table is.",
                   "List three uses of a binary search.",
                   "def quicksort(items):")
EAGER = ("--compilation-config", '{"mode": 0}')


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
    load.add_argument("--out", type=Path, required=True, help="write the specviz.load/1 document here")
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


def _started(args: argparse.Namespace, method: str, measure: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Serve the pair by `method` ("none": target only), measure it, stop it."""
    from engine.vllm.server import ServerSpec, start_server
    spec = ServerSpec(target=args.target, draft=args.draft if method == "draft_model" else None, method=method,
                      k=args.k, dtype=args.dtype, extra_args=EAGER if args.eager else ())
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(spec, Path(folder) / "server.log")
        try:
            return measure(str(server.address))
        finally:
            server.stop()


def command_load(args: argparse.Namespace) -> int:
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
    records = []
    try:
        for method, url in ((args.method, args.server), ("none", args.nospec_server)):
            def measure(address: str, method: str = method) -> dict[str, Any]:
                return run_server(address, prompts, levels, config, args.method, print)
            record = measure(url) if urls else _started(args, method, measure)
            if record["speculative"] != (method != "none"):
                raise UsageError(f"the server at {record['address']} runs "
                                 f"{'with' if record['speculative'] else 'without'} speculation: "
                                 f"{'--nospec-server' if method == 'none' else '--server'} must run "
                                 f"{'without' if method == 'none' else 'with'} it")
            records.append(record)
    except VllmError as error:
        raise UsageError(str(error)) from None
    if records[0]["model"] != records[1]["model"]:
        raise UsageError(f"the two servers serve different models ({records[0]['model']!r}, {records[1]['model']!r})")
    pair = {"target": args.target or records[0]["model"], "draft": args.draft if args.method == "draft_model" else None,
            "method": args.method, "k": records[0]["k"], "dtype": args.dtype}
    settings = {"temperature": args.temperature, "max_tokens": args.max_tokens, "levels": levels, "prompts": prompts}
    document = load_document(pair, settings, records, machine_record(), provenance())
    try:
        save_load(document, args.out)
    except OSError as error:
        raise UsageError(f"cannot write {args.out}: {error.strerror}") from None
    print(crossover_line(records))
    print(f"wrote {args.out}")
    return 0


def crossover_line(records: list[dict[str, Any]]) -> str:
    """The ratio of aggregate tokens/s per level and the first level where speculation stops paying."""
    ratios = [(spec["concurrency"], spec["aggregate_tokens_per_s"] / base["aggregate_tokens_per_s"])
              for spec, base in zip(records[0]["levels"], records[1]["levels"]) if base["aggregate_tokens_per_s"] > 0]
    text = "  ".join(f"N={n}: {ratio:.2f}x" for n, ratio in ratios)
    crossover = next((n for n, ratio in ratios if ratio < 1.0), None)
    return (f"aggregate speedup {text}; " + (f"speculation stops paying at N={crossover}" if crossover is not None
                                               else "speculation pays at every level"))
