"""CPU kernels (engine/runtime/cpu/kernels.py, kernel_modules.py): prepacked linears compute what
nn.Linear does, the int8 draft's layers what F.linear does on their dequantized weights, and an
int8 draft with a prepacked target leaves greedy output identical to the plain target's. The
probes' fallbacks are in tests/test_kernel_probe.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from engine import SpecConfig, SpeculativeEngine, load_pair
from engine.runtime.kernel_names import INT8_WEIGHT_ONLY, ONEDNN_PREPACKED, STOCK
from engine.runtime.cpu.kernels import (bf16_prepack_supported, can_prepack, kernel_of, packed_layer_count,
                                        prepack_linear_layers, quantize_int8)
from engine.runtime.cpu.kernel_modules import Int8Linear, PackedLinear
from engine.loading.tiny import build_tiny_pair
from oracles import transformers_greedy

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)

PROMPTS = ["hello world", "the cat sat on", "0123456789", "speculative decoding", "abcabcabc", "zz"]


@pytest.mark.parametrize("dtype, tolerance", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("bias", [True, False])
def test_packed_linear_matches_nn_linear_for_every_row_count(dtype, tolerance, bias):
    """Runs on every CPU: where oneDNN cannot prepack bfloat16 (no AVX-512) the loader's probe says
    so and nothing is packed (the other branch is forced everywhere in tests/test_kernel_probe.py)."""
    torch.manual_seed(0)
    linear = nn.Linear(96, 200, bias=bias).to(dtype)
    if dtype == torch.bfloat16 and not bf16_prepack_supported():
        assert prepack_linear_layers(nn.Sequential(linear)) == 0
        return
    packed = PackedLinear.from_weight(linear.weight, linear.bias)
    for rows in (1, 2, 3, 4, 6, 9, 17):
        x = torch.randn(1, rows, 96, dtype=dtype)
        expected, got = linear(x), packed(x)
        assert got.shape == expected.shape == (1, rows, 200) and got.dtype == dtype
        scale = expected.abs().max().item()
        assert (got.float() - expected.float()).abs().max().item() <= tolerance * max(1.0, scale), rows


@pytest.mark.parametrize("bias", [True, False])
def test_int8_linear_computes_its_dequantized_weight_and_each_row_alone(bias):
    """Oracle: F.linear in float64 on the weight the layer holds (int8 x scale). Weight-only
    quantization has no activation scale shared across rows, so a row's result is the same bit
    for bit whether it is computed alone or in a batch of 7."""
    torch.manual_seed(0)
    linear = nn.Linear(128, 300, bias=bias)
    layer = Int8Linear.from_weight(linear.weight, linear.bias)
    assert layer.weight_int8.dtype == torch.int8 and layer.weight_int8.abs().max().item() == 127
    x = torch.randn(2, 7, 128)
    got = layer(x)
    expected = F.linear(x.double(), layer.dequantized_weight().double(), None if linear.bias is None else linear.bias.double())
    assert got.shape == (2, 7, 300) and got.dtype == torch.float32
    assert (got.double() - expected).abs().max().item() <= 3e-2 * expected.abs().max().item()
    weight_error = (layer.dequantized_weight() - linear.weight).abs().max(dim=1).values
    assert torch.all(weight_error <= linear.weight.abs().max(dim=1).values / 127 * 0.51 + 1e-6)  # half a step, bf16 scale
    rows = x.reshape(14, 128)
    alone = torch.cat([layer(rows[i:i + 1]) for i in range(14)])
    assert torch.equal(layer(rows), alone)


def test_prepacking_swaps_every_linear_and_keeps_the_logits():
    plain = build_tiny_pair(seed=3)
    packed = build_tiny_pair(seed=3)
    count = sum(type(m) is nn.Linear for m in packed.target.modules())
    assert can_prepack(packed.target) and prepack_linear_layers(packed.target) == count > 0
    assert packed_layer_count(packed.target) == count and kernel_of(packed.target) == ONEDNN_PREPACKED
    assert not any(type(m) is nn.Linear for m in packed.target.modules())
    ids = torch.tensor([plain.encode_prompt("the cat sat on the mat", raw=True)])
    with torch.inference_mode():
        expected, got = plain.target(input_ids=ids).logits, packed.target(input_ids=ids).logits
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5)
    assert torch.equal(got.argmax(-1), expected.argmax(-1))
    assert prepack_linear_layers(packed.target) == 0          # nothing left to pack


def test_the_bf16_probe_never_claims_what_torch_refuses():
    """On a CPU without AVX-512 torch's bfloat16 reorder raises; the probe must then say no, so the
    loader keeps the plain kernels."""
    weight = torch.randn(16, 32).to(torch.bfloat16)
    try:
        torch.ops.mkldnn._reorder_linear_weight(weight, 4)
        torch_packs_bf16 = True
    except RuntimeError:
        torch_packs_bf16 = False
    assert torch_packs_bf16 or not bf16_prepack_supported()


def test_load_pair_prepacks_the_target_quantizes_an_int8_draft_and_records_both():
    pair = load_pair("tiny-random", draft_dtype="int8")
    assert pair.prepacked and pair.draft_dtype == "int8"
    assert (pair.target_kernel, pair.draft_kernel) == (ONEDNN_PREPACKED, INT8_WEIGHT_ONLY)
    assert packed_layer_count(pair.target) > 0
    assert not any(type(m) is nn.Linear for m in pair.draft.modules())
    assert pair.vocab_size == build_tiny_pair().vocab_size    # widths read through packed / quantized heads
    trace = SpeculativeEngine(pair).generate("abc", SpecConfig(k=3, max_new_tokens=6))
    assert (trace.config.target_kernel, trace.config.draft_kernel) == (ONEDNN_PREPACKED, INT8_WEIGHT_ONLY)
    ngram = SpeculativeEngine(pair).generate("abcabc", SpecConfig(k=3, max_new_tokens=6, drafter="ngram"))
    assert (ngram.config.target_kernel, ngram.config.draft_kernel) == (ONEDNN_PREPACKED, "")
    plain = load_pair("tiny-random", prepack=False)
    assert not plain.prepacked and packed_layer_count(plain.target) == 0
    assert (plain.target_kernel, plain.draft_kernel) == (STOCK, STOCK)


def test_auto_draft_dtype_is_int8_on_the_cpu():
    pair = load_pair("tiny-random", draft_dtype="auto")
    assert pair.draft_dtype == "int8"
    trace = SpeculativeEngine(pair).generate("abc", SpecConfig(k=3, max_new_tokens=6))
    assert trace.config.draft_dtype == "int8"


@pytest.mark.parametrize("k", [1, 3, 5, 8])
def test_fast_pair_is_greedy_identical_to_the_plain_target(k):
    """Oracle: transformers' greedy generate() on an unpacked float32 copy of the target."""
    fast = SpeculativeEngine(load_pair("tiny-random", draft_dtype="int8"))
    plain = build_tiny_pair()
    accepted = 0
    for prompt in PROMPTS:
        trace = fast.generate(prompt, SpecConfig(k=k, max_new_tokens=24))
        assert list(trace.output.token_ids) == transformers_greedy(plain, prompt, 24), prompt
        accepted += trace.summary.accepted
    assert accepted > 0                                       # the int8 draft does propose accepted tokens


def test_quantize_int8_keeps_the_draft_close():
    pair = build_tiny_pair(seed=5, draft_noise=0.0)
    reference = build_tiny_pair(seed=5, draft_noise=0.0).draft
    unrelated = build_tiny_pair(seed=6, draft_noise=0.0).draft
    assert quantize_int8(pair.draft) > 0 and kernel_of(pair.draft) == INT8_WEIGHT_ONLY
    ids = torch.tensor([pair.encode_prompt("quantized drafts", raw=True)])
    with torch.inference_mode():
        expected = reference(input_ids=ids).logits
        relative = [(model(input_ids=ids).logits - expected).norm().item() / expected.norm().item()
                    for model in (pair.draft, unrelated)]
    assert relative[0] < 0.25 < 0.5 < relative[1]          # int8 moves the logits by a few percent
