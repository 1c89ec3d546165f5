"""A SpecViz server in a process of its own, for the load tests that drive it from outside
(scripts/classroom.py, tests/soak.py): its resident memory and CPU time are then the server's alone.

`start_server` runs `python app.py ARGS` on a free loopback port, its output to a log file, and
returns once the page answers; a server that exits at once because another process took the port
meanwhile is started again on a fresh port. `stop_server` ends it (killed when it does not stop).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import httpx

ROOT = Path(__file__).resolve().parent.parent


class PortTaken(RuntimeError):
    """The server could not bind the port it was given."""


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_bytes(pid: int) -> int:
    """Resident memory of process `pid` in bytes, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def start_server(app_args: Sequence[str], log: Path, timeout_s: float = 180.0,
                 attempts: int = 3) -> tuple[subprocess.Popen, str]:
    """`python app.py *app_args` on a free loopback port, offline; the process and its URL once it answers."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_once(app_args, log, timeout_s)
        except PortTaken:
            if attempt == attempts:
                raise
    raise RuntimeError("attempts must be at least 1")


def _start_once(app_args: Sequence[str], log: Path, timeout_s: float) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    env.pop("SPECVIZ_HOSTED", None)
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "app.py", *app_args, "--host", "127.0.0.1", "--port", str(port)],
                                   cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text()[-2000:]
            if "Cannot find empty port" in output or "address already in use" in output.lower():
                raise PortTaken(output)
            raise RuntimeError(f"the server exited with {process.returncode}: {output}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    stop_server(process)
    raise RuntimeError(f"the server did not answer within {timeout_s:.0f} s")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=15)
