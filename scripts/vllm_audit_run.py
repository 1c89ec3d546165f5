"""An audited vLLM run (docs/benchmark.md, "vLLM beside SpecViz"): one vLLM server (draft model or
n-gram), N seeded requests per prompt at T = 0.7, each run's tokens scored under the same target by
SpecViz's audit (engine/audit/), counted by kind. By default the smallest end-to-end reproduction:
the tiny random pair of the vLLM tests (tests/vllm_session.py) saved to disk, float32, k = 3; with
--preset, the preset's converted folders (bfloat16 server, bench.py's five prompts, k = 5), scored
by the preset's target in float32.

    .venv/bin/python scripts/vllm_audit_run.py --out benchmarks/data/vllm-tiny-audit.json
    .venv/bin/python scripts/vllm_audit_run.py --preset qwen-coder --draft-sample-method probabilistic --seeds 1

Writes the emitted-tokens document (`python -m engine.audit FILE --target FOLDER/target` reads it
again) and prints the totals. About 5 minutes on a 2-core CPU (the server's first start compiles).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from benchmarks.vllm_peer import PeerConfiguration, request  # noqa: E402
from engine.audit.marks import token_kinds  # noqa: E402
from engine.audit.runs import EmittedRun, emitted_document  # noqa: E402
from engine.audit.score import score_tokens, steps_of  # noqa: E402
from engine.config import SpecConfig  # noqa: E402
from engine.vllm.server import start_server  # noqa: E402
from engine.vllm.server_info import probe  # noqa: E402
from vllm_session import K, save_tiny_pair, tiny_pair  # noqa: E402

PROMPTS = ("abc", "Hello, world", "The quick brown fox", "1 2 3 4 5 6")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--method", choices=("draft_model", "ngram", "none"), default="draft_model")
    parser.add_argument("--draft-sample-method", choices=("greedy", "probabilistic"), default="greedy")
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--preset", default="", help="a preset's converted folders instead of the tiny pair")
    parser.add_argument("--out", default="vllm-audit.json")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="specviz-vllm-audit-"))
    if args.preset:
        from benchmarks.prompts import PROMPTS as BENCH_PROMPTS
        from benchmarks.vllm_peer import local_folders
        from engine.loading.models import load_pair
        target, draft = local_folders(args.preset)
        pair = load_pair(args.preset, draft="ngram", device="cpu", target_dtype="float32", prepack=False)
        prompts, k, dtype = tuple(BENCH_PROMPTS.values()), 5, "bfloat16"
    else:
        save_tiny_pair(folder)
        target, draft, pair, prompts, k, dtype = str(folder / "target"), str(folder / "draft"), tiny_pair(), PROMPTS, K, "float32"
    configuration = PeerConfiguration(args.method, dtype, 2, args.draft_sample_method)
    server = start_server(configuration.spec(target, draft, k, 1024), folder / "server.log", timeout_s=1800)
    runs, totals, kinds_seen, marked_kinds, expected = [], Counter(), Counter(), Counter(), 0.0
    try:
        info = probe(server.address, method=args.method if args.method != "none" else "draft_model", timeout_s=600)
        for seed in range(args.seeds):
            for prompt in prompts:
                ids = pair.encode_prompt(prompt)
                config = SpecConfig(k=k, temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=seed)
                result = request(info, ids, config)
                sizes = result.step_sizes or (1,) * len(result.token_ids)
                drafted = result.step_drafted or (0,) * len(sizes)
                kinds = token_kinds(sizes, drafted)
                audit = score_tokens(pair, ids, result.token_ids, args.temperature, steps=steps_of(sizes), kinds=kinds)
                runs.append(EmittedRun(f"{prompt[:40]!r}, seed {seed}", info.engine, tuple(ids), result.token_ids,
                                       args.temperature, 0, 1.0, tuple(sizes), tuple(drafted)))
                kinds_seen.update(kinds)
                marked_kinds.update(audit.marked_by_kind())
                totals.update(tokens=len(audit.scores), marked=len(audit.marked))
                expected += audit.expected_marked
    finally:
        server.stop()
    summary = {"engine": info.engine, "method": args.method, "draft_sample_method": args.draft_sample_method,
               "preset": args.preset or "tiny (tests/vllm_session.py)", "k": k, "dtype": dtype, "temperature": args.temperature, "requests": len(runs),
               "tokens": totals["tokens"], "marked": totals["marked"], "expected_marked": expected,
               "tokens_by_kind": dict(kinds_seen), "marked_by_kind": dict(marked_kinds)}
    Path(args.out).write_text(json.dumps({**emitted_document(runs), "summary": summary}, indent=1), encoding="utf-8")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
