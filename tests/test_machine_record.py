"""engine/cli/machine.py: every saved run names its machine (issue #37): the CPU class each kernel
flag set falls in (enumerated), the flags read as /proc/cpuinfo lists them, and the caps in force."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.cli.machine import CAPS, KERNEL_FLAGS, cpu_class, describe_machine, machine_record, provenance


@pytest.mark.parametrize("flags, expected", [
    (set(), "no AVX2"),
    ({"avx2", "fma"}, "AVX2"),
    ({"avx2", "avx512f"}, "AVX-512"),
    ({"avx2", "avx512f", "avx512_bf16"}, "AVX-512 + BF16"),
    ({"avx2", "avx512f", "amx_tile"}, "AVX-512 + AMX"),
    ({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}, "AVX-512 + BF16 + AMX"),
    ({"avx512_bf16", "amx_tile"}, "no AVX2"),               # extras without AVX-512F decide nothing
])
def test_each_flag_set_has_its_class(flags, expected):
    assert cpu_class(flags) == expected


def test_the_record_reads_this_cpus_flags():
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        pytest.fail("SpecViz's machine record reads /proc/cpuinfo; this test runs where it exists (Linux)")
    listed = next(line for line in cpuinfo.read_text().splitlines() if line.startswith(("flags", "Features")))
    listed_flags = set(listed.split(":", 1)[1].split())
    record = machine_record()
    assert record["flags"] == {flag: flag in listed_flags for flag in KERNEL_FLAGS}
    assert record["cpu_class"] == cpu_class(listed_flags) and record["cores"] >= 1
    assert len(record["load_average"]) == 3 and all(value >= 0 for value in record["load_average"])


def test_caps_in_force_are_recorded_and_named_in_the_line(monkeypatch):
    for name in CAPS:
        monkeypatch.delenv(name, raising=False)
    assert machine_record()["caps"] == {}
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    assert machine_record()["caps"] == {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert "ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2" in describe_machine()


def test_a_saved_run_names_its_command_and_commit():
    import subprocess
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent.parent,
                          capture_output=True, text=True).stdout.strip()
    saved = provenance(["--peer", "vllm", "--temperatures", "0,0.7"])
    assert saved["command"].endswith(" --peer vllm --temperatures 0,0.7") and saved["commit"] == head
