"""Faster GGUF conversion: the same transformers calls, the same weights, less waiting.

A first start converts the two Qwen GGUFs to float32 safetensors. Profiling that on a
2-core CPU showed most of the time outside the dequantization proper:

- transformers opens each file three times (config, tokenizer, weights), and gguf's
  reader parses the whole header on each open, element by element: for the Qwen files
  (151,936 vocabulary entries and their merges) that is a slow parse, on every open;
- it then decodes every metadata value again on each call;
- it builds gguf's tensor-name table (the same one) once per module;
- gguf dequantizes a tensor 16 rows at a time, one Python call per group, on one core;
- its reader slices an `np.memmap`, whose Python-level `__getitem__` runs for every
  slice, and a header parse slices at least once per element (twice per string).

`faster_gguf_loading()` is active for one conversion. It hands the three opens one
reader (the reader maps the file read-only) that slices a plain ndarray view of the
map; memoizes the metadata-only parse (a deep copy each time, so no caller sees
another's edits) and the read-only tensor-name table; and dequantizes quantized
tensors in chunks of rows on a small thread pool. Dequantization is row-independent
and the chunks run gguf's own per-row code, so the result is bit-identical to gguf's
(tests/test_gguf_speedups.py checks it per quantization type, and a whole conversion).
The profile's figures and the conversion times before and after were in docs/benchmark.md
("Measurements quoted in code", now `git show e9811c1:docs/benchmark.md`: no saved run).

The patches replace module attributes, so the caller must not run two conversions at
once in one process (engine/loading/gguf_cache.py holds a lock around them).
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

ROWS_PER_CHUNK = 256


def dequantize_in_chunks(data: np.ndarray, quant_type: int, pool: ThreadPoolExecutor,
                         fallback: Callable[[np.ndarray, int], np.ndarray]) -> np.ndarray:
    """gguf's `dequantize(data, quant_type)`, computed over chunks of rows in `pool`.
    Types without gguf's per-row code (float32, float16, lazy tensors), small tensors, and
    anything this gguf version lays out differently go to `fallback` (gguf's own)."""
    import gguf.quants as quants

    try:
        traits = getattr(quants, "_type_traits", {}).get(quants.GGMLQuantizationType(quant_type))
    except ValueError:          # a type gguf does not know: its own dequantize says so
        traits = None
    shape_of = getattr(quants, "quant_shape_from_byte_shape", None)
    if (traits is None or shape_of is None or not hasattr(traits, "dequantize_rows")
            or not isinstance(data, np.ndarray) or data.ndim < 2):
        return fallback(data, quant_type)
    output_shape = shape_of(data.shape, quant_type)
    rows = data.reshape((-1, data.shape[-1]))
    if rows.shape[0] < 2 * ROWS_PER_CHUNK:
        return fallback(data, quant_type)
    traits.init_grid()
    chunks = np.array_split(rows, rows.shape[0] // ROWS_PER_CHUNK)
    output = np.empty((rows.shape[0], output_shape[-1]), dtype=np.float32)
    bounds = np.cumsum([0] + [len(chunk) for chunk in chunks])

    def fill(index: int) -> None:
        output[bounds[index]:bounds[index + 1]] = traits.dequantize_rows(chunks[index])

    list(pool.map(fill, range(len(chunks))))
    return output.reshape(output_shape)


@contextmanager
def faster_gguf_loading() -> Iterator[None]:
    """For the duration: one reader per GGUF file, one metadata parse per file, and
    dequantization in parallel chunks of rows (see the module docstring)."""
    import gguf
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    original_reader, original_dequantize = gguf.GGUFReader, gguf.dequantize
    original_name_map = gguf.get_tensor_name_map
    original_checkpoint = gguf_utils.load_gguf_checkpoint
    readers: dict[tuple[str, str], object] = {}
    metadata: dict[str, dict] = {}

    class PlainArrayReader(original_reader):
        """gguf's reader over a plain ndarray view of its memory map: slicing an
        `np.memmap` runs Python code per slice, and a header parse slices twice per string."""

        @property
        def data(self) -> np.ndarray:
            return self._plain_data

        @data.setter
        def data(self, mapped: np.ndarray) -> None:
            self._plain_data = mapped.view(np.ndarray)  # keeps the map alive through .base

    def shared_reader(path: str | os.PathLike, mode: str = "r") -> object:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = PlainArrayReader(path, mode)
        return readers[key]

    def memoized_checkpoint(path: str | os.PathLike, return_tensors: bool = False, **kwargs) -> dict:
        if return_tensors or kwargs:
            return original_checkpoint(path, return_tensors=return_tensors, **kwargs)
        key = os.fspath(path)
        if key not in metadata:
            metadata[key] = original_checkpoint(path, return_tensors=False)
        return copy.deepcopy(metadata[key])

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        gguf.GGUFReader = shared_reader
        gguf.dequantize = lambda data, quant_type: dequantize_in_chunks(data, quant_type, pool, original_dequantize)
        gguf_utils.load_gguf_checkpoint = memoized_checkpoint
        gguf.get_tensor_name_map = functools.cache(original_name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.dequantize = original_reader, original_dequantize
            gguf_utils.load_gguf_checkpoint = original_checkpoint
            gguf.get_tensor_name_map = original_name_map
