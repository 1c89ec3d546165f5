"""Random weights at the presets' real shapes, for measuring costs where the weights are absent.

A GPU machine without the default pair's weights (they do not fit a 64 MiB transfer) still
measures what matters for speed: a forward's cost depends on the shapes, not the values. The
shapes come from a folder holding each model's config.json (the converted cache folders of the
default pair hold them, beside the tokenizer), or from the table below; the tokenizer, when
the folder has one, is the real one, so prompts encode to real lengths. Acceptance cannot be
measured on random weights (two random models agree on nothing): scripts/gpu_check.py takes
it from real-weight runs on a CPU and reports the speedups that follow as predicted.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerBase, Qwen2Config

from engine.config import MODEL_DRAFTER
from engine.decode.pair import ModelPair
from engine.loading.tiny import build_tiny_tokenizer

# Qwen2.5 shapes (their published configs): the default pair and a larger target for comparison.
QWEN_SHAPES = {
    "qwen2.5-0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936),
    "qwen2.5-1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, vocab_size=151936),
    "qwen2.5-7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, vocab_size=152064),
}
SMALL_SHAPES = {        # --small: the same code on a CPU in seconds
    "small-draft": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, vocab_size=101),          # the tiny tokenizer's 101 ids
    "small-target": dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=101),
}
SHAPE_PAIRS = {"default": ("qwen2.5-0.5b", "qwen2.5-1.5b"), "7b-target": ("qwen2.5-0.5b", "qwen2.5-7b"),
               "small": ("small-draft", "small-target")}


SPECIAL_IDS = ("bos_token_id", "eos_token_id", "pad_token_id")


def shape_config(name: str, folder: Path | None = None, special_ids_from: Path | None = None) -> Qwen2Config:
    """The config of a shape: `folder/config.json` where given and present, else the table's (its
    special token ids from `special_ids_from/config.json` where present: the real tokenizer's)."""
    if folder is not None and (folder / "config.json").is_file():
        return Qwen2Config(**_read(folder))
    shape = {**QWEN_SHAPES, **SMALL_SHAPES}[name]
    special = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)         # the tiny tokenizer's
    if special_ids_from is not None and (special_ids_from / "config.json").is_file():
        special = {key: _read(special_ids_from)[key] for key in SPECIAL_IDS}
    return Qwen2Config(**shape, **special, max_position_embeddings=32768, rope_theta=1_000_000.0,
                       tie_word_embeddings=False, use_sliding_window=False)


def _read(folder: Path) -> dict:
    return {key: value for key, value in json.loads((folder / "config.json").read_text()).items()
            if not key.startswith("_")}


def random_model(config: Qwen2Config, device: torch.device, dtype: torch.dtype, seed: int) -> torch.nn.Module:
    """A model of the config's shape with seeded random weights, built on `device` in `dtype`."""
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.device(device):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    model.eval()
    model.requires_grad_(False)
    return model


def shape_tokenizer(folder: Path | None) -> PreTrainedTokenizerBase:
    """The real tokenizer where the folder has one, else the tiny character-level one."""
    if folder is not None and (folder / "tokenizer.json").is_file():
        return AutoTokenizer.from_pretrained(folder)
    return build_tiny_tokenizer()


def random_pair(which: str, device: torch.device, dtype: torch.dtype, folder: Path | None = None,
                draft_dtype: torch.dtype | None = None) -> ModelPair:
    """A ModelPair of random models at the shapes SHAPE_PAIRS[which]; `folder` may hold draft/ and
    target/ subfolders with config.json (the target's also its tokenizer)."""
    draft_name, target_name = SHAPE_PAIRS[which]
    target_folder = folder / "target" if folder is not None and which == "default" else None
    draft_folder = folder / "draft" if folder is not None else None
    draft_dtype = draft_dtype or dtype
    target = random_model(shape_config(target_name, target_folder, folder / "target" if folder else None), device,
                          dtype, seed=1)
    draft = random_model(shape_config(draft_name, draft_folder), device, draft_dtype, seed=2)
    tokenizer = shape_tokenizer(folder / "target" if folder is not None else None)
    return ModelPair(target=target, draft=draft, tokenizer=tokenizer, target_name=f"random:{target_name}",
                     draft_name=f"random:{draft_name}", device=device, target_dtype=str(dtype).removeprefix("torch."),
                     draft_dtype=str(draft_dtype).removeprefix("torch."), preset=None, default_drafter=MODEL_DRAFTER)
