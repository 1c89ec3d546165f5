"""Probes and fallbacks (engine/runtime/cpu/kernel_probe.py): each fast kernel is checked once at load
against F.linear; a missing operator, a refusing CPU or a kernel that computes something else
leaves the stock kernel in place, says why, and the trace's config names what really ran.
Planted bugs (monkeypatched operators) must be caught by the probe."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from engine import SpecConfig, SpeculativeEngine, load_pair
from engine.runtime.kernel_names import INT8_WEIGHT_ONLY, ONEDNN_PREPACKED, STOCK, describe_kernel
from engine.runtime.cpu import kernel_probe
from engine.runtime.cpu.kernels import can_prepack, packed_layer_count, prepack_linear_layers
from engine.presets import ModelLoadError
from engine.formats.trace import Trace
from engine.formats.trace_reader import parse_trace

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


def test_both_probes_pass_here_and_on_any_x86_cpu_for_float32():
    """float32 prepacking and the int8 kernel run on every x86-64 CPU torch supports (AVX2 or better)."""
    assert kernel_probe.probe_prepacked(torch.float32) is None
    assert kernel_probe.probe_int8() is None
    assert "float16" in kernel_probe.probe_prepacked(torch.float16)


def test_a_wrong_prepacked_kernel_is_caught_and_the_target_keeps_stock_kernels(monkeypatch):
    reference = SpeculativeEngine(load_pair("tiny-random", prepack=False)).generate("probe", SpecConfig(k=3, max_new_tokens=10))
    real_ops = torch.ops.mkldnn

    class WrongOps:                          # the planted bug: a kernel that is off by 1 %
        def __getattr__(self, name):
            if name == "_linear_pointwise":
                return lambda *args: real_ops._linear_pointwise(*args) * 1.01
            return getattr(real_ops, name)

    monkeypatch.setattr(torch.ops, "mkldnn", WrongOps(), raising=False)
    reason = kernel_probe.probe_prepacked(torch.float32)
    assert reason is not None and "disagreed with F.linear" in reason
    messages = []
    pair = load_pair("tiny-random", progress=lambda fraction, message: messages.append(message))
    assert not pair.prepacked and pair.target_kernel == STOCK and packed_layer_count(pair.target) == 0
    assert any("keeping the stock kernels" in message and "disagreed" in message for message in messages)
    trace = SpeculativeEngine(pair).generate("probe", SpecConfig(k=3, max_new_tokens=10))
    assert trace.config.target_kernel == STOCK and trace.output.token_ids == reference.output.token_ids


def test_a_missing_prepack_operator_keeps_stock_kernels(monkeypatch):
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert "no oneDNN" in kernel_probe.probe_prepacked(torch.float32)
    assert not can_prepack(nn.Sequential(nn.Linear(8, 8)))
    assert load_pair("tiny-random").target_kernel == STOCK


def test_without_avx512_bfloat16_is_not_packed_but_float32_is(monkeypatch):
    """The CPU without AVX-512 (forced on every machine): nothing bfloat16 is packed, a bfloat16
    pair generates the same tokens as unpacked, and a float32 target still packs."""
    reference = SpeculativeEngine(load_pair("tiny-random", draft_dtype="bfloat16", target_dtype="bfloat16",
                                            prepack=False)).generate("fallback", SpecConfig(k=3, max_new_tokens=12))
    monkeypatch.setattr(kernel_probe, "bf16_prepack_supported", lambda: False)
    assert "AVX-512" in kernel_probe.probe_prepacked(torch.bfloat16)
    model = nn.Sequential(nn.Linear(8, 8).to(torch.bfloat16))
    assert not can_prepack(model) and prepack_linear_layers(model) == 0 and type(model[0]) is nn.Linear
    pair = load_pair("tiny-random", draft_dtype="bfloat16", target_dtype="bfloat16")
    assert not pair.prepacked and packed_layer_count(pair.target) == packed_layer_count(pair.draft) == 0
    assert (pair.target_kernel, pair.draft_kernel) == (STOCK, STOCK)
    trace = SpeculativeEngine(pair).generate("fallback", SpecConfig(k=3, max_new_tokens=12))
    assert trace.output.token_ids == reference.output.token_ids
    assert load_pair("tiny-random", target_dtype="float32").target_kernel == ONEDNN_PREPACKED


def test_a_wrong_int8_kernel_is_caught_auto_falls_back_and_explicit_int8_is_refused(monkeypatch):
    real = torch._weight_int8pack_mm
    monkeypatch.setattr(torch, "_weight_int8pack_mm", lambda x, w, s: real(x, w, s) * 1.1)   # planted: 10 % off
    reason = kernel_probe.probe_int8()
    assert reason is not None and "disagreed" in reason
    pair = load_pair("tiny-random", draft_dtype="auto")
    assert pair.draft_dtype == "float32" and pair.draft_kernel == STOCK
    with pytest.raises(ModelLoadError, match="an int8 draft cannot run here: the int8 weight-only kernel disagreed"):
        load_pair("tiny-random", draft_dtype="int8")


def test_a_missing_int8_operator_is_reported(monkeypatch):
    monkeypatch.delattr(torch, "_weight_int8pack_mm")
    assert kernel_probe.probe_int8() == "this torch build has no int8 weight-only matrix product"
    assert load_pair("tiny-random", draft_dtype="auto").draft_dtype == "float32"


def test_a_trace_from_before_kernels_were_recorded_still_loads():
    pair = load_pair("tiny-random", draft_dtype="int8")
    document = SpeculativeEngine(pair).generate("abc", SpecConfig(k=2, max_new_tokens=5)).to_dict()
    assert document["config"]["target_kernel"] == ONEDNN_PREPACKED
    del document["config"]["target_kernel"], document["config"]["draft_kernel"]
    trace = parse_trace(document)
    assert isinstance(trace, Trace) and trace.config.target_kernel == trace.config.draft_kernel == ""
    assert describe_kernel(trace.config.target_kernel) == "not recorded"
    assert "int8" in describe_kernel(INT8_WEIGHT_ONLY)
