"""Put a loaded pair on its device's fast path (engine/runtime/) and record what runs.

On a CPU: the fast kernels (engine/runtime/cpu/kernels.py), each behind its probe
(engine/runtime/kernel_names.py names them). On CUDA: static caches whose forwards are
captured as CUDA graphs now, at load (engine/runtime/static_runner.py; the capture's seconds
are in the load status), then the device's costs measured on them (engine/loading/cost_probe.py).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch
from transformers import PreTrainedModel

from engine.loading.cost_probe import measure_costs
from engine.decode.pair import ModelPair
from engine.runtime.kernel_names import STOCK
from engine.runtime.cpu.checkpoint_files import CheckpointFiles
from engine.runtime.cpu.kernels import (NO_FILES, kernel_of, prepack_linear_layers,
                                        quantize_int4, quantize_int8, release_mapped_weights)
from engine.presets import first_line
from engine.runtime.cpu.int8_store import Int8Store
from engine.runtime.cpu.kernel_probe import probe_prepacked
from engine.runtime.static_cache import static_cache_refusal
from engine.runtime.static_runner import PoolSettings

Progress = Callable[[float, str], None]
GRAPH_MAX_K = 8              # the target's verify graphs cover k = 1..8 (k + 1 rows); larger k runs eagerly
GRAPH_ROWS = {"target": tuple(range(1, GRAPH_MAX_K + 2)),     # one-token decode, then k + 1 rows
              "draft": (1, 2)}                                 # one draft token; a carryover's two
PREPARED_ROWS = 256          # the runners captured at load hold prompt + new tokens up to this (a hosted run's
                             # 128 new tokens and its prompt): attention reads every row of the bucket, and
                             # a longer run regrows one runner (graphs captured again, under a second)


def speed_up(pair: ModelPair, draft_dtype: str, prepack: bool, report: Progress,
              files: dict[str, CheckpointFiles], int8_root: Path | None = None) -> ModelPair:
    """CPU kernels (engine/runtime/cpu/kernels.py), each behind its probe: quantize an int8 or int4 draft;
    prepack the target, whose forwards verify several tokens at once, and a bfloat16 draft (faster
    even one token at a time). Weights are read from their files (`files`) as they are converted,
    and the converted models keep no reference to the mapped files. An int8 draft's quantization is
    saved under `int8_root` (engine/runtime/cpu/int8_store.py) and loaded from there on the next start.
    Records the kernels that run."""
    target_files, draft_files = files.get("target", NO_FILES), files.get("draft", NO_FILES)
    if pair.draft is not None and draft_dtype == "int8":
        report(0.9, "quantizing the draft to int8")
        quantize_int8(pair.draft, draft_files, Int8Store(int8_root, draft_files) if int8_root is not None else None)
        pair.draft_dtype = "int8"
    if pair.draft is not None and draft_dtype == "int4":
        report(0.9, "quantizing the draft to int4")
        quantize_int4(pair.draft, draft_files)
        pair.draft_dtype = "int4"
    if prepack and pair.device.type == "cpu":
        report(0.93, "prepacking the target's weights for fast verification")
        _prepack(pair.target, target_files, report)
        if pair.draft is not None and draft_dtype == "bfloat16":
            _prepack(pair.draft, draft_files, report)
    if pair.device.type == "cuda":
        _capture_graphs(pair, report)
    pair.target_kernel, pair.draft_kernel = kernel_of(pair.target), kernel_of(pair.draft)
    for model, kernel, model_files in ((pair.target, pair.target_kernel, target_files),
                                       (pair.draft, pair.draft_kernel, draft_files)):
        if model is not None and kernel != STOCK:    # a plain model stays mapped
            release_mapped_weights(model, model_files)
    return pair


def graph_backend(device: torch.device) -> str:
    """The graphs a load captures on `device`: CUDA graphs on a GPU, their eager stand-in elsewhere
    (the same dispatch, so the CPU's tests and benchmarks take the GPU's path)."""
    return "cuda" if device.type == "cuda" else "eager-replay"


def prepare_static_runners(pair: ModelPair, backend: str | None, rows: int = PREPARED_ROWS) -> float:
    """Static-cache runners for the pair's models, room for `rows` rows, each with a graph per row
    count of GRAPH_ROWS captured now (backend "cuda"; "eager-replay" is its CPU stand-in; None: no
    graphs); the seconds the captures took."""
    roles = ["target"] + (["draft"] if pair.draft is not None else [])
    pair.pool_settings = {role: PoolSettings(GRAPH_ROWS[role], backend) for role in roles}
    pair.static_pools.clear()
    for role in roles:
        pair.runner_pool(role).prepare(rows)
    return sum(pool.capture_s for pool in pair.static_pools.values())


def _capture_graphs(pair: ModelPair, report: Progress) -> None:
    """The CUDA path at load: graphs captured now, not at the first Run, then the device's costs
    measured on them. A capture that fails leaves that runner's static forwards eager, and says why;
    a model the static cache cannot hold says why and is measured on the dynamic cache."""
    refusal = next(filter(None, (static_cache_refusal(model) for model in (pair.target, pair.draft)
                                 if model is not None)), None)
    if refusal is not None:
        report(0.95, f"no CUDA graphs: {refusal}")
        pair.device_costs = measure_costs(pair, "dynamic")
        return
    report(0.95, "capturing CUDA graphs (one per row count: the target's decode and verifies of k + 1 tokens, "
                 "the draft's one and two tokens)")
    capture_s = prepare_static_runners(pair, "cuda")
    for role, pool in pair.static_pools.items():
        if pool.eager_reason is not None:
            report(0.96, f"the {role}: {pool.eager_reason}")
    report(0.98, f"measuring this GPU's costs (graphs captured in {capture_s:.1f} s)")
    pair.device_costs = measure_costs(pair, "static")


def _prepack(model: PreTrainedModel, files: CheckpointFiles, report: Progress) -> None:
    """Prepack one model, or say in the progress why it keeps the stock kernels."""
    reason = probe_prepacked(next(model.parameters()).dtype)
    if reason is not None:
        report(0.95, f"keeping the stock kernels: {reason}")
        return
    try:
        prepack_linear_layers(model, files)
    except RuntimeError as error:       # an unusual oneDNN build: layers already swapped stay, the rest stay plain
        report(0.97, f"prepacking stopped ({first_line(error)}); the remaining layers use the stock kernels")
