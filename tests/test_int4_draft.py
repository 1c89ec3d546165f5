"""The int4 draft (engine/runtime/cpu/kernel_modules.py Int4Linear, kernels.py quantize_int4):
each layer computes what F.linear does on the weight the quantization law gives (an oracle
computed here from the float weight, not read back from the kernel), each row alone; a pair
with an int4 draft is greedy-identical to transformers' generate on the plain target; a wrong
kernel is caught by the probe and an explicit int4 draft is then refused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from engine import SpecConfig, SpeculativeEngine, load_pair
from engine.loading.tiny import build_tiny_pair
from engine.presets import ModelLoadError
from engine.runtime.cpu import kernel_probe
from engine.runtime.cpu.kernel_modules import INT4_GROUP, Int4Linear, Int8Linear
from engine.runtime.cpu.kernels import kernel_of, quantize_int4
from engine.runtime.kernel_names import INT4_WEIGHT_ONLY, ONEDNN_PREPACKED
from oracles import transformers_greedy

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)

PROMPTS = ["hello world", "the cat sat on", "0123456789", "speculative decoding", "abcabcabc", "zz"]


def law_weight(weight: torch.Tensor) -> torch.Tensor:
    """The int4 law written out: per group of INT4_GROUP inputs, scale = (max - min) / 15 and
    offset = min + 8 scale, each rounded to bfloat16; q = round((w - offset) / scale + 8) in 0..15;
    the layer multiplies by (q - 8) scale + offset."""
    out_features, in_features = weight.shape
    groups = weight.double().reshape(out_features, in_features // INT4_GROUP, INT4_GROUP)
    low, high = groups.amin(dim=-1), groups.amax(dim=-1)
    scale = ((high - low) / 15).to(torch.bfloat16).double()
    offset = (low + 8 * scale).to(torch.bfloat16).double()
    q = torch.round((groups - offset[..., None]) / scale[..., None] + 8).clamp(0, 15)
    return ((q - 8) * scale[..., None] + offset[..., None]).reshape(out_features, in_features)


@pytest.mark.parametrize("bias", [True, False])
def test_int4_linear_computes_the_law_s_weight_and_each_row_alone(bias):
    torch.manual_seed(0)
    linear = nn.Linear(128, 320, bias=bias)
    layer = Int4Linear.from_weight(linear.weight, linear.bias)
    expected_weight = law_weight(linear.weight)
    # the weight moved by at most half a step of its group (bfloat16's rounding of the scale aside)
    steps = (linear.weight.reshape(320, -1, INT4_GROUP).amax(-1) - linear.weight.reshape(320, -1, INT4_GROUP).amin(-1)) / 15
    moved = (expected_weight.float() - linear.weight).abs().reshape(320, -1, INT4_GROUP).amax(-1)
    assert torch.all(moved <= steps * 0.51 + 1e-6)
    x = torch.randn(2, 7, 128)
    got = layer(x)
    expected = F.linear(x.to(torch.bfloat16).double(), expected_weight, None if linear.bias is None else linear.bias.double())
    assert got.shape == (2, 7, 320) and got.dtype == torch.float32
    assert (got.double() - expected).abs().max().item() <= 1e-2 * expected.abs().max().item()   # bf16 output rounding
    rows = x.reshape(14, 128)
    alone = torch.cat([layer(rows[i:i + 1]) for i in range(14)])
    assert torch.equal(layer(rows), alone)


def test_the_law_s_weight_in_the_code_is_the_law_written_here():
    torch.manual_seed(2)
    weight = torch.randn(48, 64)
    assert torch.allclose(Int4Linear.law_weight(weight).double(), law_weight(weight), rtol=0, atol=1e-6)


def test_the_law_oracle_catches_a_planted_off_by_one_level():
    """Plant: the kernel read with the levels shifted by one (offset + scale): the oracle's comparison fails."""
    torch.manual_seed(1)
    weight = torch.randn(64, 96)
    layer = Int4Linear.from_weight(weight, None)
    planted = layer.scales_and_offsets.clone()
    planted[..., 1] = (planted[..., 1].float() + planted[..., 0].float()).to(torch.bfloat16)
    layer.scales_and_offsets = planted
    x = torch.randn(3, 96)
    expected = F.linear(x.to(torch.bfloat16).double(), law_weight(weight))
    assert (layer(x).double() - expected).abs().max().item() > 1e-2 * expected.abs().max().item()


def test_shapes_int4_cannot_pack_get_the_int8_kernel():
    assert Int4Linear.fits(torch.zeros(320, 128)) and not Int4Linear.fits(torch.zeros(101, 64))
    assert not Int4Linear.fits(torch.zeros(64, 48))          # 48 inputs: not whole groups of 32
    pair = build_tiny_pair(seed=5, draft_noise=0.0)
    assert quantize_int4(pair.draft) > 0 and kernel_of(pair.draft) == INT4_WEIGHT_ONLY
    assert isinstance(pair.draft.lm_head, Int8Linear)         # 101 outputs: not a multiple of 16
    assert not any(type(module) is nn.Linear for module in pair.draft.modules())


@pytest.mark.parametrize("k", [1, 3, 5])
def test_an_int4_draft_is_greedy_identical_to_the_plain_target(k):
    """Oracle: transformers' greedy generate() on an unpacked float32 copy of the target."""
    pair = load_pair("tiny-random", draft_dtype="int4")
    assert (pair.draft_dtype, pair.draft_kernel, pair.target_kernel) == ("int4", INT4_WEIGHT_ONLY, ONEDNN_PREPACKED)
    fast, plain = SpeculativeEngine(pair), build_tiny_pair()
    accepted = 0
    for prompt in PROMPTS:
        trace = fast.generate(prompt, SpecConfig(k=k, max_new_tokens=24))
        assert list(trace.output.token_ids) == transformers_greedy(plain, prompt, 24), prompt
        assert trace.config.draft_dtype == "int4" and trace.config.draft_kernel == INT4_WEIGHT_ONLY
        accepted += trace.summary.accepted
    assert accepted > 0                                       # the int4 draft does propose accepted tokens


def test_a_wrong_int4_kernel_is_caught_and_an_int4_draft_refused(monkeypatch):
    assert kernel_probe.probe_int4() is None
    real = torch._weight_int4pack_mm_for_cpu
    monkeypatch.setattr(torch, "_weight_int4pack_mm_for_cpu", lambda x, w, g, s: real(x, w, g, s) * 1.1)   # planted
    assert "the int4 weight-only kernel disagreed with F.linear" in kernel_probe.probe_int4()
    with pytest.raises(ModelLoadError, match="an int4 draft cannot run here"):
        load_pair("tiny-random", draft_dtype="int4")
    assert load_pair("tiny-random", draft_dtype="auto").draft_dtype == "int8"     # auto keeps int8


def test_a_missing_int4_operator_is_reported(monkeypatch):
    monkeypatch.delattr(torch, "_weight_int4pack_mm_for_cpu")
    assert kernel_probe.probe_int4() == "this torch build has no int4 weight-only matrix product for the CPU"
    with pytest.raises(ModelLoadError, match="no int4 weight-only matrix product"):
        load_pair("tiny-random", draft_dtype="int4")
