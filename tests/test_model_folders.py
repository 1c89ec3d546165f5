"""A preset's models as folders another engine loads (engine/loading/model_folders.py, the folders
scripts/vllm.sh starts a vLLM server on). Oracles: the preset table itself, and the converted
folder's own files (a Hugging Face model directory: config.json beside the weights)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from engine.loading.model_folders import model_folder, preset_folders
from engine.presets import get_preset

ROOT = Path(__file__).resolve().parent.parent


def test_hub_ids_and_missing_drafts_pass_through():
    assert preset_folders("gpt2") == ("gpt2", "distilgpt2")
    assert model_folder(None) == "" and model_folder(get_preset("smollm2-ngram").draft) == ""


def test_an_embedded_preset_becomes_a_model_directory():
    """The n-gram preset's embedded SmolLM2 (the smallest embedded GGUF) converts into a folder with a
    config and weights; asking again returns the same folder without converting."""
    messages: list[str] = []
    target, draft = preset_folders("smollm2-ngram", messages.append)
    folder = Path(target)
    assert draft == "" and folder.is_dir() and (folder / "config.json").is_file()
    assert any(path.suffix == ".safetensors" for path in folder.iterdir())
    assert preset_folders("smollm2-ngram", messages.append)[0] == target


def test_the_script_prints_both_folders_or_says_what_is_wrong():
    script = [sys.executable, str(ROOT / "scripts" / "vllm_folders.py")]
    printed = subprocess.run(script + ["gpt2"], capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0 and printed.stdout.splitlines() == ["gpt2", "distilgpt2"]
    refused = subprocess.run(script + ["no-such-preset"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and refused.stdout == ""
    assert "unknown preset 'no-such-preset'; choose one of: qwen-coder" in refused.stderr
