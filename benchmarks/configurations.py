"""What bench.py measures: a plain list of configurations, each a row of the table.

A configuration names the pair it runs on (`PAIRS`: which dtypes and kernels), how it
decodes (`kind`: SpecViz's engine, SpecViz's target-only loop, or transformers'
`generate()`, target-only or assisted), the SpecConfig fields it changes, and whether the
default run includes it (`default=True`) or only `--grid`. To measure something new, add
an entry; the table, the JSON and the figure pick it up. Speedups are computed against
the two `REFERENCE_*` rows, which always run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ENGINE, TARGET_ONLY, HF_TARGET_ONLY, HF_ASSISTED, HF_ASSISTED_DEFAULTS = (
    "engine", "target-only", "hf-target-only", "hf-assisted", "hf-assisted-defaults")

# pair key -> load_pair options; "plain": stock float32 kernels on both sides (what transformers
# gets); "fast": SpecViz's default on a CPU (int8 draft, prepacked float32 target).
PAIRS = {
    "plain": {"draft_dtype": "float32", "target_dtype": "float32", "prepack": False},
    "bf16-draft": {"draft_dtype": "bfloat16", "target_dtype": "float32", "prepack": False},
    "fast": {"draft_dtype": "int8", "target_dtype": "float32"},
    # the default's int8 draft beside a bfloat16 prepacked target where the CPU computes bfloat16 natively
    # (engine/runtime/cpu/native_bf16.py); elsewhere the loader keeps float32 and the JSON says why
    "bf16-target": {"draft_dtype": "int8", "target_dtype": "bfloat16-native"},
}
DERIVED = "fp32-draft-fast-target"      # the plain pair's float32 draft on the fast pair's prepacked target
# the bf16-target pair's own target beside an int4 copy of the plain pair's draft (half the int8 draft's bytes, a
# kernel near the memory's speed): the page's "Use the fastest here" where the int4 probe passes (issue #40). Built
# from loaded pairs, not loaded: a fourth pair's target did not fit in 24 GiB beside the other three.
INT4_DERIVED = "int4-draft-bf16-target"

REFERENCE_STOCK = "target-only, stock fp32 target"
REFERENCE_SAME_KERNELS = "target-only, prepacked fp32 target"
ASSISTED_SAME_K = "transformers assisted (stock fp32 pair), k={k}"
FAST = "SpecViz fast (int8 draft, prepacked fp32 target)"
# Its greedy rows are checked against target-only decoding of the same bfloat16 target, not the stock fp32 one.
REFERENCE_BF16_TARGET = "target-only, prepacked bf16 target (where native)"
BF16_TARGET = "SpecViz, int8 draft, prepacked bf16 target (where native)"
INT4_BF16_TARGET = "SpecViz, int4 draft, prepacked bf16 target (where native)"


@dataclass(frozen=True)
class Configuration:
    name: str                      # may hold {k}: the run's --k
    pair: str                      # a key of PAIRS, DERIVED or INT4_DERIVED
    kind: str = ENGINE
    changes: dict = field(default_factory=dict)   # SpecConfig fields; "k" may be a number
    detailed_trace: bool = True    # the recorder: full step records (on) or ids and counts only (off)
    default: bool = False          # in `python bench.py` without --grid
    default_where_native_bf16: bool = False   # also in it on a CPU that computes bfloat16 natively (issue #40)
    headline: bool = False         # a bar of the figure (bench.py's BEST is the closing note's line)

    def label(self, k: int) -> str:
        return self.name.format(k=k)


CONFIGURATIONS: list[Configuration] = [
    Configuration(REFERENCE_STOCK, "plain", TARGET_ONLY, default=True),
    Configuration(REFERENCE_SAME_KERNELS, "fast", TARGET_ONLY, default=True, headline=True),
    Configuration("target-only (transformers generate)", "plain", HF_TARGET_ONLY),
    Configuration(ASSISTED_SAME_K, "plain", HF_ASSISTED, default=True, headline=True),
    Configuration("transformers assisted, its defaults", "plain", HF_ASSISTED_DEFAULTS),
    Configuration("transformers assisted, bf16 draft, k={k}", "bf16-draft", HF_ASSISTED),
    Configuration("SpecViz, stock fp32 pair, recorder on, k={k}", "plain", headline=True),
    Configuration("SpecViz, stock fp32 pair, recorder off, k={k}", "plain", detailed_trace=False),
    Configuration("SpecViz, stock fp32 pair, adaptive k", "plain", changes={"adaptive_k": True}),
    Configuration("SpecViz, n-gram drafter", "plain", changes={"drafter": "ngram"}),
    Configuration("SpecViz, bf16 draft, k={k}", "bf16-draft"),
    Configuration("SpecViz: fp32 draft, prepacked fp32 target, k={k}", DERIVED, headline=True),
    Configuration(FAST + ", k=3", "fast", changes={"k": 3}),
    Configuration(FAST + ", k={k}", "fast", default=True, headline=True),
    Configuration(FAST + ", k=8", "fast", changes={"k": 8}),
    # drafting stops early once the draft's top probability falls below the threshold (2026-11-23: no gain)
    Configuration(FAST + ", k={k}, confidence 0.3", "fast", changes={"confidence_threshold": 0.3}),
    Configuration(FAST + ", k=8, confidence 0.5", "fast", changes={"k": 8, "confidence_threshold": 0.5}),
    Configuration(FAST + ", recorder off, adaptive k", "fast", changes={"adaptive_k": True}, detailed_trace=False),
    Configuration(FAST + ", adaptive k", "fast", changes={"adaptive_k": True}, default=True, headline=True),
    Configuration(REFERENCE_BF16_TARGET, "bf16-target", TARGET_ONLY, default_where_native_bf16=True),
    Configuration(BF16_TARGET + ", k={k}", "bf16-target", default_where_native_bf16=True, headline=True),
    Configuration(INT4_BF16_TARGET + ", k={k}", INT4_DERIVED, default_where_native_bf16=True, headline=True),
    # the cheaper int4 draft may suit another k (--grid --only "int4 draft": one run, every k side by side)
    *(Configuration(f"{INT4_BF16_TARGET}, k={k}", INT4_DERIVED, changes={"k": k}) for k in (3, 4, 7)),
    *(Configuration(f"{FAST}, tree {nodes} nodes x{branch}, k={{k}}", "fast",       # token trees, depth k
                    changes={"tree_nodes": nodes, "tree_branch": branch}) for nodes, branch in ((8, 2), (16, 3), (32, 4))),
]


# On a GPU (bench.py --device cuda): eager PyTorch against the captured graphs of a static cache
# (engine/runtime/), each speculative row on the graphs unless named eager; both models bfloat16.
GPU_PAIRS = {"gpu": {"device": "cuda", "draft_dtype": "bfloat16", "target_dtype": "bfloat16"}}
GPU_REFERENCE_EAGER = "target-only, eager (dynamic cache)"
GPU_REFERENCE_GRAPHS = "target-only, CUDA graphs (static cache)"
GPU_ASSISTED_SAME_K = "transformers assisted (eager), k={k}"
GPU_FAST = "SpecViz, CUDA graphs"
GRAPHS, EAGER = {"cache": "static"}, {"cache": "dynamic"}

GPU_CONFIGURATIONS: list[Configuration] = [
    Configuration(GPU_REFERENCE_EAGER, "gpu", TARGET_ONLY, changes=EAGER, default=True),
    Configuration(GPU_REFERENCE_GRAPHS, "gpu", TARGET_ONLY, changes=GRAPHS, default=True, headline=True),
    Configuration("target-only (transformers generate, eager)", "gpu", HF_TARGET_ONLY, default=True),
    Configuration(GPU_ASSISTED_SAME_K, "gpu", HF_ASSISTED, default=True, headline=True),
    Configuration("SpecViz, eager (dynamic cache), k={k}", "gpu", changes=EAGER, default=True),
    Configuration(GPU_FAST + ", k={k}", "gpu", changes=GRAPHS, default=True, headline=True),
    Configuration(GPU_FAST + ", recorder off, k={k}", "gpu", changes=GRAPHS, detailed_trace=False),
    Configuration(GPU_FAST + ", n-gram drafter, k={k}", "gpu", changes={**GRAPHS, "drafter": "ngram"}, default=True,
                  headline=True),
    Configuration(GPU_FAST + ", adaptive k", "gpu", changes={**GRAPHS, "adaptive_k": True}, default=True),
    Configuration(GPU_FAST + ", tree 16 nodes x3, k={k}", "gpu", changes={**GRAPHS, "tree_nodes": 16, "tree_branch": 3}),
]


@dataclass(frozen=True)
class Suite:
    """One device's benchmark: its configurations and pairs, the two references every row is
    divided by, the assisted row of the same k, the closing note's row, and their names in words."""

    device: str
    configurations: list[Configuration]
    pairs: dict[str, dict]
    reference_stock: str             # what speculation and the kernels buy together is measured against it
    reference_same_kernels: str      # what speculation alone buys, on the same kernels
    assisted_same_k: str
    best: str                        # the closing note's row (may hold {k})
    stock_words: str
    same_words: str
    theory_on_same_kernels: bool = False   # the theory's c and v in units of the same-kernels target step


SUITES = {
    "cpu": Suite("cpu", CONFIGURATIONS, PAIRS, REFERENCE_STOCK, REFERENCE_SAME_KERNELS, ASSISTED_SAME_K,
                 FAST + ", k={k}", "stock fp32 target-only", "target-only on the same kernels"),
    "cuda": Suite("cuda", GPU_CONFIGURATIONS, GPU_PAIRS, GPU_REFERENCE_EAGER, GPU_REFERENCE_GRAPHS,
                  GPU_ASSISTED_SAME_K, GPU_FAST + ", k={k}", "eager target-only", "target-only on the same CUDA graphs",
                  theory_on_same_kernels=True),
}


def selected(grid: bool, only: list[str], k: int, suite: Suite = SUITES["cpu"],
             native_bf16: bool = False) -> list[Configuration]:
    """The configurations a run measures: the default ones (with the bfloat16 target's where `native_bf16`: the
    CPU computes bfloat16 natively, so that target is the fastest exact one there), or all with --grid, narrowed by
    --only (parts of names); the two target-only references always run."""
    chosen = [c for c in suite.configurations if grid or c.default or (native_bf16 and c.default_where_native_bf16)]
    if only:
        chosen = [c for c in chosen if any(part in c.label(k) for part in only)]
    references = [c for c in suite.configurations if c.name in (suite.reference_stock, suite.reference_same_kernels)]
    return references + [c for c in chosen if c not in references]
