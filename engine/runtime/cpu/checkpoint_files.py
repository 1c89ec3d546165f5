"""Read a model's weights from its safetensors files one tensor at a time, never all at once.

`from_pretrained` memory-maps safetensors files: a parameter is a view of the file's
pages, which become resident (and count in the process's memory) once read, and stay
so while any parameter of that file is alive. Repacking every linear layer for faster
kernels (engine/runtime/cpu/kernels.py) reads every weight once, so the mapped pages
of the whole model and its repacked copy would be resident together: twice the
model. Two ways around it:

- `CheckpointFiles.borrowed` lends a weight that is read once (to be repacked or
  quantized) as a view of this object's own mapping of the file, and when the
  conversion is done drops that tensor's pages from the process (`madvise`
  MADV_DONTNEED; they stay in the operating system's page cache for the next start).
  No copy is made: a warm start of the default pair repacks its target in about a
  third of the time a read into fresh memory took (docs/benchmark.md). Where madvise
  is missing (not Linux) it lends a fresh copy instead.
- `CheckpointFiles.fresh` reads a tensor that is kept (a bias, a norm) with an
  ordinary file read into memory of its own.

Once every parameter has been converted or replaced by a fresh copy, nothing refers to
`from_pretrained`'s mapping and the operating system unmaps it.

A tensor is read from a file only when the file's entry has the parameter's dtype and
shape and agrees with the mapped parameter on its first and last rows (a check that
touches a few pages); anything else (a dtype converted at load, a renamed key, a
non-CPU or non-local model) is copied from the parameter itself. Pure file reads: the
header is 8 bytes of little-endian length, then JSON naming each tensor's dtype, shape
and byte range.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import struct
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64,
                      "I64": torch.int64, "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8}
MAX_HEADER_BYTES = 100 * 1024 * 1024
PAGES_CAN_BE_DROPPED = sys.platform.startswith("linux") and hasattr(mmap, "MADV_DONTNEED")


@dataclass(frozen=True)
class _Entry:
    path: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    start: int            # absolute byte offset in the file
    end: int


class CheckpointFiles:
    """The tensors of the safetensors files in one local model folder, by name."""

    def __init__(self, folder: str | Path | None):
        self._entries: dict[str, _Entry] = {}
        self._paths: list[Path] = []
        self._mappings: dict[Path, mmap.mmap] = {}   # opened by `borrowed`, one per file
        self._mapping_lock = threading.Lock()
        self.folder: Path | None = None          # the folder, resolved, when it holds safetensors files
        directory = Path(folder) if folder is not None else None
        if directory is None or not directory.is_dir():
            return
        self._paths = sorted(directory.glob("*.safetensors"))
        self.folder = directory.resolve() if self._paths else None
        for path in self._paths:
            self._entries.update(_read_header(path))

    def fingerprint(self) -> str:
        """What identifies these files' content cheaply (no full read): the folder, then each
        file's name, size, modification time and the sha256 of its header (tensor names,
        dtypes, shapes, offsets). "" when there are no files. A derived cache keyed by it
        (engine/runtime/cpu/int8_store.py) misses once a file is replaced or rewritten."""
        parts = []
        for path in self._paths:
            stat = path.stat()
            with path.open("rb") as handle:
                head = handle.read(8)
                length = struct.unpack("<Q", head)[0] if len(head) == 8 else 0
                header = handle.read(min(length, MAX_HEADER_BYTES))
            parts.append(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:{hashlib.sha256(header).hexdigest()}")
        return "\n".join(parts)

    def __len__(self) -> int:
        return len(self._entries)

    def fresh(self, name: str, mapped: torch.Tensor) -> torch.Tensor:
        """A copy of `mapped` (the parameter called `name`) in memory of its own: read from the
        file when the entry matches (module docstring), else `mapped.clone()`."""
        read = self._read(name, mapped)
        return read if read is not None else mapped.detach().clone()

    @contextmanager
    def borrowed(self, name: str, mapped: torch.Tensor) -> Iterator[torch.Tensor]:
        """`mapped` (the parameter called `name`) for a conversion that reads it once and keeps
        only its result: a view of this object's own mapping of the file when the entry matches
        (module docstring), whose pages leave the process when the block ends; else a fresh copy.
        The view must not be kept past the block (its pages would be read from the file again)."""
        entry = self._matching_entry(name, mapped)
        mapping = self._mapping(entry.path) if entry is not None and PAGES_CAN_BE_DROPPED else None
        view = None if mapping is None else _view(mapping, entry)
        if view is None or not _same_ends(view, mapped):
            yield self.fresh(name, mapped)
            return
        try:
            yield view
        finally:
            del view
            _drop_pages(mapping, entry)

    def _mapping(self, path: Path) -> mmap.mmap | None:
        """This object's copy-on-write mapping of one file (never written: copy-on-write only
        because torch makes tensors of writable buffers), opened once; None when it cannot be."""
        with self._mapping_lock:
            if path not in self._mappings:
                try:
                    with path.open("rb") as handle:
                        self._mappings[path] = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
                except (OSError, ValueError):
                    return None
            return self._mappings[path]

    def _matching_entry(self, name: str, mapped: torch.Tensor) -> _Entry | None:
        """The file entry called `name` when its dtype and shape are the parameter's (the rows are
        compared once read)."""
        entry = self._entries.get(name)
        if (entry is None or mapped.device.type != "cpu" or entry.dtype != mapped.dtype
                or entry.shape != tuple(mapped.shape) or mapped.numel() == 0):
            return None
        return entry

    def _read(self, name: str, mapped: torch.Tensor) -> torch.Tensor | None:
        entry = self._matching_entry(name, mapped)
        tensor = None if entry is None else _read_entry(entry)
        return tensor if tensor is not None and _same_ends(tensor, mapped) else None


def _view(mapping: mmap.mmap, entry: _Entry) -> torch.Tensor | None:
    """The entry's tensor as a view of the mapping (no copy); None when the file is shorter than its header says."""
    if entry.end > len(mapping):
        return None
    count = (entry.end - entry.start) // entry.dtype.itemsize
    return torch.frombuffer(mapping, dtype=entry.dtype, count=count, offset=entry.start).reshape(entry.shape)


def _drop_pages(mapping: mmap.mmap, entry: _Entry) -> None:
    """Take the entry's pages out of the process (a later read would fault them in from the page
    cache again: the mapping is never written, so nothing is lost)."""
    first_page = entry.start - entry.start % mmap.PAGESIZE
    mapping.madvise(mmap.MADV_DONTNEED, first_page, entry.end - first_page)


def _same_ends(tensor: torch.Tensor, mapped: torch.Tensor) -> bool:
    """True when the first and last rows agree: the entry holds the parameter, not a renamed neighbour."""
    return tensor.dim() == 0 or (torch.equal(tensor[0], mapped[0]) and torch.equal(tensor[-1], mapped[-1]))


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file, each read into memory of its own (aligned as torch
    aligns its allocations, which its CPU kernels may rely on: a view into a mapped file is only
    as aligned as the file's layout); empty when the header cannot be read or a read comes up short."""
    tensors = {}
    for name, entry in _read_header(Path(path)).items():
        tensor = _read_entry(entry)
        if tensor is None:
            return {}
        tensors[name] = tensor
    return tensors


def _read_entry(entry: _Entry) -> torch.Tensor | None:
    """One tensor read from its file into a fresh buffer (not zeroed first: the read fills it)."""
    buffer = torch.empty(entry.end - entry.start, dtype=torch.uint8)
    try:
        with entry.path.open("rb") as handle:
            handle.seek(entry.start)
            if handle.readinto(buffer.numpy()) != buffer.numel():
                return None
    except OSError:
        return None
    return buffer.view(entry.dtype).reshape(entry.shape)


def read_metadata(path: Path) -> dict[str, str]:
    """The `__metadata__` strings of one safetensors file's header; empty when it has none or the
    header cannot be read."""
    header = _header(Path(path))
    metadata = header[0].get("__metadata__") if header else None
    return metadata if isinstance(metadata, dict) else {}


def _header(path: Path) -> tuple[dict, int] | None:
    """The parsed JSON header of one safetensors file and the byte offset where its data begins;
    None when it cannot be read (or is not a JSON object)."""
    try:
        with path.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > MAX_HEADER_BYTES:
                return None
            header = json.loads(handle.read(length))
    except (OSError, struct.error, ValueError):
        return None
    return (header, 8 + length) if isinstance(header, dict) else None


def _read_header(path: Path) -> dict[str, _Entry]:
    """The tensor entries of one safetensors file; none when its header cannot be read."""
    parsed = _header(path)
    if parsed is None:
        return {}
    header, data_start = parsed
    entries = {}
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict) or info.get("dtype") not in SAFETENSORS_DTYPES:
            continue
        begin, end = info["data_offsets"]
        entries[name] = _Entry(path, SAFETENSORS_DTYPES[info["dtype"]], tuple(info["shape"]),
                               data_start + begin, data_start + end)
    return entries
