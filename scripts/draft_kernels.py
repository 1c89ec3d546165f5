"""The draft's weight-only kernels on this CPU, one token at a time: int8 (`Int8Linear`) against int4 (`Int4Linear`).

Times one drafted token's linear layers at the default draft's shapes (Qwen2.5-0.5B: 24 layers of q, k, v, o
and the MLP's three, then the 151,936-row vocabulary head), each layer a separate random matrix, so the weights
stream from memory as a real draft's do (one matrix reused would sit in cache). Random weights: the kernels'
time does not depend on the values. Run it again capped to AVX2 to see what an AVX2-only CPU would run:

    python scripts/draft_kernels.py
    ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 python scripts/draft_kernels.py

It prints the capability torch ran and each kernel's milliseconds (the median of --repeats), and with --out
saves them as JSON with the machine's CPU flags (docs/benchmark.md quotes such a file).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.cli.machine import machine_record, provenance  # noqa: E402  (after the path: a script run from anywhere)
from engine.runtime.cpu.kernel_modules import Int4Linear, Int8Linear  # noqa: E402

HIDDEN, INTERMEDIATE, KV, LAYERS, VOCABULARY = 896, 4864, 128, 24, 151936     # Qwen2.5-0.5B, the default draft
LAYER_SHAPES = ((HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN),
                (INTERMEDIATE, HIDDEN), (INTERMEDIATE, HIDDEN), (HIDDEN, INTERMEDIATE))     # (out, in)
KERNELS = {"int8": Int8Linear, "int4": Int4Linear}


def median_ms(run, repeats: int) -> float:
    run()                                        # the first call pays for allocation
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def time_kernel(layer_type: type, repeats: int) -> dict:
    """One token through the draft's layers and through its head, in milliseconds."""
    generator = torch.Generator().manual_seed(0)

    def layer(out_features: int, in_features: int):
        return layer_type.from_weight(torch.randn(out_features, in_features, generator=generator) / in_features ** 0.5, None)
    layers = [[layer(*shape) for shape in LAYER_SHAPES] for _ in range(LAYERS)]
    head = layer(VOCABULARY, HIDDEN)
    inputs = {size: torch.randn(1, size, generator=generator) for size in (HIDDEN, INTERMEDIATE)}
    with torch.inference_mode():
        body_ms = median_ms(lambda: [module(inputs[module.in_features]) for block in layers for module in block], repeats)
        head_ms = median_ms(lambda: head(inputs[HIDDEN]), repeats)
    return {"layers_ms": round(body_ms, 2), "head_ms": round(head_ms, 2), "total_ms": round(body_ms + head_ms, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", help="save the result as JSON here")
    args = parser.parse_args(argv)
    capability = torch.backends.cpu.get_cpu_capability()
    results = {"what": "one drafted token's linear layers at the default draft's shapes, weight-only kernels",
               "capability": capability, "threads": torch.get_num_threads(), "repeats": args.repeats,
               "cpu": machine_record(), **provenance(sys.argv[1:] if argv is None else argv), "kernels": {}}
    for name, layer_type in KERNELS.items():
        timed = time_kernel(layer_type, args.repeats)
        results["kernels"][name] = timed
        print(f"{capability} {name}: layers {timed['layers_ms']:.1f} ms, head {timed['head_ms']:.1f} ms, "
              f"total {timed['total_ms']:.1f} ms", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
