"""The machine a measurement was taken on, in one line: speeds only mean something next to it.

`bench.py` and `python -m engine sweep` write it beside their timings (a sweep's meta "machine"),
and the Explore tab labels measured speeds with it.
"""

from __future__ import annotations

import platform
from pathlib import Path


def describe_machine() -> str:
    """E.g. "Intel(R) Xeon(R) Processor (x86_64, AVX-512 + AMX), 2 threads, torch 2.13.0"."""
    import torch        # here, not at the top: the CLI imports this module, and `--help` must not wait for torch
    info = Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else ""
    isa = "AVX-512" if "avx512f" in info else "AVX2" if "avx2" in info else "no AVX2"
    amx = " + AMX" if "amx_tile" in info else ""
    name = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")),
                platform.processor())
    arch = platform.machine()
    cpu = f"{name} ({arch}, {isa}{amx})" if name else f"{arch}, {isa}{amx}"
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ""
    return f"{cpu}{gpu}, {torch.get_num_threads()} threads, torch {torch.__version__}"
