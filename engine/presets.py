"""Model references: the named draft/target pairs a user can pick without knowing model ids,
the rule that tells a local path from the other references, and the error a reference that
cannot be loaded raises.

Pure data, no torch: the UI reads this before any model loads. `draft` and `target` are
model references that `load_pair` understands: "embedded:<name>" (weights shipped in pip
packages, engine/loading/weights.py), a Hugging Face Hub id, "tiny-random/..." (built in
code), or a local path (a model directory or a .gguf file); a `draft` of None means no
draft model, so the n-gram prompt-lookup drafter is used ("ngram" as a draft reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER

TINY_RANDOM = "tiny-random"


class ModelLoadError(ValueError):
    """A model could not be loaded; the message is one readable sentence for the user."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message, for one-sentence errors (ModelLoadError's and others)."""
    text = str(error).strip().splitlines()
    return text[0].rstrip(".") if text else type(error).__name__


def looks_like_path(reference: str) -> bool:
    """True when `reference` names a file or folder rather than a Hub id or an embedded model:
    spelled like a path (starts with /, . or ~, holds a backslash or "..", has a drive letter,
    ends in .gguf) or naming something that exists on this machine's disk ("models/qwen" does
    once such a folder exists, though it is spelled like a Hub id)."""
    return (reference.startswith(("/", ".", "~")) or "\\" in reference or ".." in reference
            or reference.lower().endswith(".gguf") or (len(reference) > 1 and reference[1] == ":")
            or Path(reference).expanduser().exists())


@dataclass(frozen=True)
class Preset:
    """A named pair of models."""

    name: str
    description: str            # one line for people
    draft: str | None           # model reference, or None: n-gram drafter only
    target: str                 # model reference

    @property
    def default_drafter(self) -> str:
        """The drafter a run of this pair starts with: the draft model when there is one."""
        return NGRAM_DRAFTER if self.draft is None else MODEL_DRAFTER


PRESETS: dict[str, Preset] = {preset.name: preset for preset in (
    Preset("qwen-coder", "Qwen2.5-Coder-0.5B-Instruct drafting for Qwen2.5-Coder-1.5B-Instruct (embedded GGUF)",
           "embedded:qwen2.5-coder-0.5b-instruct", "embedded:qwen2.5-coder-1.5b-instruct"),
    Preset("smollm2-ngram", "n-gram prompt lookup drafting for SmolLM2-135M-Instruct (embedded GGUF, no draft model)",
           None, "embedded:smollm2-135m-instruct"),
    Preset(TINY_RANDOM, "Seeded random tiny Llama pair built in code: instant, for tests and demos",
           "tiny-random/draft", "tiny-random/target"),
    Preset("gpt2", "distilgpt2 drafting for gpt2 (Hugging Face Hub)",
           "distilgpt2", "gpt2"),
    Preset("smollm2", "SmolLM2-135M-Instruct drafting for SmolLM2-1.7B-Instruct (Hugging Face Hub)",
           "HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
    Preset("qwen2.5", "Qwen2.5-0.5B-Instruct drafting for Qwen2.5-1.5B-Instruct (Hugging Face Hub)",
           "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct"),
)}

DEFAULT_PRESET = "qwen-coder"


def get_preset(name: str) -> Preset:
    """The preset called `name`, or ModelLoadError listing the known ones."""
    if name not in PRESETS:
        raise ModelLoadError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return PRESETS[name]
