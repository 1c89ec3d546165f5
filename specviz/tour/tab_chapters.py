"""Chapters 6-9, on the other tabs: the Lab's four stages, Explore's fastest k and gap to the model, a token
tree and its gather (the Lab's stage T), and the race. Each returns None when the page lacks its recording."""

from __future__ import annotations

from engine.formats.race import Race, tokens_per_s
from engine.formats.sweep_reader import SweepTable
from engine.lab import TREE_STAGE
from engine.records import StepRecord
from specviz.explore.gap import gap_shares
from specviz.explore.views import pick_temperature
from specviz.figures.gap import TITLE as GAP_TITLE
from specviz.lab.views import LabSet, difference
from specviz.tour.chapter import Chapter, View, quoted

STAGES = ("A", "B", "C")
A_KEEPS = "Rejected drafts stay in both KV caches"     # the Lab's own words for stage A (engine/lab.py)
# What each tab says while it shows its recording (specviz/lab/tab.py, specviz/explore/tab.py, specviz/race/tab.py).
LAB_RECORDED = ("#sv-lab-status", "recorded lab runs")
SWEEP_RECORDED = ("#sv-sweep-status", "the recorded sweep")
RACE_RECORDED = ("#sv-race-view", "Recorded earlier")
SHARE_NAMES = {"acceptance": "acceptance (the runs' τ against the model's E)",
               "outside": "time outside the steady forwards (mostly step 0's prefill)",
               "baseline_prefill": "target-only's own prefill"}


def lab_stages(lab: LabSet | None) -> Chapter | None:
    """(6) The Lab's stages A-D: where each broken stage's output leaves the target's own."""
    reference = lab.reference if lab is not None else None
    if reference is None or any(key not in lab.traces for key in STAGES):
        return None
    diffs = {key: difference(lab.traces[key], reference) for key in STAGES}
    if any(diff.identical or diff.step is None for diff in diffs.values()) or not difference(reference, reference).identical:
        return None
    first = diffs["A"]
    return Chapter(
        "The Lab: four stages of the engine", View("lab", "#sv-lab-verdict", lab_stage="A", lab_step=first.step,
                                                    focus="#sv-lab-verdict .sv-lab-diff", shows=LAB_RECORDED),
        "The Lab runs one prompt greedily while the engine is built: in A {a_keeps}, B adds the carryover, C "
        "zero-fills the rejected rows and D cuts them. A's output leaves the target's own at step {a} (the "
        "outlined lines, and the vermillion line on the timeline below), B's at step {b} and C's at step {c}; D's "
        "never does. Only D, which removes the rows, is exact.",
        "Where A's output leaves the target's own, which token did A write, and what does the target alone write "
        "there?",
        "A wrote {got} where the target alone writes {expected}: a stale row changed the target's choice.",
        {"a_keeps": A_KEEPS[0].lower() + A_KEEPS[1:], "a": str(first.step), "b": str(diffs["B"].step),
         "c": str(diffs["C"].step),
         "got": quoted(first.got or ""), "expected": quoted(first.expected or "")})


def explore_gap(table: SweepTable | None) -> Chapter | None:
    """(7) Explore: the sweep's fastest k at the temperature Explore opens on, and the gap between the model and
    the measured point there (the title names no temperature: the chapter reads one)."""
    temperature = pick_temperature(table, None)
    shares = gap_shares(table, temperature) if temperature is not None else []
    if not shares:
        return None
    best = max(shares, key=lambda share: share.measured)
    parts = {name: getattr(best, name) for name in SHARE_NAMES}
    largest = max(parts, key=lambda name: abs(parts[name]))
    return Chapter(
        "Explore: the fastest k and the gap to the model", View("explore", "#sv-gap", shows=SWEEP_RECORDED),
        "The outlined chart, {title}, has one bar per k at T = {temperature} of a recorded sweep: there the "
        "fastest was k = {k}, {measured}× target-only's speed, with τ = {tau} tokens per step. The model at the "
        "measured costs predicts {model}× there; each bar splits the {gap}× between them into three shares.",
        "At k = {k}, which share of the gap is the largest?",
        "{largest}, {value}×. The three shares, {acceptance}× + {outside}× + {baseline_prefill}×, add up to the "
        "{gap}× gap (each rounded).",
        {"title": f"\u201c{GAP_TITLE.split(':')[0]}\u201d", "temperature": f"{temperature:g}", "k": str(best.k),
         "measured": f"{best.measured:.2f}",
         "tau": f"{best.tokens_per_step:.2f}", "model": f"{best.model:.2f}", "gap": f"{best.gap:.2f}",
         "largest": SHARE_NAMES[largest].capitalize(), "value": f"{parts[largest]:.2f}",
         **{name: f"{value:.2f}".replace("-", "\u2212") for name, value in parts.items()}})


def tree_gather(lab: LabSet | None) -> Chapter | None:
    """(8) A token tree: one target forward over every node, then the gather of the accepted path's rows."""
    trace = lab.traces.get(TREE_STAGE.key) if lab is not None else None
    if trace is None:
        return None

    def moves(step: StepRecord) -> bool:
        tree = step.tree
        return (tree is not None and step.kv_target.before > 0 and len(tree.path) > 0
                and tree.path != tuple(range(len(tree.path))))
    step = next((s for s in trace.steps if moves(s)), None)
    if step is None:
        return None
    kv, kept = step.kv_target, len(step.tree.path)
    pending = kv.after_cutoff - kv.before - kept
    return Chapter(
        "A token tree and its gather", View("lab", "#sv-lab-tree", lab_stage=TREE_STAGE.key, lab_step=step.index,
                                                 focus="#sv-lab-tree .draglayer .x2y2 .nsewdrag", shows=LAB_RECORDED),
        "Stage T drafts a tree of up to {budget} candidates instead of a line, and one target forward checks every "
        "node, each seeing the committed text and its own ancestors only. At step {step} the walk accepted a path "
        "of {kept} of the {nodes} nodes; the gather copies their rows into place from row {first} on, right after "
        "{pending_rows} (committed tokens this forward fed before the nodes), and drops the other {cut}.",
        "How many rows does the target's cache hold after step {step}'s gather?",
        "{after}: the {before} rows before the step, {pending} pending, and the {kept} kept nodes.",
        {"budget": str(trace.config.tree_nodes), "step": str(step.index), "kept": str(kept),
         "nodes": str(len(step.tree.nodes)), "cut": str(kv.cutoff), "after": str(kv.after_cutoff),
         "before": str(kv.before), "pending": str(pending), "first": str(kv.before + pending),
         "pending_rows": "the pending row" if pending == 1 else f"the {pending} pending rows"})


def race(recorded: Race | None) -> Chapter | None:
    """(9) The race: the same tokens from fewer target forwards, and who finishes first."""
    if recorded is None or recorded.speedup is None or not recorded.speculative.forwards:
        return None
    slow, fast = recorded.target_only, recorded.speculative
    count = len(fast.token_ids)
    same = ", the same ones," if recorded.identical else ""
    return Chapter(
        "The race", View("race", "#sv-race-view", shows=RACE_RECORDED),
        "The same prompt, decoded twice on the same models: the target alone needs one forward per token, "
        "{slow_forwards} forwards for {slow_tokens} tokens. The speculative lane writes {fast_tokens} tokens{same} "
        "with {fast_forwards} target forwards, and when the replay ends it has taken {fast_s} s against {slow_s} s: "
        "{speedup}× as fast.",
        "How many tokens does each target forward of the speculative lane give, on average?",
        "{per}: {fast_tokens} tokens over {fast_forwards} forwards (its speed, {fast_rate} tokens/s, is what the lane "
        "shows at the end).",
        {"slow_forwards": str(slow.forwards), "slow_tokens": str(len(slow.token_ids)), "same": same,
         "fast_tokens": str(count), "fast_forwards": str(fast.forwards), "fast_s": f"{fast.wall_s:.1f}",
         "slow_s": f"{slow.wall_s:.1f}", "speedup": f"{recorded.speedup:.2f}", "per": f"{count / fast.forwards:.1f}",
         "fast_rate": f"{tokens_per_s(count, fast.wall_s):.1f}"})


