"""What the default pair's load found out about this machine, for the page to say before any Run (issue #40 item
2): the pair's names and target dtype as loaded (so a recorded run of the same pair can lend its acceptance to
the cost model), whether this CPU computes bfloat16 natively, so a bfloat16 target would pay here
(engine/runtime/cpu/native_bf16.py says why not, in one sentence), and whether an int4 draft is faster than an int8
one here (engine/runtime/cpu/kernels.py `int4_draft_pays`: its probe, and torch's AVX-512 code). Plain data, no torch: the page reads it from
the load's status (engine/background_load.py); engine/loading/machine_probe.py fills it in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MachineFacts:
    device: str                      # "cpu", "cuda", ...
    draft: str                       # the pair's draft and target as loaded (preset references, Hub ids or paths)
    target: str
    draft_dtype: str                 # as loaded: "int8", "float32", ... ("" without a draft model)
    target_dtype: str
    bf16_refusal: str | None         # a CPU: None where it computes bfloat16 natively, else why a bfloat16
                                     # target would not pay, one sentence; None off a CPU (a GPU's is bfloat16)
    int4_draft_pays: bool = False    # a CPU where the int4 draft kernel passes its probe and runs AVX-512 code
    others_busy: float | None = None  # the share of the CPUs other programs used while a CPU's costs were measured
                                     # (engine/runtime/cpu/others_share.py); None off a CPU or where unknown
