"""Record the Run tab's sampled vLLM runs of the default pair (issue #38 item 8): one request at T = 0.7 on a vLLM
0.32 server as shipped (its CPU sampler broken, upstream issue #55005) and the same request on a server running
SpecViz's fix (plugins/vllm_cpu_sampler_fix), each audited by SpecViz's own float32 target, so a hosted page, which
cannot reach a server, shows what vLLM's speculation emits at T = 0.7 and what the audit catches.

    .venv/bin/python scripts/record_vllm_sampled.py            # about 6 minutes on a 2-core CPU

The servers run one after the other (the default pair's float32 server holds about 16 GiB), float32, draft model,
k = 5, eager. Writes assets/traces/qwen-coder-vllm-sampled{,-fixed}.json (each trace with its audit,
engine/formats/trace_audit.py) and benchmarks/data/vllm-sampled-runs-<date>.json (the command, commit, machine, the
servers and each run's audit counts), which tests/test_recorded_vllm_runs.py ties the assets to.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.audit.marks import trace_audit  # noqa: E402
from engine.cli.machine import machine_record, provenance  # noqa: E402
from engine.config import SpecConfig  # noqa: E402
from engine.formats.trace import Trace  # noqa: E402
from engine.loading.model_folders import preset_folders  # noqa: E402
from engine.vllm.server import ServerSpec, start_server  # noqa: E402
from engine.vllm.source import start_generation  # noqa: E402

PROMPT = "Write a Python function that checks whether a string is a palindrome."   # the Run tab's default prompt
K, TEMPERATURE, TOKENS, SEED = 5, 0.7, 96, 0
EAGER = ("--enforce-eager",)
RUNS = {"qwen-coder-vllm-sampled.json": False, "qwen-coder-vllm-sampled-fixed.json": True}   # name -> fixed sampler
SCORED_BY = "SpecViz's Qwen2.5-Coder-1.5B target (float32, stock kernels)"


def record(fixed: bool, log: Path) -> Trace:
    """One request on a freshly started server, stopped after."""
    target, draft = preset_folders("qwen-coder")
    spec = ServerSpec(target=target, draft=draft, method="draft_model", k=K, dtype="float32", max_model_len=1024,
                      kv_cache_gib=1, extra_args=EAGER, fix_cpu_sampler=fixed)
    server = start_server(spec, log, timeout_s=1800)
    try:
        generation = start_generation(str(server.address), PROMPT,
                                      SpecConfig(k=K, temperature=TEMPERATURE, max_new_tokens=TOKENS, seed=SEED))
        while not generation.is_done:
            generation.step()
        return generation.trace()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--assets", default=str(ROOT / "assets" / "traces"))
    parser.add_argument("--data", default=str(ROOT / "benchmarks" / "data"))
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="specviz-vllm-sampled-"))
    traces = {name: record(fixed, folder / f"{name}.log") for name, fixed in RUNS.items()}
    print("recorded:", {name: len(trace.steps) for name, trace in traces.items()}, flush=True)

    from engine.audit.score import score_tokens, steps_of          # torch: the target loads after the servers
    from engine.loading.models import load_pair
    pair = load_pair("qwen-coder", draft="ngram", device="cpu", target_dtype="float32", prepack=False)
    record_runs = []
    for name, trace in traces.items():
        audit = score_tokens(pair, trace.prompt.token_ids, trace.output.token_ids, TEMPERATURE,
                             steps=steps_of([len(step.emitted) for step in trace.steps]))
        audited = dataclasses.replace(trace, audit=trace_audit(audit, SCORED_BY))
        audited.save(Path(args.assets) / name)
        print(f"{name}: {audit.summary()}", flush=True)
        record_runs.append({"asset": name, "fixed_sampler": RUNS[name], "engine": trace.config.engine,
                            "steps": len(trace.steps), "tokens": len(trace.output.token_ids),
                            "marked": len(audit.marked), "expected_marked": audit.expected_marked,
                            "marked_steps": list(audit.marked_steps), "summary": audit.summary()})
    document = {"format": "specviz.vllm-sampled-runs/1", **provenance(), "machine": machine_record(),
                "prompt": PROMPT, "k": K, "temperature": TEMPERATURE, "max_tokens": TOKENS, "seed": SEED,
                "server": {"dtype": "float32", "method": "draft_model", "extra_args": list(EAGER)},
                "scored_by": SCORED_BY, "runs": record_runs}
    out = Path(args.data) / f"vllm-sampled-runs-{datetime.date.today().isoformat()}.json"
    out.write_text(json.dumps(document, indent=1) + "\n")
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
