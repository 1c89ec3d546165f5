"""engine/loading/gguf_speedups.py: a faster conversion must give exactly the weights, config and
tokenizer that transformers and gguf give without it. Oracles: gguf's own `dequantize`
(bit for bit) and, under the real_models marker, a plain conversion of an embedded GGUF."""

from __future__ import annotations

import filecmp
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
import transformers.modeling_gguf_pytorch_utils as gguf_utils  # noqa: E402
from gguf import GGMLQuantizationType as Q  # noqa: E402

from engine.loading.gguf_speedups import ROWS_PER_CHUNK, dequantize_in_chunks, faster_gguf_loading  # noqa: E402

QUANT_TYPES = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]


def _random_blocks(quant_type: Q, rows: int, blocks_per_row: int, seed: int = 0) -> np.ndarray:
    _, type_size = gguf.GGML_QUANT_SIZES[quant_type]
    generator = np.random.default_rng(seed)
    # Bytes below 0x78: any float16 scale two of them make has an exponent short of all ones, so every scale is
    # finite and no NaN or inf arises to warn about (the tests are about chunk boundaries, not gguf's arithmetic).
    return generator.integers(0, 0x78, size=(rows, blocks_per_row * type_size), dtype=np.uint8)


@pytest.mark.parametrize("quant_type", QUANT_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("rows", [1, 5, 2 * ROWS_PER_CHUNK + 7, 5 * ROWS_PER_CHUNK - 1])
def test_chunked_dequantization_is_bit_identical_to_gguf(quant_type, rows):
    data = _random_blocks(quant_type, rows, blocks_per_row=2, seed=rows)
    expected = gguf.dequantize(data, quant_type)
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = dequantize_in_chunks(data, quant_type, pool, gguf.dequantize)
    assert got.shape == expected.shape and got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), expected.view(np.uint32))


def test_three_dimensional_tensors_keep_their_shape():
    data = _random_blocks(Q.Q8_0, 3 * ROWS_PER_CHUNK, blocks_per_row=1).reshape(3, ROWS_PER_CHUNK, -1)
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = dequantize_in_chunks(data, Q.Q8_0, pool, gguf.dequantize)
    assert np.array_equal(got.view(np.uint32), gguf.dequantize(data, Q.Q8_0).view(np.uint32))
    assert got.shape == (3, ROWS_PER_CHUNK, 32)


def test_unquantized_types_go_to_the_fallback():
    calls = []

    def fallback(data, quant_type):
        calls.append(quant_type)
        return gguf.dequantize(data, quant_type)

    data = np.arange(2048 * 4, dtype=np.float32).view(np.uint8).reshape(2048, 16)
    with ThreadPoolExecutor(max_workers=2) as pool:
        got = dequantize_in_chunks(data, Q.F32, pool, fallback)
    assert calls == [Q.F32] and np.array_equal(got.ravel(), np.arange(2048 * 4, dtype=np.float32))


def _small_gguf(path: Path) -> Path:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(64)
    writer.add_embedding_length(4)
    writer.add_token_list([f"t{index}" for index in range(300)])
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(8, 4))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_metadata_is_parsed_once_and_every_caller_gets_its_own_copy(tmp_path, monkeypatch):
    path = _small_gguf(tmp_path / "small.gguf")
    parses = []
    original_build_fields = gguf.GGUFReader._build_fields

    def counting_build_fields(self, *args, **kwargs):
        parses.append(self)
        return original_build_fields(self, *args, **kwargs)

    monkeypatch.setattr(gguf.GGUFReader, "_build_fields", counting_build_fields)
    plain = gguf_utils.load_gguf_checkpoint(str(path), return_tensors=False)
    parses.clear()
    with faster_gguf_loading():
        first = gguf_utils.load_gguf_checkpoint(str(path), return_tensors=False)
        first["config"]["context_length"] = -1
        first["tokenizer"]["tokens"].append("edited")
        second = gguf_utils.load_gguf_checkpoint(str(path))
    assert second == plain and first != plain
    assert len(parses) == 1


def test_reader_slices_a_plain_array_and_reads_what_gguf_reads(tmp_path):
    path = _small_gguf(tmp_path / "small.gguf")
    plain = gguf.GGUFReader(str(path))
    with faster_gguf_loading():
        shared = gguf.GGUFReader(str(path))
        assert gguf.GGUFReader(str(path)) is shared
    assert type(shared.data) is np.ndarray and isinstance(plain.data, np.memmap)
    assert list(shared.fields) == list(plain.fields)
    assert [field.contents() for field in shared.fields.values()] == [field.contents() for field in plain.fields.values()]
    assert np.array_equal(shared.tensors[0].data, plain.tensors[0].data)


def test_patches_are_undone_on_exit_and_on_error():
    before = (gguf.GGUFReader, gguf.dequantize, gguf.get_tensor_name_map, gguf_utils.load_gguf_checkpoint)
    with faster_gguf_loading():
        assert gguf.GGUFReader is not before[0] and gguf.dequantize is not before[1]
    assert (gguf.GGUFReader, gguf.dequantize, gguf.get_tensor_name_map, gguf_utils.load_gguf_checkpoint) == before
    with pytest.raises(RuntimeError, match="boom"):
        with faster_gguf_loading():
            raise RuntimeError("boom")
    assert (gguf.GGUFReader, gguf.dequantize, gguf.get_tensor_name_map, gguf_utils.load_gguf_checkpoint) == before


@pytest.mark.real_models
def test_faster_conversion_of_an_embedded_gguf_equals_the_plain_one(tmp_path, monkeypatch):
    """SmolLM2-135M (Q4_1): converted with and without the speedups, the folders hold the
    same tensors bit for bit, the same config and the same tokenizer files."""
    import torch
    from safetensors.torch import load_file

    import engine.loading.gguf_cache as gguf_cache
    from engine.loading.weights import embedded_spec, reassemble

    spec = embedded_spec("embedded:smollm2-135m-instruct")
    source = reassemble(spec, tmp_path / spec.filename)
    fast, plain = tmp_path / "fast", tmp_path / "plain"
    fast.mkdir(), plain.mkdir()
    gguf_cache.convert_gguf(source, fast)
    monkeypatch.setattr(gguf_cache, "faster_gguf_loading", _no_speedups)
    gguf_cache.convert_gguf(source, plain)

    fast_tensors, plain_tensors = load_file(fast / "model.safetensors"), load_file(plain / "model.safetensors")
    assert fast_tensors.keys() == plain_tensors.keys() and len(fast_tensors) > 20
    assert all(torch.equal(fast_tensors[name], plain_tensors[name]) for name in fast_tensors)
    assert json.loads((fast / "config.json").read_text()) == json.loads((plain / "config.json").read_text())
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert filecmp.cmp(fast / name, plain / name, shallow=False), name


class _no_speedups:
    """Stands in for faster_gguf_loading: changes nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info) -> None:
        return None
