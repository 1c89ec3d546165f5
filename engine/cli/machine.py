"""The machine a measurement was taken on: speeds only mean something next to it.

`describe_machine` is the one line `bench.py` and `python -m engine sweep` write beside their timings (a
sweep's meta "machine"), and the Explore tab labels measured speeds with it. `machine_record` is the
whole record every saved run keeps (bench.py's "cpu", gpu_check's "environment.cpu", the classroom's
"machine"): the CPU's model and the instruction-set flags that decide which kernels run (AVX2, AVX-512,
AVX512_BF16, AMX), any cap put on them (`ATEN_CPU_CAPABILITY`, `ONEDNN_MAX_CPU_ISA`), the cores and the
load average while it ran, so each CPU class's figures can be quoted apart. Torch-free: the classroom
script reads it without loading torch.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

# The /proc/cpuinfo flags that decide which of torch's and oneDNN's CPU kernels run.
KERNEL_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")
CAPS = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")


def _cpuinfo() -> str:
    path = Path("/proc/cpuinfo")
    return path.read_text(errors="replace") if path.exists() else ""


def _flags(info: str) -> set[str]:
    line = next((line for line in info.splitlines() if line.startswith(("flags", "Features"))), "")
    return set(line.split(":", 1)[1].split()) if ":" in line else set()


def cpu_class(flags: set[str]) -> str:
    """The kernel class a CPU falls in, e.g. "AVX-512 + BF16 + AMX", "AVX2", "no AVX2"."""
    if "avx512f" not in flags:
        return "AVX2" if "avx2" in flags else "no AVX2"
    extras = [name for flag, name in (("avx512_bf16", "BF16"), ("amx_tile", "AMX")) if flag in flags]
    return " + ".join(["AVX-512", *extras])


def _cpu_name(info: str) -> str:
    return next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.processor())


def machine_record() -> dict[str, Any]:
    """The CPU, its kernel flags and class, caps in force, cores and load average, now."""
    info = _cpuinfo()
    flags = _flags(info)
    load = [round(value, 2) for value in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"cpu_model": _cpu_name(info), "arch": platform.machine(), "cpu_class": cpu_class(flags),
            "flags": {flag: flag in flags for flag in KERNEL_FLAGS},
            "caps": {name: os.environ[name] for name in CAPS if name in os.environ},
            "cores": os.cpu_count(), "load_average": load}


def describe_machine() -> str:
    """E.g. "Intel(R) Xeon(R) Processor (x86_64, AVX-512 + AMX), 2 threads, torch 2.13.0"."""
    import torch        # here, not at the top: the CLI imports this module, and `--help` must not wait for torch
    record = machine_record()
    isa = record["cpu_class"].replace(" + BF16", "")
    name, arch = record["cpu_model"], record["arch"]
    cpu = f"{name} ({arch}, {isa})" if name else f"{arch}, {isa}"
    caps = "".join(f", {key}={value}" for key, value in record["caps"].items())
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{cpu}{caps}{gpu}, {torch.get_num_threads()} threads, torch {torch.__version__}"


def provenance(argv: list[str] | None = None) -> dict[str, str]:
    """The command a saved run came from and the commit it ran at (empty where this is no git checkout)."""
    import shlex
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    words = [Path(sys.argv[0]).name, *(sys.argv[1:] if argv is None else argv)]
    return {"command": shlex.join(words), "commit": commit}
