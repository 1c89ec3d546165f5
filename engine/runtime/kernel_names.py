"""Which linear-layer kernels a loaded pair runs, by name, with a sentence each for the UI.

Torch-free (the UI imports it). engine/runtime/cpu/kernels.py picks the kernels at load,
after probing each fast one (engine/runtime/cpu/kernel_probe.py); the engine writes the names
into the trace's config (`target_kernel`, `draft_kernel`). A trace written before these
fields existed has them empty, read as "not recorded".
"""

from __future__ import annotations

from engine.config import REDUCED_PRECISION

STOCK = "stock"                         # torch's own F.linear (MKL on a CPU; cuBLAS on a GPU)
ONEDNN_PREPACKED = "onednn-prepacked"   # weights reordered once for oneDNN; float precision unchanged
INT8_WEIGHT_ONLY = "int8-weight-only"   # int8 weights, a scale per output row, bfloat16 activations (drafts only)
INT4_WEIGHT_ONLY = "int4-weight-only"   # int4 weights in groups of 32 inputs, bfloat16 activations (drafts only)

KERNEL_DESCRIPTIONS = {
    STOCK: "torch's stock matrix products",
    ONEDNN_PREPACKED: "weights prepacked once for oneDNN (same precision; a verify over a few tokens "
                      "costs about one decoding step)",
    INT8_WEIGHT_ONLY: "int8 weights with a scale per output row, bfloat16 activations (draft only: "
                      "it changes proposals, never the output)",
    INT4_WEIGHT_ONLY: "int4 weights in groups of 32 inputs, each with a scale and offset, bfloat16 activations "
                      "(draft only: it changes proposals, never the output)",
}


def describe_kernel(name: str) -> str:
    """One sentence for a kernel name; an empty name is a trace written before kernels were recorded."""
    if not name:
        return "not recorded"
    return KERNEL_DESCRIPTIONS.get(name, name)


def target_dtype_words(dtype: str) -> str:
    """What a target dtype means for greedy identity, a few words for the page; "" for float32 or unknown."""
    if dtype not in REDUCED_PRECISION:
        return ""
    return (f"greedy identity is with target-only decoding of this same {dtype} target, near ties aside; "
            "a float32 target's identity is a different claim")
