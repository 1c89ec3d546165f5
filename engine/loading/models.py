"""load_pair: turn a preset or two model references into a ready ModelPair.

A model reference is one of: "embedded:<name>" (GGUF shipped in pip packages),
a path to a .gguf file (both converted once, then read from the converted-
weight cache, engine/loading/gguf_cache.py), a local model directory, a Hugging Face
Hub id, or "ngram" for the draft (no draft model). Loading goes: resolve both
references to local folders, load both tokenizers and refuse them unless they
agree on every token id (a GGUF tokenizer may add padding placeholders), then
load the weights in the requested dtypes, in eval mode and without gradients. Every failure a user can cause is one ModelLoadError sentence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from engine.config import (DRAFT_DTYPES, DTYPES, MODEL_DRAFTER, NATIVE_BF16, NGRAM_DRAFTER, QUANTIZED_DRAFTS,
                           resolve_target_dtype)
from engine.decode.pair import ModelPair
from engine.runtime.cpu.checkpoint_files import CheckpointFiles
from engine.runtime.cpu.kernels import can_quantize_int8, quantized_draft_refusal
from engine.runtime.cpu.native_bf16 import cpu_target_dtype
from engine.loading.speed_up import speed_up
from engine.loading.gguf_cache import cache_root, converted_embedded, converted_file
from engine.loading.hub import hub_access, is_hub_id
from engine.loading.tiny import build_tiny_pair
from engine.loading.vocabulary import check_end_tokens, check_same_vocabulary
from engine.loading.weights import EMBEDDED_PREFIX, embedded_spec
from engine.presets import DEFAULT_PRESET, PRESETS, TINY_RANDOM, ModelLoadError, first_line, get_preset, looks_like_path

__all__ = ["load_pair", "resolve_device"]

Progress = Callable[[float, str], None]
_LOAD_ERRORS = (OSError, ValueError, KeyError, RuntimeError, ImportError, TypeError)


@dataclass
class _Source:
    """A model reference resolved to something `from_pretrained` can open."""

    reference: str                                   # as the user gave it; becomes the pair's name
    location: str                                    # local folder or Hub id
    options: dict[str, bool] = field(default_factory=dict)  # e.g. local_files_only for a cached Hub model


def load_pair(preset: str | None = None, *, draft: str | None = None, target: str | None = None,
              device: str = "auto", draft_dtype: str = "float32", target_dtype: str = "auto",
              cache_dir: str | None = None, progress: Progress | None = None, prepack: bool = True,
              before_weights: Callable[[], None] | None = None) -> ModelPair:
    """Load a draft/target pair: a preset (default qwen-coder), or explicit references that
    override the preset's sides. `draft="ngram"` loads no draft model. `cache_dir` is the
    converted-weight cache (default $SPECVIZ_CACHE, else ~/.cache/specviz).

    On the CPU, `prepack` reorders the target's (and a bfloat16 draft's) linear weights
    for oneDNN so that verifying k + 1 tokens costs about one decoding step
    (engine/runtime/cpu/kernels.py); a draft_dtype of "int8" or "int4" quantizes the draft's linear layers.
    On CUDA the target loads in bfloat16 unless `target_dtype` names another ("auto"), and both
    models' static-cache forwards are captured as CUDA graphs (engine/loading/speed_up.py).
    `target_dtype="bfloat16-native"` (engine.config.NATIVE_BF16) runs a bfloat16 target where the CPU
    computes bfloat16 natively, else float32, and says why in the progress (engine/runtime/cpu/native_bf16.py).

    `before_weights` is called once every check that needs no weights has passed (device,
    dtypes, references, tokenizers), right before the weights load: a cache that must free
    memory for them does it there, so a mistyped path costs it nothing."""
    report = progress or (lambda fraction, message: None)
    before_weights = before_weights or (lambda: None)
    torch_device = resolve_device(device)
    draft_dtype = resolve_draft_dtype(draft_dtype, torch_device)
    if target_dtype == NATIVE_BF16:
        target_dtype, reason = cpu_target_dtype() if torch_device.type == "cpu" else ("bfloat16", None)
        report(0.01, f"a float32 target: {reason}" if reason else "a bfloat16 target: this CPU computes bfloat16 natively")
    target_dtype = resolve_target_dtype(target_dtype, torch_device.type)
    draft_torch_dtype, target_torch_dtype = _dtype(draft_dtype, "draft"), _dtype(target_dtype, "target")
    if draft_dtype in QUANTIZED_DRAFTS and torch_device.type != "cpu":
        raise ModelLoadError(f"an {draft_dtype} draft runs on the CPU only, but the device is {torch_device.type}: "
                             "choose a bfloat16 or float16 draft there")
    if draft_dtype in QUANTIZED_DRAFTS and torch_device.type == "cpu" and (reason := quantized_draft_refusal(draft_dtype)):
        raise ModelLoadError(f"an {draft_dtype} draft cannot run here: {reason}; choose a float32 or bfloat16 draft")
    preset_name, draft_ref, target_ref, default_drafter = _choose(preset, _blank_to_none(draft), _blank_to_none(target))
    if target_ref.startswith(TINY_RANDOM + "/") or (draft_ref or "").startswith(TINY_RANDOM + "/"):
        pair = _tiny_pair(preset_name, draft_ref, target_ref, torch_device, draft_torch_dtype, target_torch_dtype, report)
        before_weights()                    # after its checks; its weights are a few kilobytes
        return speed_up(pair, draft_dtype, prepack, report, {})

    root = cache_root(cache_dir)
    # 1. Resolve: local folder (GGUF converted on first use, then cached) or Hub id.
    draft_source = _resolve(draft_ref, "draft", root, partial(report, 0.05)) if draft_ref else None
    target_source = _resolve(target_ref, "target", root, partial(report, 0.4 if draft_ref else 0.05))
    # 2. Tokenizers: the target's serves both, so refuse differing vocabularies before any weights load.
    report(0.75, "loading tokenizers")
    tokenizer = _load_tokenizer(target_source, "target")
    shared_token_ids = None
    if draft_source is not None and not _same_tokenizer_file(draft_source, target_source):
        shared_token_ids = check_same_vocabulary(_load_tokenizer(draft_source, "draft"), tokenizer)
    # 3. Weights, each side in its own dtype.
    before_weights()
    draft_model = None
    if draft_source is not None:
        report(0.8, f"loading draft {draft_ref} ({draft_dtype})")
        draft_model = _load_model(draft_source, "draft", draft_torch_dtype, torch_device)
    report(0.87, f"loading target {target_ref} ({target_dtype})")
    target_model = _load_model(target_source, "target", target_torch_dtype, torch_device)
    pair = ModelPair(target=target_model, draft=draft_model, tokenizer=tokenizer, target_name=target_ref,
                     draft_name=draft_ref or NGRAM_DRAFTER, device=torch_device, target_dtype=target_dtype,
                     draft_dtype=draft_dtype if draft_model is not None else "", preset=preset_name,
                     default_drafter=default_drafter, shared_token_ids=shared_token_ids)
    check_end_tokens(pair)
    files = {"target": CheckpointFiles(target_source.location),
             "draft": CheckpointFiles(draft_source.location if draft_source is not None else None)}
    pair = speed_up(pair, draft_dtype, prepack, report, files, int8_root=root)
    report(1.0, "models ready")
    return pair


def resolve_device(name: str) -> torch.device:
    """"auto" -> cuda if available, else mps if available, else cpu; others checked for availability."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        return torch.device("mps" if torch.backends.mps.is_available() else "cpu")
    kind, _, index = str(name).partition(":")
    if kind not in ("cpu", "cuda", "mps") or (index and not (kind == "cuda" and index.isdigit())):
        raise ModelLoadError(f"device must be auto, cpu, cuda, cuda:N or mps, got {name!r}")
    if kind == "cuda" and not (torch.cuda.is_available() and int(index or 0) < torch.cuda.device_count()):
        raise ModelLoadError(f"device {name!r} was requested but torch finds no such CUDA GPU; use auto or cpu")
    if kind == "mps" and not torch.backends.mps.is_available():
        raise ModelLoadError("device 'mps' was requested but this torch has no MPS (Apple GPU) support; use auto or cpu")
    return torch.device(name)


def resolve_draft_dtype(name: str, device: torch.device) -> str:
    """"auto" -> the fastest draft for the device: int8 on a CPU, bfloat16 on CUDA, float32 elsewhere."""
    if name != "auto":
        return name
    if device.type == "cpu":
        return "int8" if can_quantize_int8() else "float32"
    return "bfloat16" if device.type == "cuda" else "float32"


def _dtype(name: str, role: str) -> torch.dtype:
    """The dtype the weights load in; an int8 or int4 draft loads in float32 and is quantized after."""
    allowed = DRAFT_DTYPES if role == "draft" else DTYPES       # a draft's "auto" is resolved before this
    if name not in allowed:
        raise ModelLoadError(f"{role} dtype must be one of {', '.join(allowed)}, got {name!r}")
    return torch.float32 if name in QUANTIZED_DRAFTS else getattr(torch, name)


def _blank_to_none(reference: str | None) -> str | None:
    if reference is None or not reference.strip():
        return None
    return reference.strip()


def _choose(preset: str | None, draft: str | None, target: str | None) -> tuple[str | None, str | None, str, str]:
    """(preset name or None, draft reference or None for n-gram, target reference, default drafter)."""
    if preset is None and draft is None and target is None:
        preset = DEFAULT_PRESET
    if preset is not None:
        chosen = get_preset(preset)
        draft_ref = chosen.draft if draft is None else (None if draft == NGRAM_DRAFTER else draft)
        target_ref = chosen.target if target is None else target
        unchanged = draft_ref == chosen.draft and target_ref == chosen.target
        preset_name, default_drafter = (chosen.name, chosen.default_drafter) if unchanged else (None, MODEL_DRAFTER)
    elif target is None:
        raise ModelLoadError("a target model is needed: give a preset, or a target (hub id, local directory or .gguf file)")
    else:
        preset_name, draft_ref, target_ref, default_drafter = None, draft or NGRAM_DRAFTER, target, MODEL_DRAFTER
    if draft_ref is None or draft_ref == NGRAM_DRAFTER:
        return preset_name, None, target_ref, NGRAM_DRAFTER
    return preset_name, draft_ref, target_ref, default_drafter


def _tiny_pair(preset_name: str | None, draft_ref: str | None, target_ref: str, device: torch.device,
               draft_dtype: torch.dtype, target_dtype: torch.dtype, report: Progress) -> ModelPair:
    tiny = PRESETS[TINY_RANDOM]
    if target_ref != tiny.target or draft_ref not in (tiny.draft, None):
        raise ModelLoadError("the tiny-random models only load together (or the target with --draft ngram)")
    report(0.1, "building the tiny random pair")
    pair = build_tiny_pair(seed=0, device=device, dtype=target_dtype)
    pair.preset = preset_name
    if draft_ref is None:
        pair.draft, pair.draft_name, pair.draft_dtype, pair.default_drafter = None, NGRAM_DRAFTER, "", NGRAM_DRAFTER
    else:
        pair.draft.to(dtype=draft_dtype)
        pair.draft_dtype = str(draft_dtype).removeprefix("torch.")
    report(1.0, "models ready")
    return pair


def _resolve(reference: str, role: str, root: Path, report: Callable[[str], None]) -> _Source:
    """Find (converting GGUF where needed) what `from_pretrained` should open for `reference`."""
    if reference.startswith(EMBEDDED_PREFIX):
        return _Source(reference, str(converted_embedded(embedded_spec(reference), root, report)))
    path = Path(reference).expanduser()
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise ModelLoadError(f"{role} {reference!r} is a file but not a .gguf file; give a .gguf file or a model directory")
        return _Source(reference, str(converted_file(path, root, report)))
    if path.is_dir():
        if not (path / "config.json").is_file():
            hint = " (it holds .gguf files: give one of them)" if any(path.glob("*.gguf")) else ""
            raise ModelLoadError(f"{role} directory {reference!r} does not hold a model: it has no config.json{hint}")
        return _Source(reference, str(path))
    if looks_like_path(reference) or not is_hub_id(reference):
        raise ModelLoadError(f"{role} model {reference!r} not found: no such file or directory, and not a Hub id")
    report(f"checking the Hugging Face Hub for {reference}")
    return _Source(reference, reference, hub_access(reference))


def _same_tokenizer_file(first: _Source, second: _Source) -> bool:
    """True when both folders hold byte-identical tokenizer.json files, so the vocabularies
    are equal without loading a second tokenizer (slow for Qwen's; docs/benchmark.md)."""
    first_file, second_file = Path(first.location) / "tokenizer.json", Path(second.location) / "tokenizer.json"
    return (first_file.is_file() and second_file.is_file()
            and first_file.stat().st_size == second_file.stat().st_size
            and first_file.read_bytes() == second_file.read_bytes())


def _load_tokenizer(source: _Source, role: str) -> PreTrainedTokenizerBase:
    try:
        return AutoTokenizer.from_pretrained(source.location, **source.options)
    except _LOAD_ERRORS as error:
        raise ModelLoadError(f"could not load the {role} tokenizer of {source.reference!r}: {first_line(error)}") from error


def _load_model(source: _Source, role: str, dtype: torch.dtype, device: torch.device) -> PreTrainedModel:
    try:
        model = AutoModelForCausalLM.from_pretrained(source.location, dtype=dtype, **source.options)
    except _LOAD_ERRORS as error:
        raise ModelLoadError(f"could not load the {role} model {source.reference!r}: {first_line(error)}") from error
    model.to(device)
    model.eval()
    model.requires_grad_(False)
    return model
