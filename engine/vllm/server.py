"""A real vLLM OpenAI server in its own process group (as benchmarks/app_server.py runs the app):
a free loopback port, a log file, wait until it answers, its start-up seconds, stop; with
`fix_cpu_sampler`, SpecViz's fix of vLLM 0.32's CPU sampler (plugins/vllm_cpu_sampler_fix) installed and on.

The server runs from its own environment (`.venv-vllm`, scripts/vllm.sh makes it): vLLM pins
another transformers than SpecViz. `python -m vllm.entrypoints.openai.api_server`, since the CPU
wheel's `vllm serve` cannot find its own package metadata (docs/usage.md, "vLLM").
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from engine.vllm.transport import ServerAddress, VllmError

ROOT = Path(__file__).resolve().parent.parent.parent
PYTHON_ENV = "SPECVIZ_VLLM_PYTHON"      # the python of a vLLM environment, if not ROOT/.venv-vllm
FIX_ENV = "SPECVIZ_VLLM_CPU_SAMPLER_FIX"   # "1": the installed plugin patches vLLM's CPU sampler (else it does nothing)
FIX_PLUGIN = ROOT / "plugins" / "vllm_cpu_sampler_fix"
START_TIMED_OUT = "The vLLM server did not answer within"    # how a start that ran out of time is refused


@dataclass(frozen=True)
class ServerSpec:
    target: str                         # a model folder (or hub id, when online)
    draft: str | None = None            # the draft model's folder (method "draft_model")
    method: str = "draft_model"         # "draft_model" | "ngram" | "none" (target only)
    k: int = 3
    dtype: str = "float32"
    max_model_len: int = 512
    served_name: str = "target"
    threads: int = 2                    # OMP_NUM_THREADS: vLLM keeps one of two cores to itself otherwise
    kv_cache_gib: int = 1               # VLLM_CPU_KVCACHE_SPACE
    ngram_lookup: tuple[int, int] | None = None   # (prompt_lookup_min, prompt_lookup_max); None: vLLM's (5, 5)
    extra_args: tuple[str, ...] = ()
    draft_sample_method: str = "greedy"  # vLLM's: "greedy" (the draft's argmax as one-hot) or "probabilistic"
    spec_metrics: str = "detailed"      # --per-request-spec-decode-metrics: "detailed" (what SpecViz draws), "summary"
    fix_cpu_sampler: bool = False       # run SpecViz's CPU sampler fix (plugins/vllm_cpu_sampler_fix; installed first)

    def speculative_config(self) -> dict | None:
        if self.method == "none":
            return None
        config: dict = {"method": self.method, "num_speculative_tokens": self.k}
        if self.method == "draft_model":
            if not self.draft:
                raise VllmError("A draft-model server needs a draft model folder.")
            config["model"] = self.draft
            if self.draft_sample_method != "greedy":
                config["draft_sample_method"] = self.draft_sample_method
        if self.method == "ngram" and self.ngram_lookup is not None:
            config["prompt_lookup_min"], config["prompt_lookup_max"] = self.ngram_lookup
        return config

    def command(self, python: str, port: int) -> list[str]:
        command = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", self.target,
                   "--served-model-name", self.served_name, "--dtype", self.dtype,
                   "--max-model-len", str(self.max_model_len), "--host", "127.0.0.1", "--port", str(port)]
        speculative = self.speculative_config()
        if speculative is not None:
            command += ["--speculative-config", json.dumps(speculative),
                        "--per-request-spec-decode-metrics", self.spec_metrics]
        return command + list(self.extra_args)

    def environment(self) -> dict[str, str]:
        environment = dict(os.environ, OMP_NUM_THREADS=str(self.threads), VLLM_CPU_KVCACHE_SPACE=str(self.kv_cache_gib),
                           HF_HUB_OFFLINE="1", VLLM_NO_USAGE_STATS="1", DO_NOT_TRACK="1")
        environment.pop(FIX_ENV, None)
        if self.fix_cpu_sampler:
            environment[FIX_ENV] = "1"
        return environment


@dataclass
class RunningServer:
    process: subprocess.Popen
    address: ServerAddress
    log: Path
    startup_s: float                    # from the start to the first answer (the first start compiles)

    def stop(self) -> None:
        """End the server's whole process group (its engine core is a child process)."""
        stop_group(self.process)


def stop_group(process: subprocess.Popen) -> None:
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=20)
        except ProcessLookupError:
            pass
    try:        # the engine core may outlive its parent: end whatever is left of the group
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def vllm_python() -> Path | None:
    """The python of the vLLM environment: $SPECVIZ_VLLM_PYTHON, else ROOT/.venv-vllm/bin/python."""
    named = os.environ.get(PYTHON_ENV)
    candidate = Path(named) if named else ROOT / ".venv-vllm" / "bin" / "python"
    return candidate if candidate.exists() else None


def install_cpu_sampler_fix(python: str) -> None:
    """Install plugins/vllm_cpu_sampler_fix into the vLLM environment of `python` (offline, from this
    repository; what `scripts/vllm.sh start --fix-cpu-sampler` does). It acts only where FIX_ENV is 1."""
    with tempfile.TemporaryDirectory(prefix="specviz-fix-") as folder:    # the build writes beside its sources
        source = shutil.copytree(FIX_PLUGIN, Path(folder) / FIX_PLUGIN.name)
        done = subprocess.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-index",
                               "--no-deps", "--no-build-isolation", str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise VllmError(f"The CPU sampler fix did not install into the vLLM environment: {tail[0][:300]}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(spec: ServerSpec, log: Path, python: str | None = None, timeout_s: float = 600.0) -> RunningServer:
    """Start a server for `spec` on a free loopback port and return once /v1/models answers."""
    python = python or (str(vllm_python()) if vllm_python() else None)
    if python is None:
        raise VllmError("No vLLM environment was found: run `bash scripts/vllm.sh install` (or set "
                        f"{PYTHON_ENV}).")
    if spec.fix_cpu_sampler:
        install_cpu_sampler_fix(python)
    port = free_port()
    started = time.perf_counter()
    with open(log, "wb") as out:
        process = subprocess.Popen(spec.command(python, port), cwd=ROOT, env=spec.environment(), stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    address = ServerAddress("127.0.0.1", port)
    deadline = started + timeout_s
    while time.perf_counter() < deadline:
        if process.poll() is not None:
            stop_group(process)
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
            raise VllmError(f"The vLLM server exited with {process.returncode} before answering: {tail[0][:300]} "
                            f"(log: {log}).")
        try:
            if httpx.get(f"{address}/v1/models", timeout=2).status_code == 200:
                return RunningServer(process, address, log, time.perf_counter() - started)
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    stop_group(process)
    raise VllmError(f"{START_TIMED_OUT} {timeout_s:.0f} s (log: {log}).")
