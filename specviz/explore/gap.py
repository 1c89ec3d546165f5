"""Why the measured speedups sit below the model at the measured costs, split into shares (issue #27).

The theory chart's "model at the measured costs" is Leviathan et al.'s E / (k·c + v) with each k's own
measured draft cost c and verify cost v (units of one target-only decoding forward) and the
temperature's expected acceptance α. A measured point differs from it in three ways, taken in turn so
the shares add up exactly to model − measured (all in × of target-only speed):

1. **acceptance**: the runs emitted τ tokens per step, not the model's E(α, k): τ / (k·c + v) instead.
2. **time outside the steady forwards**: a step after the first costs k·c + v; the speculative run's wall
   time also holds step 0 (it prefills the prompt through both models), the engine's work between
   forwards (sampling, recording) and the last steps' shorter drafts. Its tokens/s against target-only's
   steady speed (1000 / target_token_ms) is what is left.
3. **target-only's own prefill**: the measured speedup divides by target-only's tokens/s, whose wall
   time includes its own prompt prefill; that makes target-only slower than its steady forwards, so it
   gives some of the gap back (a negative share).

The draft's carryover (the recovered token, or the last draft and the bonus) is fed in the draft's first
drafting forward of each step, so its time is already inside the measured draft cost c: no share of its
own. A sweep run records the draft and verify times of the steps after the first, not step 0's time or the
engine's time between forwards apart, so share 2 holds both (docs/architecture.md §3 says how large each
is in the bundled runs: step 0's prefill is nearly all of it).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from engine.formats.sweep_reader import SweepTable
from engine.metrics import expected_speedup, expected_tokens_per_step
from specviz.quantities import shown_alpha

CARRYOVER_WORDS = ("The draft's carryover (the recovered token, or its last draft and the bonus) is fed in its first "
                   "drafting forward of each step, so its time is already inside the measured draft cost: it takes no "
                   "share of the gap.")


@dataclass(frozen=True)
class GapShares:
    """One k at one temperature: the model, the measured speedup and the three shares between them
    (each in × of target-only; positive shares pull the measured point below the model)."""

    k: int
    model: float                     # E(α, k) / (k·c + v), this k's measured c and v
    measured: float                  # the cell's speedup: mean tokens/s over mean target-only tokens/s
    tokens_per_step: float           # τ, measured
    expected_tokens: float           # E(α, k), the model's
    outside_fraction: float          # of the speculative run's time: outside the steady forwards
    prefill_fraction: float          # of target-only's time: its own prefill (above its steady forwards)
    acceptance: float
    outside: float
    baseline_prefill: float          # ≤ 0 when target-only paid a prefill

    @property
    def gap(self) -> float:
        return self.model - self.measured


def gap_shares(table: SweepTable | None, temperature: float) -> list[GapShares]:
    """The shares of every chain cell at `temperature` that recorded its costs (empty when the sweep did not:
    older sweeps, or an n-gram drafter with no α)."""
    if table is None or temperature not in table.temperatures:
        return []
    fit = table.theory(temperature)
    if fit is None:
        return []
    shares = []
    for cell in table.at(temperature):
        one_token = [run.target_token_ms for run in table.runs_at(cell.k, temperature, cell.tree_nodes)
                     if run.target_token_ms]
        if cell.draft_cost is None or cell.verify_cost is None or cell.mean_accepted_length is None or not one_token:
            continue
        step_cost = cell.k * cell.draft_cost + cell.verify_cost           # in target-only forwards
        at_measured_tau = cell.mean_accepted_length / step_cost if step_cost > 0 else 0.0
        if not 0 < at_measured_tau < math.inf:     # a cell no model can be split against (an edited file's zeros)
            continue
        alpha = shown_alpha(fit.alpha)              # the α the page shows (specviz/quantities.py)
        expected = expected_tokens_per_step(alpha, cell.k)
        model = expected_speedup(alpha, cell.k, cell.draft_cost, cell.verify_cost)
        steady = cell.tokens_per_s * statistics.fmean(one_token) / 1000.0   # over target-only's steady speed
        shares.append(GapShares(
            k=cell.k, model=model, measured=cell.speedup, tokens_per_step=cell.mean_accepted_length,
            expected_tokens=expected, outside_fraction=1.0 - steady / at_measured_tau,
            prefill_fraction=1.0 - cell.baseline_tokens_per_s * statistics.fmean(one_token) / 1000.0,
            acceptance=model - at_measured_tau, outside=at_measured_tau - steady,
            baseline_prefill=steady - cell.speedup))
    return shares


def gap_sentence(shares: list[GapShares], temperature: float) -> str:
    """Where the gap goes at one temperature, in plain words with the ranges over k."""
    if not shares:
        return ("This sweep did not record the draft and verify costs per run, so the gap to the model cannot be "
                "split here.")

    def span(values: list[float], fmt: str) -> str:
        low, high = min(values), max(values)
        text = fmt.format(low) if abs(high - low) < 0.005 else f"{fmt.format(low)} to {fmt.format(high)}"
        return text.replace("-", "−")                        # a minus sign, not a hyphen

    gaps = [share.gap for share in shares]
    outside = [share.outside for share in shares]
    where = (f"{span(gaps, '{:.2f}×')} below" if min(gaps) > 0
             else f"off (model − measured: {span(gaps, '{:+.2f}×')})")
    return (f"At T = {temperature:g} the measured points sit {where} the model at the measured costs. At each k "
            "three shares add up to that gap (the bars stack them). Time outside the steady forwards takes "
            f"{span(outside, '{:.2f}×')}: {span([100 * s.outside_fraction for s in shares], '{:.0f}')} % of each "
            "speculative run went to step 0's prefill of the prompt through both models (which the model, counting "
            "steps after the first, leaves out), the engine's work between forwards and the last steps' shorter "
            f"drafts. {_outside_compared(shares)} Acceptance adds {span([s.acceptance for s in shares], '{:+.2f}×')} "
            "(the runs' τ against the model's E(α, k); negative where they accepted more). Target-only paid its own "
            f"prefill too ({span([100 * s.prefill_fraction for s in shares], '{:.0f}')} % of its time), which gives "
            f"back {span([-s.baseline_prefill for s in shares], '{:.2f}×')}. {CARRYOVER_WORDS}")


def _outside_compared(shares: list[GapShares]) -> str:
    """How the time-outside share compares with the whole gap and with the other two shares, counted over k (it
    can exceed the gap: the other shares may give some back)."""
    count = len(shares)
    largest = sum(abs(s.outside) >= max(abs(s.acceptance), abs(s.baseline_prefill)) for s in shares)
    beyond = sum(s.outside > s.gap for s in shares)
    said = f"It is the largest of the three at {_of(largest, count)}"
    if beyond:
        said += (f", and more than the whole gap at {_of(beyond, count)}, where acceptance or target-only's prefill "
                 "gives some back")
    return said + "."


def _of(part: int, whole: int) -> str:
    return "every k" if part == whole else f"{part} of the {whole} k's"
