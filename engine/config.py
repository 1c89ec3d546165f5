"""SpecConfig: every knob of one speculative decoding run, validated on creation.

Field names match the trace's `config` object (docs/architecture.md §3), so a config
round-trips through JSON unchanged. Pure Python: no torch import, so the UI can
build and validate configs without loading a model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

MODEL_DRAFTER = "model"         # a draft language model proposes the tokens
NGRAM_DRAFTER = "ngram"         # prompt lookup proposes them; as a draft reference, "no draft model"
DRAFTERS = (MODEL_DRAFTER, NGRAM_DRAFTER)
DTYPES = ("float32", "bfloat16", "float16")
TARGET_DTYPES = ("auto",) + DTYPES                # auto: bfloat16 on CUDA (its tensor cores), float32 elsewhere
# load_pair's target_dtype for "bfloat16 where it pays": on a CPU that computes bfloat16 natively (AVX-512 BF16
# or AMX) the target runs in bfloat16 on the prepacked path, elsewhere float32 with the reason in the load's
# progress (engine/runtime/cpu/native_bf16.py); bfloat16 on a GPU. Greedy output then equals target-only
# decoding of that same bfloat16 target, a different claim from a float32 target's.
NATIVE_BF16 = "bfloat16-native"
REDUCED_PRECISION = ("bfloat16", "float16")     # target dtypes whose rounding flips near ties more often
# int8, int4: a draft whose weights are quantized (weight-only, CPU; engine/runtime/cpu/kernel_modules.py); auto:
# the fastest for the device (int8 on a CPU, bfloat16 on CUDA, else float32). The target decides every token, so
# a draft dtype never changes the output (Exactness).
QUANTIZED_DRAFTS = ("int8", "int4")
DRAFT_DTYPES = ("auto",) + DTYPES + QUANTIZED_DRAFTS
DEVICES = ("auto", "cpu", "cuda", "mps")
CUTOFF_MODES = ("truncate", "none", "zero_fill")
# The KV cache's kind (docs/architecture.md §7): "dynamic" grows and frees cut rows; "static" is sized
# once and cut by moving its write pointer (the GPU's CUDA-graph path); "auto" is static on CUDA,
# dynamic elsewhere. Traces record the kind that ran.
CACHE_KINDS = ("static", "dynamic")
CACHE_CHOICES = ("auto",) + CACHE_KINDS
MAX_K = 32
MAX_TEMPERATURE = 10.0
MAX_NEW_TOKENS = 4096
MAX_SEED = 2**63 - 1
MAX_TREE_NODES = 64             # a token tree's node budget (docs/architecture.md §2, token trees)
MAX_TREE_BRANCH = 8             # children per tree node


class ConfigError(ValueError):
    """A setting a user typed is out of range; the message is one readable line."""


class Exactness(Enum):
    """What a run guarantees about its output next to target-only decoding of the same prompt
    and seed; `SpecConfig.exactness` is the one rule, and every text about it reads `note`.

    Only the target decides which tokens are emitted, so nothing about the draft matters
    (its dtype, bonus-token carryover, sampled drafting). Then:
    - sampling: lossless in law (the same distribution, with different random draws);
    - greedy, float32 target, real cutoff: identical up to float rounding: a verify forward
      over k+1 rows can differ from one-row decoding by about 1e-6 and flip a near tie;
    - greedy, bfloat16 or float16 target: rounding is coarser, so near ties flip more often;
    - a target cache that keeps rejected positions (lab cutoff "none" or "zero_fill"): nothing.
    """

    IN_LAW = ("lossless in law",
              "Sampling: the output follows the target's own distribution exactly (lossless in law), "
              "but its random draws differ from a target-only run, so the text need not match.")
    UP_TO_ROUNDING = ("exact up to float rounding at near ties",
                      "Greedy with a float32 target: the output is target-only decoding's, token for token, up to "
                      "float rounding: verifying k+1 tokens in one forward can differ by about 1e-6 from decoding "
                      "one at a time and flip a near tie. The draft (any dtype, int8 included) never changes the text.")
    NEAR_TIES_MAY_FLIP = ("near ties may flip",
                          "Greedy with a reduced-precision (bfloat16 or float16) target: verifying k+1 tokens in one "
                          "forward rounds differently from decoding one at a time, so near ties may flip and the text "
                          "can leave target-only decoding. Choose a float32 target for token-for-token output.")
    NOT_GUARANTEED = ("not guaranteed",
                      "Lab mode: the target's cache keeps rejected positions, so nothing is guaranteed: the output "
                      "may leave target-only decoding at any step.")

    def __init__(self, label: str, note: str):
        self.label = label      # a few words, e.g. for a badge
        self.note = note        # one or two sentences for people

    @property
    def token_for_token(self) -> bool:
        """True when the output should equal target-only decoding's tokens (BaselineStats.exact_expected)."""
        return self is Exactness.UP_TO_ROUNDING


@dataclass(frozen=True)
class SpecConfig:
    """Settings of one generation. Model names and dtypes are filled in from the
    loaded pair when the engine starts, so the trace says what really ran."""

    k: int = 4                       # draft tokens proposed per step (the first step's k when adaptive)
    temperature: float = 0.0         # 0 = greedy verification
    top_p: float = 1.0               # nucleus mass kept, in (0, 1]
    top_k: int = 0                   # 0 = no top-k filter
    max_new_tokens: int = 64         # exactly this many new tokens unless EOS comes first
    seed: int = 0                    # seeds every random draw of the run
    drafter: str = MODEL_DRAFTER     # "model" (draft LM) or "ngram" (prompt lookup): DRAFTERS
    adaptive_k: bool = False         # pick each step's k in [1, 2k] for the most tokens per second (engine/decode/adaptive.py)
    confidence_threshold: float = 0.0  # stop drafting once the draft's top prob falls below (0 = off)
    ngram_min: int = 1               # prompt lookup: shortest suffix n-gram to match
    ngram_max: int = 3               # prompt lookup: longest suffix n-gram to match
    raw: bool = False                # True: send the prompt as is, skipping the chat template
    cache: str = "auto"              # the KV cache: CACHE_CHOICES ("auto": static on CUDA, dynamic elsewhere)
    tree_nodes: int = 0              # > 0: draft a token tree of up to this many nodes, depth <= k (0 = a chain)
    tree_branch: int = 3             # a tree node's most children (the draft's top tree_branch tokens)
    # Lab mode (problems B-D switched off); defaults are the correct engine.
    carryover: bool = True           # feed d_k + bonus to the draft after a fully accepted step
    cutoff_mode: str = "truncate"    # "truncate" | "none" (keep rejected KV) | "zero_fill" (lab C)
    draft_temperature: float = -1.0  # >= 0: the draft samples at this temperature while the
                                     # target verifies greedily (Medusa ultra-min); -1 = off
    # Filled from the loaded pair by the engine.
    draft: str = ""
    target: str = ""
    device: str = ""
    draft_dtype: str = ""
    target_dtype: str = ""
    draft_kernel: str = ""           # engine/runtime/kernel_names.py; "" for n-gram drafting or a trace from before
    target_kernel: str = ""
    engine: str = ""                 # "" = SpecViz's own engine; else the server that ran it, e.g. "vllm 0.32.0"
                                     # (docs/architecture.md §10: no p, q, draws or phase times then)
    engine_note: str = ""            # with `engine`: one sentence on how SpecViz checked the server's drafting method
                                     # against what it does, or why it could not (engine/vllm/server_info.py)

    def __post_init__(self) -> None:
        _check(isinstance(self.k, int) and 1 <= self.k <= MAX_K, f"k must be an integer from 1 to {MAX_K}, got {self.k!r}")
        _check(_is_number(self.temperature) and 0.0 <= self.temperature <= MAX_TEMPERATURE,
               f"temperature must be between 0 and {MAX_TEMPERATURE:g}, got {self.temperature!r}")
        _check(_is_number(self.top_p) and 0.0 < self.top_p <= 1.0, f"top-p must be in (0, 1], got {self.top_p!r}")
        _check(isinstance(self.top_k, int) and self.top_k >= 0, f"top-k must be a whole number >= 0, got {self.top_k!r}")
        _check(isinstance(self.max_new_tokens, int) and 1 <= self.max_new_tokens <= MAX_NEW_TOKENS,
               f"max new tokens must be an integer from 1 to {MAX_NEW_TOKENS}, got {self.max_new_tokens!r}")
        _check(isinstance(self.seed, int) and 0 <= self.seed <= MAX_SEED,
               f"seed must be a whole number >= 0, got {self.seed!r}")
        _check(self.drafter in DRAFTERS, f"drafter must be one of {', '.join(DRAFTERS)}, got {self.drafter!r}")
        _check(_is_number(self.confidence_threshold) and 0.0 <= self.confidence_threshold < 1.0,
               f"confidence threshold must be in [0, 1), got {self.confidence_threshold!r}")
        _check(isinstance(self.ngram_min, int) and isinstance(self.ngram_max, int)
               and 1 <= self.ngram_min <= self.ngram_max <= 16,
               f"n-gram sizes need 1 <= min <= max <= 16, got {self.ngram_min!r}..{self.ngram_max!r}")
        _check(self.cache in CACHE_CHOICES, f"cache must be one of {', '.join(CACHE_CHOICES)}, got {self.cache!r}")
        _check(self.cutoff_mode in CUTOFF_MODES, f"cutoff mode must be one of {', '.join(CUTOFF_MODES)}, got {self.cutoff_mode!r}")
        _check(_is_number(self.draft_temperature) and (self.draft_temperature == -1.0 or 0.0 <= self.draft_temperature <= 10.0),
               f"draft temperature must be -1 (off) or between 0 and 10, got {self.draft_temperature!r}")
        _check(self.draft_temperature < 0 or self.temperature == 0.0,
               "sampled drafting with greedy verification needs temperature 0 for the target")
        _check(isinstance(self.tree_nodes, int) and 0 <= self.tree_nodes <= MAX_TREE_NODES,
               f"tree nodes must be a whole number from 0 (a chain) to {MAX_TREE_NODES}, got {self.tree_nodes!r}")
        _check(isinstance(self.tree_branch, int) and 1 <= self.tree_branch <= MAX_TREE_BRANCH,
               f"tree branch must be an integer from 1 to {MAX_TREE_BRANCH}, got {self.tree_branch!r}")
        if self.is_tree:
            _check(self.drafter == MODEL_DRAFTER, "a token tree needs the draft model: choose the model drafter "
                                                  "or set tree nodes to 0")
            _check(not self.is_lab_mode, "a token tree runs only in the correct engine: switch the lab settings off "
                                         "or set tree nodes to 0")
            _check(not self.adaptive_k and self.confidence_threshold == 0.0,
                   "a token tree has a fixed depth k and node budget: switch adaptive k and the confidence threshold "
                   "off, or set tree nodes to 0")

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0.0

    @property
    def is_tree(self) -> bool:
        """True when each step drafts a token tree (tree_nodes > 0), not a chain."""
        return self.tree_nodes > 0

    @property
    def exactness(self) -> Exactness:
        """What this run guarantees about its output next to target-only decoding (see Exactness)."""
        if self.cutoff_mode != "truncate":
            return Exactness.NOT_GUARANTEED
        if not self.is_greedy:
            return Exactness.IN_LAW
        return Exactness.NEAR_TIES_MAY_FLIP if self.target_dtype in REDUCED_PRECISION else Exactness.UP_TO_ROUNDING

    @property
    def is_external(self) -> bool:
        """True when another engine ran this (a vLLM server): its steps carry no p, q, draws or phase times."""
        return self.engine != ""

    @property
    def is_lab_mode(self) -> bool:
        """True when any piece of the correct engine is switched off."""
        return not self.carryover or self.cutoff_mode != "truncate" or self.draft_temperature >= 0

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain values; `engine` and `engine_note` only when set (files read as before)."""
        values = dataclasses.asdict(self)
        for name in ("engine", "engine_note"):
            if not values[name]:
                del values[name]
        return values

    def replace(self, **changes: Any) -> "SpecConfig":
        return dataclasses.replace(self, **changes)


def resolve_target_dtype(choice: str, device_type: str) -> str:
    """The target's dtype: "auto" is bfloat16 on CUDA, float32 elsewhere (exact up to rounding, §4)."""
    if choice != "auto":
        return choice
    return "bfloat16" if device_type == "cuda" else "float32"


def resolve_cache(choice: str, device_type: str) -> str:
    """The cache kind a run uses: "auto" is static on CUDA (where its graphs pay), dynamic elsewhere."""
    if choice != "auto":
        return choice
    return "static" if device_type == "cuda" else "dynamic"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)
