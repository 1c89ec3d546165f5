"""What one forward costs on this machine, and what speculation can buy with it (torch-free).

Measured once when a pair loads on a GPU (engine/loading/cost_probe.py): one target token, one
draft token, and a verify of k + 1 tokens for each k, on the kernels the runs will use. With
c = a draft token / a target token and v_k = a verify of k + 1 tokens / a target token, the
i.i.d. model (engine/metrics.py) predicts a speedup of E(a, k) / (k c + v_k) at acceptance a.
Speculation pays only above a break-even acceptance; on a GPU where a small draft costs most
of a target token (both latency-bound) that break-even can sit near 1, and the page says so
before Run, naming the drafter that costs nothing per token (n-gram lookup).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from engine.metrics import expected_speedup, expected_tokens_per_step

BREAK_EVEN_STEPS = 40            # bisection steps on the acceptance: far below any shown precision
NGRAM_COST_RATIO = 0.0           # an n-gram lookup runs no forward: microseconds on the host


@dataclass(frozen=True)
class DeviceCosts:
    device: str                              # e.g. "NVIDIA H200" or "cpu"
    cache: str                               # the cache kind the runs use: "static" | "dynamic"
    graphs: bool                             # whether the forwards replay CUDA graphs
    target_token_ms: float                   # one target-only decoding forward
    draft_token_ms: float | None             # one draft forward (None: no draft model)
    verify_ms: tuple[tuple[int, float], ...]  # (k, one verify of k + 1 tokens) for each k measured
    capture_s: float = 0.0                   # graph capture at load, seconds (0 without graphs)

    @property
    def cost_ratio(self) -> float | None:
        """c: one draft token in target tokens."""
        return None if self.draft_token_ms is None else self.draft_token_ms / self.target_token_ms

    def verify_cost(self, k: int) -> float:
        """v_k: a verify of k + 1 tokens in target tokens (the nearest measured k)."""
        nearest_k, ms = min(self.verify_ms, key=lambda item: abs(item[0] - k))
        return ms / self.target_token_ms

    def step_ms(self, k: int, engine_ms: float = 0.0) -> float:
        """One step under the model: k draft tokens, a verify of k + 1 tokens (one target token when
        nothing was drafted) and `engine_ms` of the engine's own work outside the forwards."""
        verify = self.target_token_ms if k == 0 else self.verify_cost(k) * self.target_token_ms
        return k * (self.draft_token_ms or 0.0) + verify + engine_ms

    def tokens_per_s(self, alpha: float, ks: list[int], engine_ms: float = 0.0) -> float:
        """The i.i.d. model's tokens a second over steps drafting `ks`: E(alpha, k) tokens per step
        over its step_ms, summed over the steps (scripts/gpu_check.py compares it with a run's)."""
        tokens = sum(expected_tokens_per_step(alpha, k) for k in ks)
        return 1000.0 * tokens / sum(self.step_ms(k, engine_ms) for k in ks)

    @property
    def ks(self) -> list[int]:
        return [k for k, _ in self.verify_ms]

    def speedup(self, alpha: float, k: int, cost_ratio: float | None = None) -> float:
        """The i.i.d. model's speedup at acceptance alpha with k drafts, at these costs (the model
        drafter's c unless `cost_ratio` is given, e.g. the n-gram drafter's)."""
        c = self.cost_ratio if cost_ratio is None else cost_ratio
        return expected_speedup(alpha, k, c or 0.0, self.verify_cost(k))

    def best(self, alpha: float, cost_ratio: float | None = None) -> tuple[int, float]:
        """(k, speedup) of the fastest measured k at acceptance alpha."""
        return max(((k, self.speedup(alpha, k, cost_ratio)) for k in self.ks), key=lambda item: item[1])

    def break_even(self, cost_ratio: float | None = None) -> float | None:
        """The least acceptance at which some k beats target-only decoding (None: none ever does,
        not even with every draft accepted)."""
        if self.best(1.0, cost_ratio)[1] <= 1.0:
            return None
        low, high = 0.0, 1.0
        for _ in range(BREAK_EVEN_STEPS):
            middle = (low + high) / 2
            low, high = (low, middle) if self.best(middle, cost_ratio)[1] > 1.0 else (middle, high)
        return high

    def fitted(self) -> "DeviceCosts":
        """These costs with each verify on the least-squares line through all of them over k: a verify of k + 1
        tokens grows about linearly with k, and a few repeats per k scatter enough to move the best k between two
        loads of the same pair (k = 5 at 2.23x in one load of the default pair on a 2-core CPU, k = 3 at 1.99x in
        the next). Unchanged with fewer than two ks."""
        if len(self.verify_ms) < 2:
            return self
        ks = [k for k, _ in self.verify_ms]
        mean_k, mean_ms = sum(ks) / len(ks), sum(ms for _, ms in self.verify_ms) / len(ks)
        slope = (sum((k - mean_k) * (ms - mean_ms) for k, ms in self.verify_ms)
                 / sum((k - mean_k) ** 2 for k in ks))
        line = tuple((k, mean_ms + slope * (k - mean_k)) for k in ks)
        return dataclasses.replace(self, verify_ms=line)

    @classmethod
    def from_dict(cls, data: dict) -> "DeviceCosts":
        """The inverse of `to_dict` (a measurement saved by scripts/gpu_check.py, read back)."""
        return cls(device=data["device"], cache=data["cache"], graphs=data["graphs"],
                   target_token_ms=data["target_token_ms"], draft_token_ms=data["draft_token_ms"],
                   verify_ms=tuple(sorted((int(k), ms) for k, ms in data["verify_ms"].items())),
                   capture_s=data.get("capture_s", 0.0))

    def to_dict(self) -> dict:
        return {"device": self.device, "cache": self.cache, "graphs": self.graphs,
                "target_token_ms": self.target_token_ms, "draft_token_ms": self.draft_token_ms,
                "verify_ms": {str(k): ms for k, ms in self.verify_ms}, "capture_s": self.capture_s,
                "cost_ratio": self.cost_ratio, "verify_cost": {str(k): self.verify_cost(k) for k in self.ks}}
