"""When may speculative output be expected to equal target-only output, token for token?

Only the target decides what is emitted, so the draft's dtype never matters. A
float32 target in greedy mode gives the same tokens as target-only decoding. A
bfloat16/float16 target can round a k+1-token verify forward differently from
one-token decoding and flip a near-tie argmax; sampling draws different random
numbers, so only the distribution is the same.
"""

from __future__ import annotations

LOW_PRECISION = ("bfloat16", "float16")


def exactness_note(target_dtype: str, temperature: float) -> str:
    """One plain sentence on whether identical output to target-only decoding is guaranteed."""
    if temperature > 0:
        return ("Sampling (temperature > 0): speculative decoding keeps the target's output distribution, "
                "but draws different random numbers, so the text need not match a target-only run.")
    if target_dtype in LOW_PRECISION:
        return (f"A {target_dtype} target makes exact identity with target-only decoding not guaranteed: "
                f"verifying k+1 tokens in one forward can round differently and flip a near-tie. "
                f"Use a float32 target for a guaranteed-identical demo.")
    return ("Greedy with a float32 target: the output is identical to target-only decoding "
            "(a bfloat16 draft only changes speed and acceptance, never the text).")


def is_exact(target_dtype: str, temperature: float) -> bool:
    """True when identical output to target-only decoding is guaranteed."""
    return temperature == 0 and target_dtype not in LOW_PRECISION
