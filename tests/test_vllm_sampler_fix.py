"""SpecViz's fix of vLLM 0.32's CPU sampler (plugins/vllm_cpu_sampler_fix; vLLM issue #55005).

`expand` against the Triton kernel's rule written as a loop (each request's value, replace_from
rewritten to replace_to, over its positions, in the output's dtype), on buffers full of garbage, as
vLLM's `new_empty` hands it; then, in the vLLM environment, the project's own reproduction
(scripts/vllm_cpu_expand_repro.py, through vLLM's real plugin loading and kernel registration): broken
as shipped, right with the fix on, and untouched when the plugin is installed but not turned on; and
top-k on a verify step with no rows, which killed vLLM's engine, passes with the fix.
The exact-law oracle on real servers before and after is a measurement (benchmarks/vllm_sampler_law.py,
benchmarks/data/vllm-cpu-sampler-fix-law.json): three servers and 9000 requests are too slow for the suite.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "plugins" / "vllm_cpu_sampler_fix" / "specviz_vllm_cpu_sampler_fix" / "__init__.py"
REPRO = ROOT / "scripts" / "vllm_cpu_expand_repro.py"


def plugin():
    spec = importlib.util.spec_from_file_location("specviz_vllm_cpu_sampler_fix", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kernel_rule(values: list, ends: list[int], replace_from, replace_to) -> list:
    """What vLLM's Triton expand_kernel stores, position by position."""
    out, start = [], 0
    for value, end in zip(values, ends):
        out += [replace_to if value == replace_from else value] * (end - start)
        start = end
    return out


@pytest.mark.parametrize("dtype, values, replace", [
    (torch.float32, [0.7, -1.0, 0.3, 1.5], (-1, 1)),         # temperatures: -1 (greedy) becomes 1
    (torch.float32, [0.95, 0.5, 1.0, 0.25], (0, 0)),          # top-p
    (torch.int32, [40, 0, 5, 257], (0, 0)),                    # top-k
    (torch.int64, [3, 1, 2, 9], (1, 7))])
def test_expand_keeps_each_values_dtype_and_follows_the_kernel(dtype, values, replace):
    ends = [3, 3, 5, 8]                          # the second request drafted nothing
    output = torch.full((8,), 12345, dtype=dtype)
    plugin().expand(output, torch.tensor(values, dtype=dtype), torch.tensor(ends, dtype=torch.int32), *replace)
    expected = torch.tensor(kernel_rule(values, ends, *replace), dtype=dtype)
    assert output.dtype == dtype and torch.equal(output, expected)


def test_without_its_switch_the_installed_plugin_does_nothing(monkeypatch):
    """Installing it into .venv-vllm must change no server started without --fix-cpu-sampler: register()
    returns before it imports anything of vLLM (there is none in this environment)."""
    monkeypatch.delenv("SPECVIZ_VLLM_CPU_SAMPLER_FIX", raising=False)
    assert plugin().register() is None


def test_top_k_passes_no_rows_through_and_leaves_every_other_input_to_vllm():
    calls = []

    def vllms(logits, k):                       # what vLLM 0.32's apply_top_k_only does first
        calls.append(int(k.max()))
        return logits.masked_fill(logits < logits.topk(int(k.max()), dim=1).values[:, -1:], float("-inf"))

    module = type("topk_topp_sampler", (), {"apply_top_k_only": staticmethod(vllms)})
    with pytest.raises(RuntimeError, match="numel"):
        module.apply_top_k_only(torch.empty(0, 5), torch.empty(0, dtype=torch.int32))
    fix = plugin()
    fix.guard_top_k(module)
    fix.guard_top_k(module)                      # a second load in one process wraps nothing twice
    empty = torch.empty(0, 5)
    assert module.apply_top_k_only(empty, torch.empty(0, dtype=torch.int32)) is empty and calls == []
    logits = torch.tensor([[0.0, 3.0, 1.0, 2.0, -1.0]])
    kept = module.apply_top_k_only(logits, torch.tensor([2], dtype=torch.int32))
    assert torch.isinf(kept).tolist() == [[True, False, True, False, True]] and calls == [2]


TOP_K_CHECK = """
import torch
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch
try:
    print("rows", tuple(apply_top_k_top_p_pytorch(torch.empty(0, 257), torch.empty(0, dtype=torch.int32), None,
                                                  allow_cpu_sync=True).shape))
except RuntimeError as error:
    print("raised", str(error)[:40])
"""


def repro(python: str, fixed: bool, script: list[str] | None = None) -> list[str]:
    """The lines the reproduction (or `script`) prints in the vLLM environment, the fix on or off."""
    environment = {key: value for key, value in os.environ.items() if key != "SPECVIZ_VLLM_CPU_SAMPLER_FIX"}
    if fixed:
        environment["SPECVIZ_VLLM_CPU_SAMPLER_FIX"] = "1"
    done = subprocess.run([python, *(script or [str(REPRO)])], capture_output=True, text=True, env=environment,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if line.startswith(("[", "rows", "raised"))]


@pytest.mark.vllm
def test_the_projects_reproduction_is_fixed_through_vllms_own_plugin_loading():
    from engine.vllm.server import install_cpu_sampler_fix, vllm_python
    python = vllm_python()
    if python is None:
        pytest.skip("no vLLM environment (.venv-vllm): scripts/test.sh installs it")
    install_cpu_sampler_fix(str(python))
    fixed = repro(str(python), fixed=True)
    assert fixed == ["[0.699999988079071, 0.699999988079071, 0.699999988079071]"] * 3 + ["[40, 40, 40] (top_k 40)"]
    shipped = repro(str(python), fixed=False)      # installed, not turned on: vLLM's own override, still broken
    assert len(shipped) == 4 and shipped[-1] != "[40, 40, 40] (top_k 40)"
    assert not any(line == "[0.699999988079071, 0.699999988079071, 0.699999988079071]" for line in shipped[:3])
    assert repro(str(python), fixed=True, script=["-c", TOP_K_CHECK]) == ["rows (0, 257)"]
    shipped_top_k = repro(str(python), fixed=False, script=["-c", TOP_K_CHECK])
    assert len(shipped_top_k) == 1 and shipped_top_k[0].startswith("raised max(): Expected reduction dim")


def test_only_a_server_started_with_the_fix_turns_it_on(monkeypatch):
    from engine.vllm.server import FIX_ENV, ServerSpec
    monkeypatch.setenv(FIX_ENV, "1")                     # left over in the caller's shell: not passed on
    assert FIX_ENV not in ServerSpec("T", "D").environment()
    assert ServerSpec("T", "D", fix_cpu_sampler=True).environment()[FIX_ENV] == "1"
    summary = ServerSpec("T", "D", spec_metrics="summary").command("py", 1)
    assert summary[summary.index("--per-request-spec-decode-metrics") + 1] == "summary"
