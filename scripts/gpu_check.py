"""SpecViz's GPU path, checked and measured in one run (docs/benchmark.md, "GPU").

    python scripts/gpu_check.py                        # one NVIDIA GPU: the presets' shapes, random weights
    python scripts/gpu_check.py --device cpu --small   # the same checks on a CPU, small shapes (CI runs it)

One JSON document on stdout (progress on stderr); exit status 1 if a check fails.

- identity: greedy runs of the tiny random pair on a static cache with graphs against target-only
  decoding on a dynamic, eager cache (an implementation sharing none of the pointer, masks or
  graphs): float32 must be identical; each bfloat16 flip is listed with the target's top-2 logit
  margin where it happened (a near tie); sampled runs must finish.
- shape_identity: the same at the presets' real shapes (random weights): target-only on graphs and
  speculative decoding on graphs, each against eager target-only, float32 and bfloat16, with the
  first differing token, its step and top-2 margin for every difference; float32 must have none.
- costs: one target token, one draft token and a verify of k + 1 tokens for each k, eager
  (dynamic cache) against CUDA graphs (static cache), at the presets' shapes with random weights
  (a forward's cost depends on shapes, not values), and the graphs' capture time; each figure the
  median of 3 probes.
- steps: the engine's step breakdown (draft, verify, and engine work outside the forwards),
  target-only decoding eager against graphs (median of 3 runs after a warm-up), and what greedy
  and sampled steps read on the host (HostReads, the torch profiler, CUDA memcpy records both ways).
- acceptance_levels: the cost model against measured tok/s at three acceptance levels: the target
  drafting for itself (about 1), the target plus noise (`--perturbation`, in between), the pair's
  random draft (about 0); the engine's own work per step is in the model. Reported as goals, met or not
  (both are timings, so they depend on how busy the machine is: a busy AVX2 EPYC scattered one level's
  repeats from -27 % to +22 %): the model's error the same at every level within 10 points (the
  acceptance part of the model holds), and the error itself within 10 % at each. The probe times each phase as a run does it (a draft token with
  its probabilities and argmax, a verify with its probabilities, the two models taking turns), and
  each level reports the probed phases beside the run's (`draft_token_ms` against
  `run_draft_ms_per_token`, `verify_ms` against `run_verify_ms`).
- predicted: the speedups those costs give at the acceptance the real weights showed on a CPU
  (assets/sweeps/qwen-coder.json for the draft model; benchmarks/data/qwen-coder-ngram-edits.json
  for n-gram lookup on prompts that quote what they edit). Random weights accept nothing, so these
  are predictions, marked as such.

Needs torch, transformers and tokenizers only, and no network. --shapes names a folder with
draft/config.json and target/{config.json, tokenizer files} (the default pair's converted cache
folders hold them); without it the shapes come from benchmarks/shapes.py and prompts are encoded
by the tiny character tokenizer.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

from benchmarks.shapes import random_pair  # noqa: E402
from engine.cli.machine import machine_record, provenance  # noqa: E402
from engine.config import SpecConfig  # noqa: E402
from engine.decode.baseline import first_difference, target_only, top2_margin  # noqa: E402
from engine.loading.cost_probe import device_name, measure_costs  # noqa: E402
from engine.decode.pair import ModelPair  # noqa: E402
from engine.decode.readout import HostReads  # noqa: E402
from engine.decode.speculative import SpeculativeEngine  # noqa: E402
from engine.device_costs import NGRAM_COST_RATIO, DeviceCosts  # noqa: E402
from engine.loading.speed_up import PREPARED_ROWS, graph_backend, prepare_static_runners  # noqa: E402
from engine.loading.tiny import add_noise, build_tiny_pair  # noqa: E402
from engine.metrics import NEAR_TIE_LOGITS, expected_tokens_per_step  # noqa: E402
from engine.runtime.step_clock import StepClock  # noqa: E402
from engine.runtime.cuda.attention import PINNED_BACKENDS, pinned_attention  # noqa: E402
from engine.runtime.static_runner import StaticRunner  # noqa: E402

PROMPTS = ("Hello, world", "def reverse(xs):", "The quick brown fox", "aaaa bbbb aaaa bbbb", "1 2 3 4 5 6",
           "Speculative decoding is", "print('hi')\nprint('hi')", "SELECT * FROM t WHERE")
IDENTITY_CONFIGS = (SpecConfig(k=2, max_new_tokens=24), SpecConfig(k=4, max_new_tokens=24),
                    SpecConfig(k=6, max_new_tokens=24), SpecConfig(k=5, tree_nodes=16, tree_branch=3, max_new_tokens=24))
SHAPE_IDENTITY_CONFIGS = (SpecConfig(k=2, max_new_tokens=32), SpecConfig(k=5, max_new_tokens=32))
STEP_PROMPT = "Write a Python function that checks whether a string is a palindrome, ignoring case and punctuation."
STEP_K, STEP_TOKENS = 5, 64
GOAL_TARGET_TOKEN_MS = 4.2     # H200, the 1.5B shape: the prototype's graphs (issue 26)
GOAL_ENGINE_MS = 1.0           # engine work outside the forwards, per step
GOAL_MODEL_ADHERENCE = 0.10    # measured tok/s within 10 % of the cost model's at every acceptance level (a goal)
GOAL_MODEL_SPREAD = 0.10       # the model's error alike at every level, within 10 points (a goal: it is timed)
TIMING_REPEATS = 3             # every timed row: the median of this many repeats, after a warm-up
LEVEL_K, LEVEL_TOKENS, LEVEL_REPEATS = 5, 48, 7     # --level-repeats: the saved runs used 7; the suite, which
                                                    # asserts the levels' counts and no timing, asks for 2
LEVEL_PROBES = 4               # a level's repeat: the mean of 4 probes (a probe times ~10 forwards: on a busy
                               # host its median favours the quiet moments a run of 48 tokens averages over)
DEFAULT_PERTURBATION = 0.02    # the in-between level's draft: the target plus this much noise (x each weight's std)
NOISE_SEED = 7
MODEL_SWEEP = ROOT / "assets" / "sweeps" / "qwen-coder.json"
NGRAM_SWEEP = ROOT / "benchmarks" / "data" / "qwen-coder-ngram-edits.json"


def log(message: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def with_graphs(pair: ModelPair, rows: int = PREPARED_ROWS) -> ModelPair:
    """Static-cache runners that capture what a load captures: CUDA graphs on a GPU, their eager
    stand-in elsewhere (the same dispatch)."""
    prepare_static_runners(pair, graph_backend(pair.device), rows)
    return pair


def environment(device: torch.device) -> dict:
    info = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device_name(device),
            "date": date.today().isoformat(), "sdpa_backends": [backend.name for backend in PINNED_BACKENDS],
            "cpu": machine_record(), **provenance()}
    if device.type == "cuda":
        info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
        info["cuda"] = torch.version.cuda
    return info


# -- identity ----------------------------------------------------------------------------------------

def identity(device: torch.device, dtype: torch.dtype, prompts: tuple[str, ...]) -> dict:
    pair = with_graphs(build_tiny_pair(seed=0, device=device, dtype=dtype))
    engine = SpeculativeEngine(pair)
    runs, flips = 0, []
    for config in IDENTITY_CONFIGS:
        for prompt in prompts:
            trace = engine.generate(prompt, config.replace(cache="static"))
            oracle = target_only(pair, list(trace.prompt.token_ids), trace.config.replace(cache="dynamic")).token_ids
            runs += 1
            if trace.output.token_ids != oracle:
                flip = first_difference(pair, trace, oracle)
                flips.append({"prompt": prompt, "k": config.k, "tree_nodes": config.tree_nodes, "token": flip.token,
                              "step": flip.step, "margin": flip.margin, "near_tie": flip.near_tie})
    sampled = [engine.generate(prompt, SpecConfig(k=4, temperature=0.8, max_new_tokens=24, seed=3, cache="static"))
               for prompt in PROMPTS[:4]]
    return {"dtype": str(dtype).removeprefix("torch."), "runs": runs, "identical": runs - len(flips), "flips": flips,
            "sampled_runs_finished": sum(trace.complete for trace in sampled)}


def shape_identity(which: str, device: torch.device, dtype: torch.dtype, folder: Path | None,
                   prompts: tuple[str, ...]) -> dict:
    """Greedy identity at the presets' real shapes (random weights): target-only on graphs (static
    cache) and speculative decoding on graphs, each against eager target-only decoding (dynamic
    cache); every difference with the first differing token, its step and the target's top-2 logit
    margin there (float32 must have none; bfloat16's are listed)."""
    pair = with_graphs(random_pair(which, device, dtype, folder))
    engine = SpeculativeEngine(pair)
    compared = {"graphs_target_only": [0, 0], "speculative": [0, 0]}          # [runs, identical]
    differences = []
    for config in SHAPE_IDENTITY_CONFIGS:
        for prompt in prompts:
            trace = engine.generate(prompt, config.replace(cache="static"))
            prompt_ids = list(trace.prompt.token_ids)
            eager = target_only(pair, prompt_ids, config.replace(cache="dynamic")).token_ids
            graphs = target_only(pair, prompt_ids, config.replace(cache="static")).token_ids
            for kind, output in (("speculative", trace.output.token_ids), ("graphs_target_only", graphs)):
                if kind == "graphs_target_only" and config is not SHAPE_IDENTITY_CONFIGS[0]:
                    continue                                             # target-only has no k: once a prompt
                compared[kind][0] += 1
                if output == eager:
                    compared[kind][1] += 1
                    continue
                if kind == "speculative":
                    flip = first_difference(pair, trace, eager)
                    token, step, margin = flip.token, flip.step, flip.margin
                else:                                                    # one token a step
                    token = next((i for i, (ours, theirs) in enumerate(zip(output, eager)) if ours != theirs),
                                 min(len(output), len(eager)))
                    step, margin = token, top2_margin(pair, prompt_ids + list(eager[:token]))
                differences.append({"kind": kind, "prompt": prompt, "k": config.k, "token": token, "step": step,
                                    "margin": margin, "near_tie": margin < NEAR_TIE_LOGITS})
    del engine, pair
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return {"shapes": which, "dtype": str(dtype).removeprefix("torch."),
            **{kind: {"runs": runs, "identical": identical} for kind, (runs, identical) in compared.items()},
            "differences": differences}


# -- costs and steps -----------------------------------------------------------------------------------

def costs(pair: ModelPair) -> tuple[dict, DeviceCosts]:
    """The pair's costs eager (dynamic cache) and with graphs (static cache, captured here, timed),
    each the median of TIMING_REPEATS probes."""
    eager = median_costs(pair, "dynamic")
    with_graphs(pair, 2 * PREPARED_ROWS)                 # attention reads every row: a bucket twice as large
    larger = median_costs(pair, "static")
    started = time.perf_counter()
    with_graphs(pair)
    capture_s = time.perf_counter() - started
    graphs = median_costs(pair, "static")
    result = {"repeats": TIMING_REPEATS, "eager": eager.to_dict(), "graphs": graphs.to_dict(), "capture_s": capture_s,
              "capacity": PREPARED_ROWS, "graphs_at_twice_the_capacity": larger.to_dict(),
              "graphs_speedup_target_token": eager.target_token_ms / graphs.target_token_ms}
    if pair.device.type == "cuda":
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(pair.device) / 2**30
    return result, graphs


PROFILED_READS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::equal", "aten::is_nonzero")
SAMPLED = {"temperature": 0.8, "seed": 3}


def host_syncs(engine: SpeculativeEngine, prompt: str, config: SpecConfig) -> dict[str, list[dict]]:
    """What three steps after the first read on the host, greedy and sampled, each step counted three
    ways: the Python-level reads `HostReads` sees (tolist, item, int(), bool(), an index by a device
    scalar); the host reads of values the torch profiler records (PROFILED_READS: item, int() and
    bool() all end in _local_scalar_dense; nonzero and boolean-mask indexing; torch.equal), which
    also sees those made inside other operators; and on CUDA the profiler's memcpy records in both
    directions, the pageable ones (which synchronise with the host) apart."""
    result = {}
    for name, changes in (("greedy", {}), ("sampled", SAMPLED)):
        generation = engine.start(prompt, config.replace(**changes))
        generation.step()
        steps = []
        for _ in range(3):
            if generation.is_done:
                break
            steps.append(_profiled_step(generation.step, engine.pair.device))
        result[name] = steps
    return result


def _profiled_step(step, device: torch.device, cuda_profiler: bool = True) -> dict:
    """One step under HostReads and the profiler (CUDA's too on a GPU; where it cannot start, the
    CPU's alone, logged, and the step's counts say so)."""
    with_cuda = device.type == "cuda" and cuda_profiler
    try:
        with HostReads() as counter, profile(activities=[ProfilerActivity.CPU]
                                             + ([ProfilerActivity.CUDA] if with_cuda else [])) as profiler:
            step()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
    except RuntimeError as error:
        if not with_cuda:
            raise
        log(f"the CUDA profiler did not run ({error}); the CPU's alone")
        return _profiled_step(step, device, cuda_profiler=False) | {"cuda_profiler_error": str(error).splitlines()[0]}
    names: dict[str, int] = {}
    for event in profiler.events():
        names[event.name] = names.get(event.name, 0) + 1
    counts = {"python_reads": counter.reads,
              "profiler_reads": {op: names[op] for op in PROFILED_READS if op in names}}
    if with_cuda:
        counts["memcpy_dtoh"] = sum(n for event, n in names.items() if "Memcpy DtoH" in event)
        counts["memcpy_htod"] = sum(n for event, n in names.items() if "Memcpy HtoD" in event)
        counts["memcpy_pageable"] = sum(n for event, n in names.items() if "Memcpy" in event and "Pageable" in event)
    return counts


def copies_to_the_host(step: dict) -> int:
    """A step's device-to-host copies: the CUDA profiler's memcpy records; a CPU has no such copy,
    so its Python-level host reads (each a copy on a GPU) stand in."""
    return step["memcpy_dtoh"] if "memcpy_dtoh" in step else len(step["python_reads"])


def steps(pair: ModelPair) -> dict:
    """The engine on graphs: its step breakdown, the copies a step makes, and target-only decoding
    eager against graphs (each the median of TIMING_REPEATS runs after a warm-up)."""
    engine = SpeculativeEngine(pair)
    config = SpecConfig(k=STEP_K, max_new_tokens=STEP_TOKENS, cache="static")
    engine.generate(STEP_PROMPT, config.replace(max_new_tokens=8))                                  # warm
    trace = engine.generate(STEP_PROMPT, config)
    later = trace.steps[1:]
    median = {part: statistics.median(getattr(step.timing, part) for step in later)
              for part in ("draft", "verify", "engine", "total")}
    prompt_ids = list(trace.prompt.token_ids)
    only = {cache: target_only_ms(pair, prompt_ids, config.replace(cache=cache)) for cache in ("dynamic", "static")}
    spec_ms_per_token = sum(step.timing.total for step in later) / sum(step.num_emitted for step in later)
    return {"k": STEP_K, "tokens": trace.summary.new_tokens, "steps": trace.summary.steps,
            "median_step_ms": median, "acceptance": trace.summary.acceptance_rate,
            "host_syncs": (syncs := host_syncs(engine, STEP_PROMPT, config)),
            "copies_per_step": [copies_to_the_host(step) for step in syncs["greedy"]],
            "target_only_ms_per_token": only, "target_only_repeats": TIMING_REPEATS,
            "speculative_ms_per_token": spec_ms_per_token,
            "speedup_vs_target_only_graphs": only["static"] / spec_ms_per_token}


def target_only_ms(pair: ModelPair, prompt_ids: list[int], config: SpecConfig) -> float:
    """Target-only milliseconds a token: the median of TIMING_REPEATS runs after a warm-up run."""
    target_only(pair, prompt_ids, config.replace(max_new_tokens=8))
    return statistics.median(target_only(pair, prompt_ids, config).token_ms for _ in range(TIMING_REPEATS))


# -- the cost model at three acceptance levels ---------------------------------------------------------

def level_pairs(pair: ModelPair, perturbation: float) -> Iterator[tuple[str, ModelPair, str]]:
    """The pair's target with three drafts: itself (acceptance about 1), itself with noise added
    (in between, set by `perturbation`) and the pair's own random draft (about 0). Made one at a
    time (a generator), so a GPU holds one extra copy of the target at once."""
    def with_draft(draft: torch.nn.Module, name: str) -> ModelPair:
        return dataclasses.replace(pair, draft=draft, draft_name=name, draft_dtype=pair.target_dtype,
                                   pool_settings={}, static_pools={}, device_costs=None)
    yield "self", with_draft(copy.deepcopy(pair.target), f"{pair.target_name} (itself)"), "the target drafts for itself"
    perturbed = copy.deepcopy(pair.target)
    add_noise(perturbed, perturbation, NOISE_SEED)
    yield ("perturbed", with_draft(perturbed, f"{pair.target_name} + noise {perturbation:g}"),
           f"the target plus Gaussian noise of {perturbation:g} x each weight matrix's std")
    yield "random", dataclasses.replace(pair, pool_settings={}, static_pools={}), "the pair's own random draft"


def median_costs(pair: ModelPair, cache: str, repeats: int = TIMING_REPEATS,
                 statistic: Callable[[list[float]], float] = statistics.median) -> DeviceCosts:
    """The cost probe (engine/loading/cost_probe.py, its own warm-up) run `repeats` times, each
    figure the median of the runs (one probe on a busy host can be off by a fifth), or another
    `statistic` of them."""
    runs = [measure_costs(pair, cache) for _ in range(repeats)]
    first = runs[0]
    return dataclasses.replace(
        first, target_token_ms=statistic([run.target_token_ms for run in runs]),
        draft_token_ms=None if first.draft_token_ms is None else statistic([run.draft_token_ms for run in runs]),
        verify_ms=tuple((k, statistic([dict(run.verify_ms)[k] for run in runs])) for k in first.ks))


def cost_model_at(pair: ModelPair, level: str, about: str, repeats: int = LEVEL_REPEATS) -> dict:
    """Predicted against measured tokens a second for one pair on graphs, `repeats` times after a
    warm-up run, each repeat LEVEL_PROBES cost probes (their mean) then a run, so a busy host's
    drift hits both alike.

    The model: the run's tokens per step (the acceptance) over a step of k draft tokens + a verify of
    k + 1 tokens (the probe's forwards) + the engine's own work per step (the run's median step time
    outside the draft and verify phases). Measured: the run's tokens over its steps' time, the
    prefill step left out, every time on one clock (thread_time_clock). Each figure saved is the median over the repeats, the error too (measured / predicted - 1
    of each repeat). Beside it, the i.i.d. acceptance model's tokens per step E(a, k) at
    the run's acceptance a and the speed it would predict (reported, not checked: a random pair's
    acceptances come in runs, which that model does not describe)."""
    with_graphs(pair)
    engine = SpeculativeEngine(pair)
    config = SpecConfig(k=LEVEL_K, max_new_tokens=LEVEL_TOKENS, cache="static")
    engine.generate(STEP_PROMPT, config)                                                          # warm
    runs = []
    for _ in range(repeats):
        costs = median_costs(pair, "static", LEVEL_PROBES, statistics.fmean)
        steps, totals = timed_steps(engine, config)
        drafted = sum(step.k for step in steps)
        alpha = sum(step.num_accepted for step in steps) / drafted if drafted else 0.0
        engine_ms = statistics.median(total - step.timing.draft - step.timing.verify
                                      for step, total in zip(steps, totals, strict=True))
        model_ms = sum(costs.step_ms(step.k, engine_ms) for step in steps)
        tokens = sum(step.num_emitted for step in steps)
        measured = 1000.0 * tokens / sum(totals)
        predicted = 1000.0 * tokens / model_ms
        runs.append({"acceptance": alpha, "tokens_per_step": tokens / len(steps),
                     "draft_token_ms": costs.draft_token_ms, "verify_ms": costs.verify_cost(LEVEL_K) * costs.target_token_ms,
                     "engine_ms": engine_ms, "run_draft_ms_per_token": sum(step.timing.draft for step in steps) / max(drafted, 1),
                     "run_verify_ms": statistics.median(step.timing.verify for step in steps),
                     "predicted_tok_s": predicted, "measured_tok_s": measured, "error": measured / predicted - 1.0,
                     "iid_tokens_per_step": statistics.fmean(expected_tokens_per_step(alpha, step.k) for step in steps),
                     "iid_predicted_tok_s": costs.tokens_per_s(alpha, [step.k for step in steps], engine_ms)})
    return {"level": level, "draft": pair.draft_name, "about": about, "k": LEVEL_K, "tokens": LEVEL_TOKENS,
            "repeats": repeats, "errors": [run["error"] for run in runs],
            **{name: statistics.median(run[name] for run in runs) for name in runs[0]}}


def timed_steps(engine: SpeculativeEngine, config: SpecConfig) -> tuple[list, list[float]]:
    """One run's steps after the first (the prefill) and each step's milliseconds on the step
    clock's host clock (the record's own total is wall time, which a busy CPU stretches)."""
    generation = engine.start(STEP_PROMPT, config)
    generation.step()
    steps, totals = [], []
    while not generation.is_done:
        started = StepClock.host_clock()
        steps.append(generation.step())
        totals.append((StepClock.host_clock() - started) * 1000.0)
    return steps, totals


@contextlib.contextmanager
def thread_time_clock(device: torch.device) -> Iterator[str]:
    """On a CPU (one torch thread), the step clock and the probe read the thread's CPU time while
    active: the work itself, which other processes on a shared machine do not stretch. CUDA keeps
    its events."""
    if device.type != "cpu":
        yield "cuda events"
        return
    wall_clock, StepClock.host_clock = StepClock.host_clock, time.thread_time
    try:
        yield "thread CPU time"
    finally:
        StepClock.host_clock = wall_clock


def acceptance_levels(pair: ModelPair, perturbation: float, repeats: int = LEVEL_REPEATS) -> list[dict]:
    results = []
    for level, level_pair, about in level_pairs(pair, perturbation):
        log(f"the cost model at acceptance level '{level}'")
        with thread_time_clock(pair.device) as clock:
            results.append(cost_model_at(level_pair, level, about, repeats) | {"clock": clock})
        del level_pair
        if pair.device.type == "cuda":
            torch.cuda.empty_cache()
    return results


# -- predictions ---------------------------------------------------------------------------------------

def predicted(graph_costs: DeviceCosts, engine_ms: float, label: str) -> dict:
    """Speedups over target-only on graphs at real-weight acceptance measured on a CPU."""
    out: dict = {"pair": label, "source": "costs measured here; tokens per step from real weights on a CPU"}
    target_ms = graph_costs.target_token_ms
    if MODEL_SWEEP.is_file():
        cells = [cell for cell in json.loads(MODEL_SWEEP.read_text())["cells"]
                 if cell["temperature"] == 0 and not cell.get("tree_nodes")]
        rows = []
        for cell in cells:
            k, per_step = cell["k"], cell["mean_accepted_length"]
            step_ms = graph_costs.step_ms(k, engine_ms)
            rows.append({"k": k, "tokens_per_step": per_step, "step_ms": step_ms,
                         "predicted_speedup": per_step * target_ms / step_ms})
        out["model_drafter"] = rows
        out["model_drafter_best"] = max(rows, key=lambda row: row["predicted_speedup"]) if rows else None
    if NGRAM_SWEEP.is_file():
        rows = []
        for cell in json.loads(NGRAM_SWEEP.read_text())["cells"]:
            k, per_step = cell["k"], cell["mean_accepted_length"]
            step_ms = graph_costs.verify_cost(k) * target_ms + engine_ms
            rows.append({"k": k, "tokens_per_step": per_step, "step_ms": step_ms,
                         "predicted_speedup": per_step * target_ms / step_ms})
        out["ngram_edits"] = rows
        out["ngram_edits_best"] = max(rows, key=lambda row: row["predicted_speedup"]) if rows else None
    out["break_even_acceptance"] = {"model_drafter": graph_costs.break_even(),
                                    "ngram": graph_costs.break_even(NGRAM_COST_RATIO)}
    return out


# -- torch.compile, for comparison ------------------------------------------------------------------

def compiled_decode(pair: ModelPair, repeats: int = 30) -> dict:
    """The target's one-token forward on a static cache through torch.compile(mode="reduce-overhead",
    fullgraph=True) (CUDA graphs made by Inductor) instead of our captured graph: compile time and
    milliseconds a token, on the same cache, mask and positions."""
    runner = StaticRunner(pair.target, capacity=PREPARED_ROWS)
    forward = torch.compile(runner._graph_forward, mode="reduce-overhead", fullgraph=True)
    clock = StepClock(pair.device)
    context = 64
    try:
        with torch.inference_mode(), pinned_attention(pair.device):
            runner.forward(torch.arange(context, device=pair.device) % pair.vocab_size, num_logits=1)
            ids = torch.ones((1, 1), dtype=torch.long, device=pair.device)
            positions = runner.kv.columns[context:context + 1][None]
            started = time.perf_counter()
            for _ in range(3):                       # compile, record the graph, replay it
                forward(ids, positions)
                runner.kv.move_pointer(context)
            clock.between(clock.mark(), clock.mark())           # waits for the device on CUDA
            compile_s = time.perf_counter() - started
            start = clock.mark()
            for _ in range(repeats):
                forward(ids, positions)
                runner.kv.move_pointer(context)
            ms = clock.between(start, clock.mark()) / repeats
    except Exception as error:                       # a compile failure is a finding, reported as such
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"}
    return {"compile_s": compile_s, "target_token_ms": ms}


# -- the run -------------------------------------------------------------------------------------------

def predict_again(report_path: Path) -> dict:
    """The predictions of a saved report, made again from its measured costs and the acceptance
    files as they are now (no device needed: the prediction is arithmetic on both)."""
    report = json.loads(report_path.read_text())
    engine_ms = report["steps"]["median_step_ms"]["engine"]
    return {"schema": "specviz.gpu_check/1", "environment": report["environment"], "costs_from": str(report_path),
            "predicted": {which: predicted(DeviceCosts.from_dict(costs["graphs"]), engine_ms,
                                           report["predicted"][which]["pair"])
                          for which, costs in report["costs"].items()}}


def run_compile_only(args: argparse.Namespace) -> dict:
    """Only the torch.compile comparison, at the default pair's target shape (its own process: a
    compile's time is hard to bound)."""
    device = torch.device(args.device)
    pair = random_pair("small" if args.small else "default", device,
                       torch.bfloat16 if device.type == "cuda" else torch.float32,
                       Path(args.shapes) if args.shapes else None)
    ours = measure_costs(with_graphs(pair), "static").target_token_ms
    return {"schema": "specviz.gpu_check/1", "environment": environment(device),
            "compiled_decode": compiled_decode(pair) | {"our_graphs_target_token_ms": ours}}


def run(args: argparse.Namespace) -> dict:
    started = time.perf_counter()
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)       # small forwards: one thread is fastest and steadiest on a shared machine
    report: dict = {"schema": "specviz.gpu_check/1", "environment": environment(device)}
    log(f"identity on the tiny pair ({report['environment']['device']})")
    prompts = PROMPTS[:4] if args.small else PROMPTS          # --small: 16 runs a dtype instead of 32
    report["identity"] = [identity(device, dtype, prompts) for dtype in (torch.float32, torch.bfloat16)]
    shapes = ["small"] if args.small else ["default", "7b-target"]
    folder = Path(args.shapes) if args.shapes else None
    log(f"identity at the {shapes[0]} shapes (random weights)")
    report["shape_identity"] = [shape_identity(shapes[0], device, dtype, folder, prompts)
                                for dtype in (torch.float32, torch.bfloat16)]
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    report["costs"], report["predicted"] = {}, {}
    for which in shapes:
        log(f"costs at the {which} shapes (random weights, {str(dtype).removeprefix('torch.')})")
        pair = random_pair(which, device, dtype, folder)
        report["costs"][which], graph_costs = costs(pair)
        if which in ("default", "small"):
            log("the engine's steps on graphs")
            report["steps"] = steps(pair)
            report["acceptance_levels"] = acceptance_levels(pair, args.perturbation, args.level_repeats)
        engine_ms = report["steps"]["median_step_ms"]["engine"]
        report["predicted"][which] = predicted(graph_costs, engine_ms, f"{pair.draft_name} -> {pair.target_name}")
        del pair
        if device.type == "cuda":
            torch.cuda.empty_cache()
    report["checks"] = checks(report, device)
    report["goals"] = goals(report, device)
    report["elapsed_s"] = time.perf_counter() - started
    report["environment"]["cpu"]["load_average_after"] = machine_record()["load_average"]
    return report


def checks(report: dict, device: torch.device) -> dict:
    """Correctness, on any device; on a GPU also that the graphs are faster than eager forwards (a CPU
    replays its graphs' eager stand-in, so its two timings differ only by noise)."""
    float32, bfloat16 = report["identity"]
    syncs = report["steps"]["host_syncs"]
    result = {
        "float32_identical_to_target_only": float32["identical"] == float32["runs"],
        "bfloat16_flips_only_at_near_ties": all(flip["near_tie"] for flip in bfloat16["flips"]),
        "sampled_runs_finish": all(result["sampled_runs_finished"] == 4 for result in report["identity"]),
        "one_copy_to_the_host_per_step": all(copies_to_the_host(step) <= 1 for steps in syncs.values() for step in steps),
        "greedy_steps_read_nothing_else": all(not step["profiler_reads"] for step in syncs["greedy"]),
        "float32_identical_at_real_shapes": all(result[kind]["identical"] == result[kind]["runs"]
                                                for result in report["shape_identity"] if result["dtype"] == "float32"
                                                for kind in ("graphs_target_only", "speculative")),
    }
    if device.type == "cuda":
        result["graphs_faster_than_eager"] = all(shape["graphs"]["target_token_ms"] < shape["eager"]["target_token_ms"]
                                                 for shape in report["costs"].values())
    return result


def goals(report: dict, device: torch.device) -> dict:
    """The issue's speed goals, met or not (reported; they depend on the machine and how busy it is)."""
    step = report["steps"]
    errors = [level["error"] for level in report["acceptance_levels"]]
    result = {"engine_ms_per_step": {"goal": GOAL_ENGINE_MS, "measured": step["median_step_ms"]["engine"]},
              "cost_model_worst_level": {"goal": GOAL_MODEL_ADHERENCE, "measured": max(abs(error) for error in errors)},
              "cost_model_error_spread": {"goal": GOAL_MODEL_SPREAD, "measured": max(errors) - min(errors)}}
    if device.type == "cuda" and "default" in report["costs"]:
        result["target_token_ms"] = {"goal": GOAL_TARGET_TOKEN_MS,
                                     "measured": report["costs"]["default"]["graphs"]["target_token_ms"]}
    for goal in result.values():
        goal["met"] = goal["measured"] <= goal["goal"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--small", action="store_true", help="small shapes (a CPU in a few minutes)")
    parser.add_argument("--shapes", default="", help="folder with draft/config.json and target/ (config, tokenizer)")
    parser.add_argument("--out", default="", help="also write the JSON here")
    parser.add_argument("--perturbation", type=float, default=DEFAULT_PERTURBATION,
                        help="noise on the in-between acceptance level's draft (x each weight's std; "
                             f"default {DEFAULT_PERTURBATION})")
    parser.add_argument("--level-repeats", type=int, default=LEVEL_REPEATS,
                        help=f"runs of the cost model at each acceptance level (default {LEVEL_REPEATS}); the suite, "
                             "which asserts their counts and no timing, runs 2")
    parser.add_argument("--compile-only", action="store_true",
                        help="only time torch.compile(mode='reduce-overhead') of the target's decode against our "
                             "captured graph (slow: a compile)")
    parser.add_argument("--predict-from", default="", metavar="REPORT",
                        help="make a saved report's predictions again from its costs and today's acceptance files")
    args = parser.parse_args(argv)
    if args.level_repeats < 1:
        parser.error(f"--level-repeats must be 1 or more, got {args.level_repeats}")
    if args.device == "cuda" and not torch.cuda.is_available() and not args.predict_from:
        parser.error("no CUDA GPU here: run with --device cpu --small")
    if args.predict_from:
        report = predict_again(Path(args.predict_from))
    else:
        report = run_compile_only(args) if args.compile_only else run(args)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n", encoding="utf-8")
    failed = [name for name, passed in report.get("checks", {}).items() if not passed]
    log("all checks pass" if not failed else f"FAILED: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
