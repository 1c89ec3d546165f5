"""Saved int8 quantizations (engine/runtime/cpu/int8_store.py): a warm start loads the draft's int8
layers instead of quantizing, and a saved file that is stale or corrupt is refused and rebuilt.
Oracles: the layers a fresh quantization produces (bit-equal tensors), and the file on disk."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

from engine import SpecConfig, SpeculativeEngine, load_pair
from engine.runtime.cpu.checkpoint_files import CheckpointFiles
from engine.runtime.cpu.kernels import can_quantize_int8, quantize_int8
from engine.runtime.cpu.int8_store import KEY_FIELD, STORE_FOLDER, Int8Store
from engine.runtime.cpu.kernel_modules import Int8Linear
from engine.loading.tiny import build_tiny_pair

pytestmark = [pytest.mark.cpu_arithmetic, pytest.mark.skipif(not can_quantize_int8(), reason="the int8 kernel does not run on this CPU")]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    pair = build_tiny_pair(seed=5)
    pair.draft.save_pretrained(tmp_path / "draft")
    pair.tokenizer.save_pretrained(tmp_path / "draft")
    return tmp_path / "draft"


def _quantized(folder: Path, root: Path) -> dict[str, Int8Linear]:
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    files = CheckpointFiles(folder)
    assert quantize_int8(model, files, Int8Store(root, files)) > 0
    return {name: module for name, module in model.named_modules() if isinstance(module, Int8Linear)}


def _same(first: dict[str, Int8Linear], second: dict[str, Int8Linear]) -> bool:
    return first.keys() == second.keys() and all(
        torch.equal(first[name].weight_int8, second[name].weight_int8)
        and torch.equal(first[name].scales, second[name].scales) for name in first)


def _saved_file(root: Path) -> Path:
    (path,) = (root / STORE_FOLDER).glob("*.safetensors")
    return path


def test_a_warm_start_loads_the_saved_layers(folder: Path, tmp_path: Path):
    fresh = _quantized(folder, tmp_path / "cache")
    path = _saved_file(tmp_path / "cache")
    files = CheckpointFiles(folder)
    shapes = {name: (layer.out_features, layer.in_features) for name, layer in fresh.items()}
    saved = Int8Store(tmp_path / "cache", files).load(shapes)
    assert saved is not None and saved.keys() == fresh.keys()
    written = path.stat().st_mtime_ns
    assert _same(_quantized(folder, tmp_path / "cache"), fresh)
    assert path.stat().st_mtime_ns == written              # loaded, not written again


@pytest.mark.parametrize("damage", ["truncated", "flipped byte", "garbage"])
def test_a_corrupt_file_is_refused_and_rebuilt(folder: Path, tmp_path: Path, damage: str):
    fresh = _quantized(folder, tmp_path / "cache")
    path = _saved_file(tmp_path / "cache")
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "flipped byte":
        data[-3] ^= 0x40                                    # inside the last tensor's bytes: only the checksum sees it
    else:
        data = bytearray(b"not a safetensors file")
    path.write_bytes(bytes(data))
    shapes = {name: (layer.out_features, layer.in_features) for name, layer in fresh.items()}
    assert Int8Store(tmp_path / "cache", CheckpointFiles(folder)).load(shapes) is None
    assert _same(_quantized(folder, tmp_path / "cache"), fresh)
    assert Int8Store(tmp_path / "cache", CheckpointFiles(folder)).load(shapes) is not None     # rebuilt


def test_a_stale_file_is_refused(folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    fresh = _quantized(folder, tmp_path / "cache")
    shapes = {name: (layer.out_features, layer.in_features) for name, layer in fresh.items()}
    source = next(folder.glob("*.safetensors"))
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))       # the source was rewritten
    assert Int8Store(tmp_path / "cache", CheckpointFiles(folder)).load(shapes) is None
    _quantized(folder, tmp_path / "cache")                                   # rebuilt for the new source
    assert Int8Store(tmp_path / "cache", CheckpointFiles(folder)).load(shapes) is not None
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")                 # another torch
    assert Int8Store(tmp_path / "cache", CheckpointFiles(folder)).load(shapes) is None
    monkeypatch.undo()
    wrong = {name: (rows + 1, columns) for name, (rows, columns) in shapes.items()}
    assert Int8Store(tmp_path / "cache", CheckpointFiles(folder)).load(wrong) is None


def test_no_files_no_store(tmp_path: Path):
    store = Int8Store(tmp_path, CheckpointFiles(None))
    assert store.path is None and store.load({}) is None and not store.save({})


def test_a_loaded_draft_decodes_as_a_quantized_one(folder: Path, tmp_path: Path):
    """Through load_pair: the second load reads the saved file, and generation is identical."""
    config = SpecConfig(k=3, max_new_tokens=12, temperature=0.0, seed=0)
    drafts, engines = [], []
    for _ in range(2):
        pair = load_pair(draft=str(folder), target=str(folder), draft_dtype="int8", device="cpu",
                         cache_dir=str(tmp_path / "cache"), prepack=False)
        assert pair.draft_dtype == "int8" and _saved_file(tmp_path / "cache").is_file()
        engine = SpeculativeEngine(pair)
        trace = engine.generate("hello", config)
        drafts.append([(token.id, token.q) for step in trace.steps for token in step.draft])
        engines.append((engine, trace))
    assert drafts[0] == drafts[1] and drafts[0]
    for engine, trace in engines:
        assert trace.output.token_ids == engine.target_only_ids(list(trace.prompt.token_ids), config)


def test_files_of_deleted_folders_are_pruned(folder: Path, tmp_path: Path):
    _quantized(folder, tmp_path / "cache")
    gone = _saved_file(tmp_path / "cache")
    for path in folder.iterdir():
        path.rename(tmp_path / f"moved-{path.name}")
    folder.rmdir()
    other = tmp_path / "other"
    other.mkdir()
    for path in tmp_path.glob("moved-*"):
        path.rename(other / path.name.removeprefix("moved-"))
    older = gone.with_name("0123456789abcdef.safetensors")      # an older key: no "folder" field
    save_file({"x": torch.zeros(1)}, older, metadata={KEY_FIELD: json.dumps({"files": f"{other}/a:1:2:3"})})
    foreign = gone.with_name("fedcba9876543210.safetensors")    # not written by the store: left alone
    save_file({"x": torch.zeros(1)}, foreign)
    _quantized(other, tmp_path / "cache")
    kept = set((tmp_path / "cache" / STORE_FOLDER).glob("*.safetensors"))
    assert kept == {Int8Store(tmp_path / "cache", CheckpointFiles(other)).path, foreign}
