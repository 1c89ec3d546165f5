"""Weights read from their files as they are converted (engine/runtime/cpu/checkpoint_files.py): the
fast pair ends up holding no reference to the memory-mapped safetensors files, so the process does
not keep the mapped model resident beside its converted copy. Oracle: /proc/self/maps (Linux, the
only OS CI runs on) and tensor equality with the mapped parameters."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine import SpecConfig, SpeculativeEngine, load_pair
from engine.runtime.cpu.checkpoint_files import CheckpointFiles
from engine.loading.tiny import build_tiny_pair

pytestmark = [pytest.mark.cpu_arithmetic, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps")]


def _saved_pair(folder: Path) -> tuple[str, str]:
    pair = build_tiny_pair(seed=4, hidden_size=256)            # big enough for safetensors to map, not copy, it
    for role, model in (("draft", pair.draft), ("target", pair.target)):
        model.save_pretrained(folder / role)
        pair.tokenizer.save_pretrained(folder / role)
    return str(folder / "draft"), str(folder / "target")


def _mapped_ranges(folder: Path) -> list[tuple[int, int]]:
    gc.collect()
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        if str(folder) in line:
            start, end = line.split()[0].split("-")
            ranges.append((int(start, 16), int(end, 16)))
    return ranges


def _tensors_on_the_mapping(model: torch.nn.Module, folder: Path) -> set[str]:
    """Names of the model's tensors whose memory lies inside a mapping of a file under `folder`."""
    ranges = _mapped_ranges(folder)
    tensors = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    return {name for name, tensor in tensors.items()
            if any(start <= tensor.data_ptr() < end for start, end in ranges)}


def test_the_fast_pair_keeps_only_embedding_tables_mapped_and_decodes_like_the_plain_one(tmp_path):
    """The converted layers hold memory of their own; everything else too, except the embedding
    tables (a forward reads a few rows of them: only those pages become resident)."""
    draft, target = _saved_pair(tmp_path)
    plain = load_pair(draft=draft, target=target, draft_dtype="float32", prepack=False)
    on_mapping = _tensors_on_the_mapping(plain.target, tmp_path)
    assert "model.layers.0.mlp.up_proj.weight" in on_mapping, "transformers no longer maps safetensors files"
    reference = SpeculativeEngine(plain).generate("mapped", SpecConfig(k=3, max_new_tokens=16))
    del plain
    fast = load_pair(draft=draft, target=target, draft_dtype="int8")
    for model in (fast.target, fast.draft):
        assert _tensors_on_the_mapping(model, tmp_path) == {"model.embed_tokens.weight"}
    trace = SpeculativeEngine(fast).generate("mapped", SpecConfig(k=3, max_new_tokens=16))
    assert trace.output.token_ids == reference.output.token_ids


def test_without_the_release_the_norms_stay_on_the_mapping(tmp_path, monkeypatch):
    """The planted bug: parameters left on the mapping, and the check above sees them."""
    draft, target = _saved_pair(tmp_path)
    monkeypatch.setattr("engine.loading.speed_up.release_mapped_weights", lambda model, files: None)
    pair = load_pair(draft=draft, target=target, draft_dtype="int8")
    assert "model.norm.weight" in _tensors_on_the_mapping(pair.target, tmp_path)


def test_fresh_reads_equal_tensors_into_their_own_memory_and_refuses_a_renamed_entry(tmp_path):
    pair = build_tiny_pair(seed=4)
    pair.target.save_pretrained(tmp_path)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    files = CheckpointFiles(tmp_path)
    parameters = dict(model.named_parameters())
    name = "model.layers.0.mlp.up_proj.weight"
    fresh = files.fresh(name, parameters[name])
    assert torch.equal(fresh, parameters[name]) and fresh.data_ptr() != parameters[name].data_ptr()
    assert files._read(name, parameters[name]) is not None
    other = "model.layers.0.mlp.gate_proj.weight"            # same shape and dtype, different values
    files._entries[name] = files._entries[other]               # planted: a key that names the wrong tensor
    assert files._read(name, parameters[name]) is None          # caught by the first/last-row check
    assert torch.equal(files.fresh(name, parameters[name]), parameters[name])   # and copied instead
    assert files._read(name, parameters[name].to(torch.bfloat16)) is None       # a converted dtype: copied
    assert len(CheckpointFiles(tmp_path / "missing")) == 0 and len(CheckpointFiles(None)) == 0


def _resident_kb(address: int) -> int:
    """Resident kilobytes of the mapping that holds `address` (/proc/self/smaps)."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if "-" in fields[0] and len(fields) >= 5:
            start, end = (int(part, 16) for part in fields[0].split("-"))
            inside = start <= address < end
        elif inside and fields[0] == "Rss:":
            return int(fields[1])
    raise AssertionError("no mapping holds that address")


def _saved_target(folder: Path) -> tuple[CheckpointFiles, dict[str, torch.Tensor]]:
    build_tiny_pair(seed=4, hidden_size=512).target.save_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    return CheckpointFiles(folder), dict(model.named_parameters())


BIG = "model.layers.0.mlp.up_proj.weight"         # 1024 x 512 float32: 2 MB, 512 pages


def test_borrowed_lends_a_view_of_the_file_and_drops_its_pages_afterwards(tmp_path):
    """Oracle: the lent tensor equals the parameter, lies in a mapping of the checkpoint file
    (not memory of its own), and that mapping's resident size falls back once the block ends."""
    files, parameters = _saved_target(tmp_path)
    with files.borrowed(BIG, parameters[BIG]) as lent:
        address = lent.data_ptr()
        assert torch.equal(lent, parameters[BIG]) and address != parameters[BIG].data_ptr()
        assert any(start <= address < end for start, end in _mapped_ranges(tmp_path))
        touched = _resident_kb(address)
    assert touched >= parameters[BIG].numel() * 4 // 1024
    assert _resident_kb(address) < touched - parameters[BIG].numel() * 4 // 1024 + 16


def test_without_the_page_drop_the_borrowed_pages_stay_resident(tmp_path, monkeypatch):
    """The planted bug: no madvise, and the resident-size check above sees the pages stay."""
    monkeypatch.setattr("engine.runtime.cpu.checkpoint_files._drop_pages", lambda mapping, entry: None)
    files, parameters = _saved_target(tmp_path)
    with files.borrowed(BIG, parameters[BIG]) as lent:
        address = lent.data_ptr()
        touched = _resident_kb(address)
    assert _resident_kb(address) == touched


def test_borrowed_lends_a_fresh_copy_when_the_entry_does_not_match_or_pages_cannot_be_dropped(tmp_path, monkeypatch):
    files, parameters = _saved_target(tmp_path)
    files._entries[BIG] = files._entries["model.layers.0.mlp.gate_proj.weight"]   # planted: the wrong tensor
    with files.borrowed(BIG, parameters[BIG]) as lent:
        assert torch.equal(lent, parameters[BIG])
        assert not any(start <= lent.data_ptr() < end for start, end in _mapped_ranges(tmp_path))
    monkeypatch.setattr("engine.runtime.cpu.checkpoint_files.PAGES_CAN_BE_DROPPED", False)   # e.g. macOS
    other = "model.layers.0.self_attn.q_proj.weight"
    with files.borrowed(other, parameters[other]) as lent:
        assert torch.equal(lent, parameters[other])
        assert not any(start <= lent.data_ptr() < end for start, end in _mapped_ranges(tmp_path))
