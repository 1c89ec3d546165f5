"""Named draft/target pairs a user can pick without knowing model ids.

Pure data, no torch: the UI reads this list before any model loads. `draft` and
`target` are model references that `load_pair` understands: "embedded:<name>"
(weights shipped in pip packages, engine/weights.py), a Hugging Face Hub id, or
"tiny-random/..." (built in code); a `draft` of None means no draft model, so
the n-gram prompt-lookup drafter is used.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.pair import ModelLoadError

SOURCES = ("embedded", "hub", "builtin")  # where a preset's weights come from
TINY_RANDOM = "tiny-random"


@dataclass(frozen=True)
class Preset:
    """A named pair of models."""

    name: str
    description: str            # one line for people
    draft: str | None           # model reference, or None: n-gram drafter only
    target: str                 # model reference
    default_drafter: str        # "model" | "ngram"
    source: str                 # "embedded" (pip packages, offline) | "hub" (needs the Hub) | "builtin" (code)

    @property
    def needs_network(self) -> bool:
        """True when loading fetches from the Hugging Face Hub (unless already in its cache)."""
        return self.source == "hub"


PRESETS: dict[str, Preset] = {preset.name: preset for preset in (
    Preset("qwen-coder", "Qwen2.5-Coder-0.5B-Instruct drafting for Qwen2.5-Coder-1.5B-Instruct (embedded GGUF)",
           "embedded:qwen2.5-coder-0.5b-instruct", "embedded:qwen2.5-coder-1.5b-instruct", "model", "embedded"),
    Preset("smollm2-ngram", "n-gram prompt lookup drafting for SmolLM2-135M-Instruct (embedded GGUF, no draft model)",
           None, "embedded:smollm2-135m-instruct", "ngram", "embedded"),
    Preset(TINY_RANDOM, "Seeded random tiny Llama pair built in code: instant, for tests and demos",
           "tiny-random/draft", "tiny-random/target", "model", "builtin"),
    Preset("gpt2", "distilgpt2 drafting for gpt2 (Hugging Face Hub)",
           "distilgpt2", "gpt2", "model", "hub"),
    Preset("smollm2", "SmolLM2-135M-Instruct drafting for SmolLM2-1.7B-Instruct (Hugging Face Hub)",
           "HuggingFaceTB/SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-1.7B-Instruct", "model", "hub"),
    Preset("qwen2.5", "Qwen2.5-0.5B-Instruct drafting for Qwen2.5-1.5B-Instruct (Hugging Face Hub)",
           "Qwen/Qwen2.5-0.5B-Instruct", "Qwen/Qwen2.5-1.5B-Instruct", "model", "hub"),
)}

DEFAULT_PRESET = "qwen-coder"


def get_preset(name: str) -> Preset:
    """The preset called `name`, or ModelLoadError listing the known ones."""
    if name not in PRESETS:
        raise ModelLoadError(f"unknown preset {name!r}; choose one of: {', '.join(PRESETS)}")
    return PRESETS[name]
