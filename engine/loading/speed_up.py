"""Put a loaded pair on the fast CPU kernels (engine/runtime/cpu/kernels.py), each behind its
probe, and record which kernels run (engine/runtime/kernel_names.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from transformers import PreTrainedModel

from engine.decode.pair import ModelPair
from engine.runtime.kernel_names import STOCK
from engine.runtime.cpu.checkpoint_files import CheckpointFiles
from engine.runtime.cpu.kernels import (NO_FILES, kernel_of, prepack_linear_layers,
                                        quantize_int8, release_mapped_weights)
from engine.presets import first_line
from engine.runtime.cpu.int8_store import Int8Store
from engine.runtime.cpu.kernel_probe import probe_prepacked

Progress = Callable[[float, str], None]


def speed_up(pair: ModelPair, draft_dtype: str, prepack: bool, report: Progress,
              files: dict[str, CheckpointFiles], int8_root: Path | None = None) -> ModelPair:
    """CPU kernels (engine/runtime/cpu/kernels.py), each behind its probe: quantize an int8 draft;
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
    if prepack and pair.device.type == "cpu":
        report(0.93, "prepacking the target's weights for fast verification")
        _prepack(pair.target, target_files, report)
        if pair.draft is not None and draft_dtype == "bfloat16":
            _prepack(pair.draft, draft_files, report)
    pair.target_kernel, pair.draft_kernel = kernel_of(pair.target), kernel_of(pair.draft)
    for model, kernel, model_files in ((pair.target, pair.target_kernel, target_files),
                                       (pair.draft, pair.draft_kernel, draft_files)):
        if model is not None and kernel != STOCK:    # a plain model stays mapped
            release_mapped_weights(model, model_files)
    return pair


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
