"""app.py's EngineRunner keeps the last MAX_LOADED_PAIRS pairs loaded. A load that fails (a
mistyped path, an unknown preset or Hub id, tokenizers that differ) leaves every loaded pair in
place; a load that succeeds in a full cache drops the least recently used pair once its checks
have passed and before its weights load, so memory never holds one pair more than the cache."""

from __future__ import annotations

import gc
import weakref
from itertools import product
from pathlib import Path

import pytest

from app import MAX_LOADED_PAIRS, EngineRunner
from engine.config import SpecConfig
from engine.loading import models
from engine.loading.tiny import build_tiny_pair
from specviz.serving.runner import ModelChoice, RunnerError, RunRequest

TINY_CHOICES = [ModelChoice(preset="tiny-random", draft_dtype=draft, target_dtype=target)
                for target, draft in product(("float32", "bfloat16"), ("float32", "bfloat16", "float16"))]


def pair_of(runner: EngineRunner, models: ModelChoice):
    """The pair a run of `models` gets (loading it on a cache miss)."""
    drafter = "ngram" if models.target and not models.draft else "model"
    request = RunRequest(models, "def f():", SpecConfig(max_new_tokens=4, drafter=drafter))
    return runner.start(request, lambda fraction, message: None).pair


def save_tiny(directory: Path, vocab: str) -> str:
    pair = build_tiny_pair(seed=0, vocab=vocab)
    pair.target.save_pretrained(directory)
    pair.tokenizer.save_pretrained(directory)
    return str(directory)


def test_a_load_that_fails_leaves_every_loaded_pair_in_place(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    runner = EngineRunner(device="cpu")
    loaded = {choice: pair_of(runner, choice) for choice in TINY_CHOICES[:MAX_LOADED_PAIRS]}    # a full cache
    failing = [ModelChoice(target=str(tmp_path / "mistyped-model")),
               ModelChoice(preset="tiny-randm"),
               ModelChoice(target="specviz-tests/not-a-cached-model"),
               ModelChoice(draft=save_tiny(tmp_path / "ab", "ab"), target=save_tiny(tmp_path / "ba", "ba"))]
    for choice in failing:
        with pytest.raises(RunnerError):
            pair_of(runner, choice)
    assert all(pair_of(runner, choice) is pair for choice, pair in loaded.items())     # none reloaded


def test_a_full_cache_drops_its_least_recently_used_pair_before_the_new_weights_load(tmp_path, monkeypatch):
    runner = EngineRunner(device="cpu")
    kept, dropped, *others = TINY_CHOICES[:MAX_LOADED_PAIRS]
    dropped_pair = weakref.ref(pair_of(runner, dropped))
    kept_pair = pair_of(runner, kept)
    for choice in others:
        pair_of(runner, choice)
    assert pair_of(runner, kept) is kept_pair                  # used last: `dropped` is now the least recent
    alive_when_weights_load = []
    real_load_model = models._load_model

    def load_model(*args, **kwargs):
        gc.collect()
        alive_when_weights_load.append(dropped_pair() is not None)
        return real_load_model(*args, **kwargs)

    monkeypatch.setattr(models, "_load_model", load_model)
    new = ModelChoice(target=save_tiny(tmp_path / "local", "abc"))
    alive_before = dropped_pair() is not None                  # (outside an assert, which would hold the pair)
    assert pair_of(runner, new).target_name == new.target
    assert alive_before and alive_when_weights_load == [False]   # freed before the new weights, not after
    assert pair_of(runner, kept) is kept_pair


def test_a_request_that_names_the_dtypes_auto_picks_shares_the_pair_loaded_for_auto():
    """The start-up load asks for "auto" dtypes; the page names them (a CPU's target: float32). Both are
    the same weights: the second request must find the first pair, not load a second copy (on the
    default pair that was 6.6 GB more after the first Run)."""
    runner = EngineRunner(device="cpu")
    loaded_for_auto = pair_of(runner, ModelChoice(preset="tiny-random"))
    spelled_out = ModelChoice(preset="tiny-random", target_dtype="float32",
                              draft_dtype=models.resolve_draft_dtype("auto", models.resolve_device("cpu")))
    assert pair_of(runner, spelled_out) is loaded_for_auto
    assert pair_of(runner, ModelChoice(preset="tiny-random", target_dtype="bfloat16")) is not loaded_for_auto
