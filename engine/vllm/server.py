"""A real vLLM OpenAI server in its own process group (as benchmarks/app_server.py runs the app):
a free loopback port, a log file, wait until it answers, its start-up seconds, stop."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from engine.vllm.transport import ServerAddress


@dataclass(frozen=True)
class ServerSpec:
    target: str
    draft: str | None = None
    method: str = "draft_model"
    k: int = 3
    dtype: str = "float32"
    max_model_len: int = 512
    served_name: str = "target"
    threads: int = 2
    kv_cache_gib: int = 1
    ngram_lookup: tuple[int, int] | None = None
    extra_args: tuple[str, ...] = ()

    def command(self, python: str, port: int) -> list[str]: ...


@dataclass
class RunningServer:
    process: subprocess.Popen
    address: ServerAddress
    log: Path
    startup_s: float

    def stop(self) -> None: ...


def vllm_python() -> Path | None: ...


def start_server(spec: ServerSpec, log: Path, python: str | None = None, timeout_s: float = 600.0) -> RunningServer: ...
