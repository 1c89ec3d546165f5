"""The real vLLM server the `vllm` tests share: the tiny random pair (engine/loading/tiny.py) saved to
disk with its tokenizer, served once per test session (float32, draft_model k=3, detailed
per-request metrics) by engine/vllm/server.py; stopped (its whole process group) at the end.
`start_tiny_server` serves the same pair another way (an n-gram server, summary metrics, the CPU sampler fix, none),
`tiny_server` for one module.

The pair is wider than tiny-random's default (vLLM's CPU attention wants a head size of 32 or more).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

TINY_SHAPE = {"hidden_size": 256, "num_layers": 2, "num_heads": 4}   # head size 64
K = 3
# A chat template on the saved tokenizer (tiny-random's has none), so a run that is not raw goes through the
# server's template: tests/test_vllm_server.py checks the ids against transformers' apply_chat_template.
CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")
STARTUP_TIMEOUT_S = 900.0       # a start takes about 20 s alone (far longer on a busy machine)
# The test servers run vLLM's model eagerly (compilation mode 0, no torch.compile): what the tests check is what
# the server streams, which compiling does not change, and a start takes 21 s instead of 36 (the tiny pair) and
# 55 s instead of 159-216 (the default pair; its memory stays 15.6 GiB). bench.py's servers compile: speed is theirs.
EAGER = ("--compilation-config", '{"mode": 0}')


@dataclass
class TinyVllm:
    server: object              # engine.vllm.server.RunningServer
    folder: Path                # target/ and draft/ inside
    url: str


def tiny_pair():
    from engine.loading.tiny import build_tiny_pair
    return build_tiny_pair(**TINY_SHAPE)


def save_tiny_pair(folder: Path) -> None:
    pair = tiny_pair()
    pair.tokenizer.chat_template = CHAT_TEMPLATE
    for name, model in (("target", pair.target), ("draft", pair.draft)):
        model.save_pretrained(folder / name)
        pair.tokenizer.save_pretrained(folder / name)


def require_vllm() -> None:
    """Skip the test where there is no vLLM environment (under CI=true a skip fails the run: tests/conftest.py)."""
    import pytest
    from engine.vllm.server import vllm_python
    if vllm_python() is None:
        pytest.skip("no vLLM environment (.venv-vllm): scripts/test.sh installs it")


@contextmanager
def tiny_server(folder: Path, method: str, **options) -> Iterator[TinyVllm]:
    """A tiny server for one module or test (`start_tiny_server`'s arguments), stopped when it ends."""
    require_vllm()
    started = start_tiny_server(folder, method, **options)
    try:
        yield started
    finally:
        started.server.stop()


def start_tiny_vllm(folder: Path) -> TinyVllm:
    return start_tiny_server(folder, "draft_model")


def start_tiny_server(folder: Path, method: str, spec_metrics: str = "detailed",
                      fix_cpu_sampler: bool = False, max_model_len: int = 512) -> TinyVllm:
    """The tiny pair served by `method` (draft_model k=3, ngram k=3 on vLLM's default (5, 5) lookup, or none),
    its per-request metrics at `spec_metrics`, with SpecViz's CPU sampler fix when asked."""
    from engine.vllm.server import ServerSpec, start_server
    save_tiny_pair(folder)
    spec = ServerSpec(target=str(folder / "target"), draft=str(folder / "draft") if method == "draft_model" else None,
                      method=method, k=K, dtype="float32", max_model_len=max_model_len, spec_metrics=spec_metrics,
                      fix_cpu_sampler=fix_cpu_sampler, extra_args=EAGER)
    server = start_server(spec, folder / "server.log", timeout_s=STARTUP_TIMEOUT_S)
    return TinyVllm(server, folder, str(server.address))


DEFAULT_PAIR_STARTUP_TIMEOUT_S = 1800.0     # about a minute alone, eager; far longer when busy


@contextmanager
def default_pair_server(folder: Path, method: str, k: int, need_bytes: int,
                        stop_shared: Callable[[], list[str]]) -> Iterator[str]:
    """The default pair (qwen-coder) served in float32 by `method` (draft_model, or ngram on vLLM's default
    lookup, the target alone), eager, max_model_len 1024, once there is room for it (tests/memory_room.py);
    yields its URL. A server that died meanwhile (the kernel's OOM killer, a crash) fails with its log's end.
    Its engine computes on every core: these servers run alone, in the suite's pass of
    their own, where vLLM's own binding would leave one of two cores idle for its API process."""
    import pytest

    from benchmarks.vllm_peer import PeerServerSpec, bound_cores
    from engine.loading.model_folders import preset_folders
    from engine.vllm.server import start_server
    from memory_room import make_room
    require_vllm()
    make_room(need_bytes, stop_shared, f"The default pair's float32 vLLM server ({method})")
    target, draft = preset_folders("qwen-coder")
    cores = os.cpu_count() or 1
    spec = PeerServerSpec(target=target, draft=draft if method == "draft_model" else None, method=method, k=k,
                          dtype="float32", max_model_len=1024, kv_cache_gib=1, extra_args=EAGER, threads=cores,
                          bind_cores=bound_cores(cores, "all"))
    server = start_server(spec, folder / "server.log", timeout_s=DEFAULT_PAIR_STARTUP_TIMEOUT_S)
    try:
        yield str(server.address)
    finally:
        died = server.process.poll() is not None or "died unexpectedly" in server.log.read_text(errors="replace")
        server.stop()
    if died:
        tail = "\n".join(server.log.read_text(errors="replace").splitlines()[-15:])
        pytest.fail(f"The default pair's vLLM server ({method}) died during the module (log: {server.log}):\n{tail}")


def streamed(url: str, prompt: str, config: object, method: str = "draft_model"):
    """A run of `prompt` with `config` (an engine.config.SpecConfig) on the server at `url`, streamed to its end
    through engine/vllm/source.py; the generation (its `trace()` is the split trace)."""
    from engine.vllm.source import start_generation
    generation = start_generation(url, prompt, config, method=method)
    while not generation.is_done:
        generation.step()
    return generation
