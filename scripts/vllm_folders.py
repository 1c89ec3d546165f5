"""Print the converted model folders of a preset, for a vLLM server (scripts/vllm.sh):
`python scripts/vllm_folders.py [PRESET]` -> the target's folder, then the draft's (empty for an
n-gram preset). Embedded GGUF presets are converted on first use (engine/loading/gguf_cache.py);
a Hub preset prints its Hub ids (vLLM then needs the network or a filled Hugging Face cache)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.loading.gguf_cache import cache_root, converted_embedded  # noqa: E402
from engine.loading.weights import EMBEDDED_PREFIX, embedded_spec  # noqa: E402
from engine.presets import DEFAULT_PRESET, ModelLoadError, get_preset  # noqa: E402


def folder(reference: str | None) -> str:
    if reference is None:
        return ""
    if reference.startswith(EMBEDDED_PREFIX):
        report = lambda message: print(message, file=sys.stderr)  # noqa: E731
        return str(converted_embedded(embedded_spec(reference), cache_root(), report))
    return reference


def main(argv: list[str]) -> int:
    try:
        preset = get_preset(argv[0] if argv else DEFAULT_PRESET)
        print(folder(preset.target))
        print(folder(preset.draft))
    except ModelLoadError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
