"""engine/vllm/server.py's command lines (no server started): what each method asks vLLM for. The
real start, readiness and stop are exercised by the `tiny_vllm` session fixture (tests/vllm_session.py)."""

from __future__ import annotations

import json

import pytest

from engine.vllm.server import ServerSpec, vllm_python
from engine.vllm.transport import VllmError


def option(command: list[str], name: str) -> str:
    return command[command.index(name) + 1]


def test_a_draft_model_server_asks_for_detailed_per_step_metrics() -> None:
    command = ServerSpec("T", "D", k=5, dtype="bfloat16", draft_sample_method="probabilistic").command("py", 8123)
    assert command[:3] == ["py", "-m", "vllm.entrypoints.openai.api_server"]
    assert option(command, "--per-request-spec-decode-metrics") == "detailed"
    assert json.loads(option(command, "--speculative-config")) == {
        "method": "draft_model", "model": "D", "num_speculative_tokens": 5, "draft_sample_method": "probabilistic"}
    assert (option(command, "--model"), option(command, "--dtype"), option(command, "--port")) == ("T", "bfloat16", "8123")


def test_ngram_and_target_only_servers() -> None:
    ngram = ServerSpec("T", method="ngram", k=4, ngram_lookup=(1, 3)).command("py", 1)
    assert json.loads(option(ngram, "--speculative-config")) == {
        "method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}
    plain = ServerSpec("T", method="none").command("py", 1)
    assert "--speculative-config" not in plain and "--per-request-spec-decode-metrics" not in plain
    with pytest.raises(VllmError, match="needs a draft model"):
        ServerSpec("T").command("py", 1)


def test_the_environment_and_the_python(tmp_path, monkeypatch) -> None:
    environment = ServerSpec("T", threads=2, kv_cache_gib=1).environment()
    assert (environment["OMP_NUM_THREADS"], environment["VLLM_CPU_KVCACHE_SPACE"], environment["HF_HUB_OFFLINE"]) == \
        ("2", "1", "1")
    python = tmp_path / "python"
    python.write_text("")
    monkeypatch.setenv("SPECVIZ_VLLM_PYTHON", str(python))
    assert vllm_python() == python
    monkeypatch.setenv("SPECVIZ_VLLM_PYTHON", str(tmp_path / "missing"))
    assert vllm_python() is None
