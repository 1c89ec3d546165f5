"""Explore's temperature sweep against a vLLM server (issue #32, item 3; docs/architecture.md §10).

The server speculates with its own k (its `--speculative-config`), so a sweep over a server is one
run per (temperature, prompt, seed) at that k: the ks ticked on the page are not used, and the page
says so. Each run streams through engine/vllm/source.py, as the Run tab's does, and becomes a row of
the same `specviz.sweep/1` document as SpecViz's own sweeps (engine/formats/sweep_format.py), so the
heatmaps, the per-position lines and the download work on it. vLLM runs no target-only decoding
here, so a row has no baseline (0 tok/s: the speedup cells stay empty) and no α (p and q are not
returned), and the meta names the engine.
"""

from __future__ import annotations

import time
from typing import Iterator

from engine.formats.sweep_format import RunResult, sweep_document
from engine.formats.trace import Trace
from engine.vllm.source import start_generation
from engine.vllm.transport import VllmError
from specviz.serving.runner import ProgressFn, RunnerError, SweepRequest, SweepUpdate


def server_sweep(request: SweepRequest, progress: ProgressFn) -> Iterator[SweepUpdate]:
    """Run `request`'s temperatures x prompts x seeds on its server at the server's k; yield after each run.
    A server fault is a RunnerError with the server's one sentence; closing the iterator stops after the run."""
    total = len(request.temperatures) * len(request.prompts) * len(request.seeds)
    results: list[RunResult] = []
    meta: dict = {}
    started = time.perf_counter()
    progress(0.0, f"asking the vLLM server at {request.models.server}")
    for temperature in request.temperatures:
        for prompt_index, prompt in enumerate(request.prompts):
            for seed in request.seeds:
                trace = _run(request, prompt, temperature, seed)
                results.append(run_result(trace, prompt_index, seed))
                meta = meta or sweep_meta(request, trace)
                elapsed = time.perf_counter() - started
                done = len(results)
                progress(done / total, f"run {done} of {total} on the vLLM server")
                yield SweepUpdate(done, total, elapsed, elapsed / done * (total - done), sweep_document(results, meta))


def _run(request: SweepRequest, prompt: str, temperature: float, seed: int) -> Trace:
    config = request.config.replace(temperature=temperature, seed=seed)
    try:
        generation = start_generation(request.models.server, prompt, config, method=request.models.server_method,
                                      expected_model=request.models.target)
        while not generation.is_done:
            generation.step()
    except VllmError as error:
        raise RunnerError(str(error)) from None
    return generation.trace()


def run_result(trace: Trace, prompt_index: int, seed: int) -> RunResult:
    """One server run as a sweep row: the server's k, its acceptance and speed, no baseline and no α."""
    summary = trace.summary
    return RunResult(k=trace.config.k, temperature=trace.config.temperature, prompt_index=prompt_index, seed=seed,
                     acceptance_rate=summary.acceptance_rate, mean_accepted_length=summary.mean_accepted_length,
                     per_position_acceptance=summary.per_position_acceptance,
                     tokens_per_s=summary.tokens_per_s or 0.0, baseline_tokens_per_s=0.0,
                     target_forwards_per_token=summary.target_forwards / max(summary.new_tokens, 1),
                     wall_s=summary.wall_s, estimated_alpha=None, cost_ratio=None, identical=False)


def sweep_meta(request: SweepRequest, trace: Trace) -> dict:
    config = trace.config
    return {"preset": None, "engine": config.engine, "server": request.models.server, "draft": config.draft,
            "target": config.target, "drafter": config.drafter, "draft_dtype": config.draft_dtype,
            "target_dtype": config.target_dtype, "prompts": list(request.prompts), "ks": [config.k],
            "temperatures": list(request.temperatures), "seeds": list(request.seeds),
            "max_new_tokens": request.config.max_new_tokens}


def server_k_note(k: int | None) -> str:
    """What the page says about k in a sweep on a server."""
    which = f"k = {k}" if k else "k"
    return (f"{which} is the vLLM server's own setting (its --speculative-config): the k values ticked are not used, "
            "and vLLM runs no target-only decoding here, so the speedup cells stay empty.")
