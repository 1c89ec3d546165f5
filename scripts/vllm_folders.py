"""Print the converted model folders of a preset, for a vLLM server (scripts/vllm.sh):
`python scripts/vllm_folders.py [PRESET]` -> the target's folder, then the draft's (empty for an
n-gram preset). Embedded GGUF presets are converted on first use (engine/loading/model_folders.py)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.loading.model_folders import preset_folders  # noqa: E402
from engine.presets import DEFAULT_PRESET, ModelLoadError  # noqa: E402


def main(argv: list[str]) -> int:
    try:
        target, draft = preset_folders(argv[0] if argv else DEFAULT_PRESET)
    except ModelLoadError as error:
        print(error, file=sys.stderr)
        return 1
    print(target)
    print(draft)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
