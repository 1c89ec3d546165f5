"""Faster CPU linear layers for speculative decoding: a prepacked target, an int8 draft.

Two changes to a loaded model, both for the CPU only, each behind a probe
(engine/runtime/cpu/kernel_probe.py) that falls back to the stock kernel:

- `prepack_linear_layers` swaps every `nn.Linear` for a `PackedLinear` holding the
  same weights reordered once into oneDNN's blocked layout. Stock float32
  `F.linear` (MKL) handles a few rows in panels of three, re-reading the whole
  weight matrix per panel, so a forward's cost grows with each further panel of
  tokens. Verifying k drafts feeds k + 1 tokens, so a verify at a useful k costs
  more than one target step. With prepacked weights a verify over a few rows costs
  about one step, which is what the speedup theory assumes (measured figures:
  docs/benchmark.md). Precision is unchanged: float32 stays float32 (only the
  summation order differs, as it already does between a one-token and a
  k + 1-token forward).
- `quantize_int8` replaces a draft model's linear layers by int8 weight-only ones
  (`Int8Linear`). A draft token costs well under its float32 time (docs/benchmark.md).
  The output is unchanged: the target decides every emitted token, so only the
  proposals (and the acceptance rate) can move.
- `quantize_int4` does the same with int4 groups (`Int4Linear`), half the bytes again; a
  layer whose shape the int4 packing does not take gets the int8 kernel instead.

Memory: a model loaded by `from_pretrained` maps its safetensors files; each weight is
lent by `CheckpointFiles.borrowed` (a view of the file whose pages leave the process once
converted), converted, and dropped, and `release_mapped_weights` gives every other
parameter memory of its own, so nothing keeps the mapping alive: the process holds the
converted model once, not beside the mapped one.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import torch
from torch import nn

from engine.runtime.kernel_names import INT4_WEIGHT_ONLY, INT8_WEIGHT_ONLY, ONEDNN_PREPACKED, STOCK
from engine.runtime.cpu.checkpoint_files import CheckpointFiles
from engine.runtime.cpu.int8_store import Int8Store
from engine.runtime.cpu.kernel_modules import Int4Linear, Int8Linear, PackedLinear
from engine.runtime.cpu.kernel_probe import bf16_prepack_supported, probe_int4, probe_int8, probe_prepacked

__all__ = ["bf16_prepack_supported", "can_prepack", "can_quantize_int4", "can_quantize_int8", "int4_draft_pays",
           "kernel_of", "packed_layer_count", "prepack_linear_layers", "quantize_int4", "quantize_int8",
           "quantized_draft_refusal", "release_mapped_weights"]

Slot = tuple[nn.Module, str, nn.Linear]             # parent, attribute, layer
NO_FILES = CheckpointFiles(None)
KERNEL_NAMES = {PackedLinear: ONEDNN_PREPACKED, Int8Linear: INT8_WEIGHT_ONLY, Int4Linear: INT4_WEIGHT_ONLY}  # converted layers


def can_prepack(model: nn.Module) -> bool:
    """True when the model lives on the CPU and oneDNN prepacking passes its probe for its dtype."""
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu":
        return False
    return probe_prepacked(parameter.dtype) is None


def can_quantize_int8() -> bool:
    """True when the int8 weight-only kernel passes its probe on this CPU."""
    return probe_int8() is None


def quantized_draft_refusal(draft_dtype: str) -> str | None:
    """Why an "int8" or "int4" draft's kernels cannot run on this CPU, one sentence (int4 also needs int8, for the
    layers int4 cannot pack); None when they can."""
    return probe_int8() or (probe_int4() if draft_dtype == "int4" else None)


def can_quantize_int4() -> bool:
    """True when the int4 weight-only kernel (and the int8 one, for layers int4 cannot pack) pass their probes here."""
    return quantized_draft_refusal("int4") is None


def int4_draft_pays() -> bool:
    """True when an int4 draft is faster than an int8 one here: its kernels pass their probes and torch runs
    its AVX-512 code. Capped to AVX2 the int4 kernel took about the int8 kernel's time for the default draft's
    layers, where with AVX-512 it took about half (scripts/draft_kernels.py; benchmarks/data/draft-kernels-*.json)."""
    return torch.backends.cpu.get_cpu_capability() == "AVX512" and can_quantize_int4()


def prepack_linear_layers(model: nn.Module, files: CheckpointFiles = NO_FILES) -> int:
    """Replace every nn.Linear of a CPU model by a PackedLinear; returns how many were packed
    (0 when the probe says no: the model keeps the stock kernels)."""
    if not can_prepack(model):
        return 0
    return _swap_in_parallel(model, PackedLinear.from_weight, files)


def quantize_int8(model: nn.Module, files: CheckpointFiles = NO_FILES, store: Int8Store | None = None) -> int:
    """Int8 weight-only quantization of every nn.Linear, in place, on every torch thread at
    once; returns how many layers were quantized (0 when the probe says no). With a `store`
    the layers come from its saved quantization when it matches (engine/runtime/cpu/int8_store.py),
    else they are quantized and saved there for the next start."""
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu" or not can_quantize_int8():
        return 0
    names = {id(layer): name for name, layer in model.named_modules()}
    slots = _linear_slots(model)
    saved = store.load({names[id(layer)]: tuple(layer.weight.shape) for _, _, layer in slots}) if store else None
    if saved is None:
        count = _swap_in_parallel(model, Int8Linear.from_weight, files)
        if store is not None:
            store.save({name: (module.weight_int8, module.scales) for name, module in model.named_modules()
                        if isinstance(module, Int8Linear)})
        return count
    parameter_names = {id(parameter): name for name, parameter in model.named_parameters()}
    for parent, attribute, layer in slots:
        weight, scales = saved[names[id(layer)]]
        bias = None if layer.bias is None else files.fresh(parameter_names.get(id(layer.bias), ""), layer.bias.data)
        setattr(parent, attribute, Int8Linear(weight, scales, bias, layer.weight.dtype))
    return len(slots)


def quantize_int4(model: nn.Module, files: CheckpointFiles = NO_FILES) -> int:
    """Int4 weight-only quantization of every nn.Linear, in place (a layer whose shape int4 does
    not pack: int8), on every torch thread at once; returns how many layers were quantized (0
    when the probes say no). Quantizing is quick (the default draft: seconds), so nothing is saved."""
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu" or not can_quantize_int4():
        return 0

    def convert(weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Module:
        return (Int4Linear if Int4Linear.fits(weight) else Int8Linear).from_weight(weight, bias)
    return _swap_in_parallel(model, convert, files)


def release_mapped_weights(model: nn.Module, files: CheckpointFiles) -> None:
    """Give every parameter and buffer memory of its own (read from the file, or a copy), except
    embedding tables: a forward reads a few of their rows, so they stay mapped and only the rows
    used become resident. Converted layers never read the mapping (`_swap_in_parallel`), so
    the mapping costs the process the pages of those rows and nothing else; their tensors are
    left as they are (an int8 draft's saved layers are read into memory of their own by Int8Store;
    copying them again cost most of a second of every start)."""
    if not len(files):
        return
    kept = {id(module.weight) for module in model.modules() if isinstance(module, nn.Embedding)}
    for module in model.modules():           # converted layers: their tensors were never on the mapping
        if type(module) in KERNEL_NAMES:
            kept |= {id(tensor) for tensor in (*module.parameters(recurse=False), *module.buffers(recurse=False))}
    for name, parameter in model.named_parameters():
        if parameter.device.type == "cpu" and id(parameter) not in kept:
            parameter.data = files.fresh(name, parameter.data)
    for name, buffer in model.named_buffers():
        if buffer.device.type == "cpu" and id(buffer) not in kept:
            buffer.data = files.fresh(name, buffer.data)


def kernel_of(model: nn.Module | None) -> str:
    """The kernel name (engine/runtime/kernel_names.py) that runs most of the model's linear layers."""
    if model is None:
        return ""
    kinds = [type(module) for module in model.modules() if type(module) is nn.Linear or type(module) in KERNEL_NAMES]
    if not kinds:
        return STOCK
    most = max(set(kinds), key=kinds.count)
    return KERNEL_NAMES.get(most, STOCK)


def packed_layer_count(model: nn.Module) -> int:
    return sum(isinstance(module, PackedLinear) for module in model.modules())


def _linear_slots(model: nn.Module) -> list[Slot]:
    """(parent, attribute, layer) for every plain nn.Linear of the model."""
    return [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
            if type(child) is nn.Linear]


def _swap_in_parallel(model: nn.Module, convert: Callable[[torch.Tensor, torch.Tensor | None], nn.Module],
                      files: CheckpointFiles) -> int:
    """Replace each nn.Linear by convert(weight, bias), the weight lent by `files` under the
    parameter's first name (a head tied to the embedding table reads the table's entry).
    The conversions run on every torch thread (page faults and the kernels release the GIL), at
    most one per thread at a time, largest first, each slot refilled as soon as its conversion
    ends: the vocabulary head (the slowest) runs beside the small ones instead of holding a
    lockstep batch. No reference to a converted layer's weight is kept, so memory grows by a
    few layers, not by a second model. Returns how many layers were swapped."""
    names = {id(parameter): name for name, parameter in model.named_parameters()}
    workers = max(1, torch.get_num_threads())
    pending = sorted(_linear_slots(model), key=lambda slot: slot[2].weight.numel(), reverse=True)
    count = len(pending)

    def convert_layer(layer: nn.Linear) -> nn.Module:
        weight, bias = layer.weight, layer.bias
        fresh_bias = None if bias is None else files.fresh(names.get(id(bias), ""), bias.data)
        with files.borrowed(names.get(id(weight), ""), weight.data) as source:
            return convert(source, fresh_bias)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: dict = {}
        while pending or running:
            while pending and len(running) < workers:
                parent, attribute, layer = pending.pop(0)
                running[pool.submit(convert_layer, layer)] = (parent, attribute)
                del layer
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                parent, attribute = running.pop(future)
                setattr(parent, attribute, future.result())
    return count
