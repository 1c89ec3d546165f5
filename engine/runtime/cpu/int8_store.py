"""Saved int8 quantizations of a draft model, so that a warm start loads them instead of quantizing.

Quantizing the 0.5B draft (engine/runtime/cpu/kernel_modules.py, `Int8Linear.from_weight`) costs
seconds of CPU on every start (`git show e9811c1:docs/benchmark.md`, "Startup": no saved run); its result depends only on the
source weights, the quantization code and torch. `Int8Store` keeps it in one safetensors file,

    $SPECVIZ_CACHE (default ~/.cache/specviz) / int8-v1 / <sha256 of the source folder's path>[:16].safetensors

holding `<module>.weight_int8` (int8) and `<module>.scales` (bfloat16) for every quantized
layer, and in its metadata the key it was made for: the quantization format (`INT8_FORMAT`),
the torch version, the source folder, the source files' fingerprint (`CheckpointFiles.fingerprint`: size,
modification time and header hash of each file) and a CRC-32 of every saved tensor's bytes.
`load` returns None, and the caller quantizes afresh and saves again, whenever anything
disagrees: another key (stale), a file whose header cannot be parsed or a checksum that fails
(corrupt), a layer missing or of another shape. A save writes a temporary file and renames
it into place, so a reader never sees half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import zlib
from pathlib import Path

import torch
from safetensors.torch import save_file

from engine.runtime.cpu.checkpoint_files import CheckpointFiles, read_metadata, read_tensors
from engine.runtime.cpu.kernel_modules import INT8_FORMAT

STORE_FOLDER = "int8-v1"
KEY_FIELD, CHECKSUM_FIELD = "specviz-int8-key", "specviz-crc32"
Quantized = dict[str, tuple[torch.Tensor, torch.Tensor]]      # module name -> (int8 weight, scales)


class Int8Store:
    """Saved quantizations of the model in one folder of safetensors files (module docstring)."""

    def __init__(self, root: Path, files: CheckpointFiles):
        folder = str(files.folder) if files.folder is not None else ""
        self.path: Path | None = None
        if folder:
            folder_hash = hashlib.sha256(folder.encode()).hexdigest()[:16]
            self.path = Path(root) / STORE_FOLDER / f"{folder_hash}.safetensors"
        self.key = json.dumps({"format": INT8_FORMAT, "torch": torch.__version__, "folder": folder,
                               "files": files.fingerprint()})

    def load(self, shapes: dict[str, tuple[int, int]]) -> Quantized | None:
        """The saved layers, when the file matches this key, passes its checksum and holds
        exactly `shapes` (module name -> (out, in)); else None."""
        if self.path is None or not self.path.is_file():
            return None
        metadata = read_metadata(self.path)               # the key first: a stale file's tensors are never read
        if metadata.get(KEY_FIELD) != self.key:
            return None
        # Each tensor in memory of its own, aligned: views into the mapped file (safetensors' load_file)
        # lie only 8-byte aligned, and the int8 kernel crashed on such a head (tests/test_int8_store.py).
        tensors = read_tensors(self.path)                  # empty when a read comes up short
        if not tensors or metadata.get(CHECKSUM_FIELD) != _checksum(tensors):
            return None
        layers: Quantized = {}
        for name, (rows, columns) in shapes.items():
            weight, scales = tensors.get(f"{name}.weight_int8"), tensors.get(f"{name}.scales")
            if (weight is None or scales is None or weight.dtype != torch.int8 or scales.dtype != torch.bfloat16
                    or tuple(weight.shape) != (rows, columns) or tuple(scales.shape) != (rows,)):
                return None
            layers[name] = (weight, scales)
        return layers if len(tensors) == 2 * len(shapes) else None

    def save(self, layers: Quantized) -> bool:
        """Write the layers under this key (atomically); False when there is no place or it fails."""
        if self.path is None:
            return False
        tensors = {}
        for name, (weight, scales) in layers.items():
            tensors[f"{name}.weight_int8"], tensors[f"{name}.scales"] = weight.contiguous(), scales.contiguous()
        temporary = self.path.with_name(f"{self.path.name}.tmp-{uuid.uuid4().hex}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            save_file(tensors, temporary, metadata={KEY_FIELD: self.key, CHECKSUM_FIELD: _checksum(tensors)})
            os.replace(temporary, self.path)
        except OSError:
            temporary.unlink(missing_ok=True)
            return False
        self._prune()
        return True

    def _prune(self) -> None:
        """Remove the saved files of source folders that no longer exist (a deleted model, a test's
        temporary folder) and those whose key names no folder (written by an older SpecViz: no
        key matches them again), so the store holds one file per model folder still on disk."""
        for other in self.path.parent.glob("*.safetensors"):
            try:
                key = json.loads(read_metadata(other)[KEY_FIELD])
                folder = key.get("folder")         # absent from keys written before they named their folder
            except (ValueError, KeyError, TypeError, AttributeError):
                continue                                   # not ours to judge: left as it is
            gone = not isinstance(folder, str) or (folder and not Path(folder).exists())
            if other != self.path and gone:
                other.unlink(missing_ok=True)


def _checksum(tensors: dict[str, torch.Tensor]) -> str:
    """CRC-32 over every tensor's name and bytes, in name order."""
    crc = 0
    for name in sorted(tensors):
        crc = zlib.crc32(name.encode(), crc)
        crc = zlib.crc32(tensors[name].contiguous().view(torch.uint8).reshape(-1).numpy(), crc)
    return f"{crc:08x}"
