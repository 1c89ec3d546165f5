"""SpecViz's exact-law oracle against vLLM servers, before and after SpecViz's CPU sampler fix
(plugins/vllm_cpu_sampler_fix; vLLM issue #55005; docs/architecture.md §10):

    .venv/bin/python benchmarks/vllm_sampler_law.py --out benchmarks/data/vllm-cpu-sampler-fix-law.json

The tiny random pair of the vLLM tests (tests/vllm_session.py), float32, served three ways in turn:
target-only, draft model k = 3 as vLLM 0.32 ships, and the same with the fix. Each gets N seeded
requests for the first two tokens of the prompt "abc" at T = 0.6; their empirical law is compared
with the exact two-token law of target-only sampling, enumerated with transformers on the same
weights (tests/oracles.py `exact_joint_law`): the total-variation distance, beside the distance
sampling noise alone gives at this N (N draws from the exact law, mean of 20), and the share of
samples in pairs the target gives less than 1e-6. Then one request with top_k = 5 and one plain
request after it: whether the engine survived top_k. About 15 minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from engine.decode.sampling import SamplingParams  # noqa: E402
from engine.vllm.server import ServerSpec, start_server  # noqa: E402
from engine.vllm.server_info import probe  # noqa: E402
from oracles import END, exact_joint_law, one_torch_thread  # noqa: E402
from vllm_session import K, save_tiny_pair, tiny_pair  # noqa: E402

PROMPT, TOKENS, TEMPERATURE, RARE = "abc", 2, 0.6, 1e-6
CONFIGURATIONS = (("draft model k=3, CPU sampler fix", "draft_model", True), ("draft model k=3", "draft_model", False),
                  ("target-only", "none", False))


def sample(url: str, prompt_ids: list[int], seed: int, extra: dict | None = None) -> tuple[int, ...]:
    body = {"model": "target", "prompt": prompt_ids, "max_tokens": TOKENS, "temperature": TEMPERATURE,
            "seed": seed, "return_token_ids": True} | (extra or {})
    answer = httpx.post(f"{url}/v1/completions", json=body, timeout=600)
    answer.raise_for_status()
    ids = list(answer.json()["choices"][0]["token_ids"])
    return tuple(ids + [END] * (TOKENS - len(ids)))


def total_variation(counts: Counter, law: dict[tuple[int, ...], float]) -> float:
    runs = sum(counts.values())
    cells = set(counts) | set(law)
    return 0.5 * sum(abs(counts.get(cell, 0) / runs - law.get(cell, 0.0)) for cell in cells)


def noise_level(law: dict[tuple[int, ...], float], runs: int, repeats: int = 20) -> float:
    """The distance N draws from the exact law itself keep from it (the mean over `repeats` draws)."""
    cells = list(law)
    probabilities = np.array([law[cell] for cell in cells])
    rng = np.random.default_rng(0)
    distances = []
    for _ in range(repeats):
        drawn = rng.multinomial(runs, probabilities / probabilities.sum())
        distances.append(0.5 * float(np.abs(drawn / runs - probabilities).sum()))
    return float(np.mean(distances))


def top_k_survives(url: str, prompt_ids: list[int]) -> dict:
    """One request with top_k = 5, then a plain one: what each answered."""
    outcome = {}
    for name, extra in (("top_k_request", {"top_k": 5, "max_tokens": 8}), ("request_after", {})):
        try:
            outcome[name] = f"ok: {list(sample(url, prompt_ids, 1, extra))}"
        except httpx.HTTPError as error:
            outcome[name] = f"failed: {type(error).__name__} {str(error)[:200]}"
    return outcome


def measure(folder: Path, name: str, method: str, fixed: bool, prompt_ids: list[int], runs: int,
            law: dict[tuple[int, ...], float]) -> dict:
    spec = ServerSpec(target=str(folder / "target"), draft=str(folder / "draft") if method != "none" else None,
                      method=method, k=K, dtype="float32", max_model_len=512, fix_cpu_sampler=fixed)
    server = start_server(spec, folder / f"server-{method}-{int(fixed)}.log", timeout_s=1800)
    try:
        url = str(server.address)
        engine = probe(url).engine if method != "none" else "vllm (target-only)"
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            counts = Counter(pool.map(lambda seed: sample(url, prompt_ids, seed), range(runs)))
        seconds = time.perf_counter() - started
        rare = sum(count for cell, count in counts.items() if law.get(cell, 0.0) < RARE) / runs
        row = {"configuration": name, "engine": engine, "runs": runs, "seconds": round(seconds, 1),
               "total_variation": round(total_variation(counts, law), 4), "share_in_pairs_below_1e-6": round(rare, 4),
               **top_k_survives(url, prompt_ids)}
        log = (folder / f"server-{method}-{int(fixed)}.log").read_text(errors="replace")
        row["fix_log_lines"] = [line.strip()[:200] for line in log.splitlines() if "SpecViz CPU sampler fix" in line]
        print(json.dumps(row), flush=True)
        return row
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3000)
    parser.add_argument("--out", default="vllm-cpu-sampler-fix-law.json")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="specviz-vllm-law-"))
    save_tiny_pair(folder)
    pair = tiny_pair()
    prompt_ids = pair.encode_prompt(PROMPT, raw=True)
    with one_torch_thread():
        law = exact_joint_law(pair.target, prompt_ids, SamplingParams(TEMPERATURE), TOKENS, pair.eos_token_ids)
    rows = [measure(folder, name, method, fixed, prompt_ids, args.runs, law) for name, method, fixed in CONFIGURATIONS]
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    document = {"command": "python benchmarks/vllm_sampler_law.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                "commit": commit, "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                "machine": f"{cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores",
                "vllm": "vllm-cpu 0.32.0", "pair": "tests/vllm_session.py tiny random pair, float32",
                "prompt": PROMPT, "prompt_ids": prompt_ids, "tokens": TOKENS, "temperature": TEMPERATURE,
                "sampling_noise_total_variation": round(noise_level(law, args.runs), 4), "rows": rows}
    Path(args.out).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({key: value for key, value in document.items() if key != "rows"}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
