"""The Lab's tree stage (issue #19): the same prompt as a chain (stage D) and as a token tree (stage T).

Side by side, from the two traces alone: what each target forward emitted, how many target forwards
the text took, what one verify forward read and cost, what the draft cost per step, and the speed;
then one sentence on what the tree bought and what it cost. The timelines and the tree of the selected
step are the Run tab's figures (specviz/figures/timeline.py, tree.py); specviz/lab/views.py places them.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from html import escape

from engine.lab import TREE_STAGE
from engine.metrics import step_costs
from engine.formats.trace import Trace
from specviz.figures.common import Figure, empty_figure
from specviz.figures.timeline import timeline_figure
from specviz.quantities import TOKENS_PER_STEP, Quantity, speed_note_html
from specviz.style import FigureStyle
from specviz.tokens import formatted

CHAIN_TITLE = "Chain (stage D)"


@dataclass(frozen=True)
class RunFacts:
    """What one run of the pair shows: the numbers both columns of the comparison hold."""

    tokens_per_forward: float | None      # accepted + 1 per step: tokens one target forward emitted
    target_forwards: int
    new_tokens: int
    verify_reads: float                   # mean tokens a verify forward read, steps after the first
    verify_ms: float | None               # mean verify forward, steps after the first
    draft_ms: float | None                # mean draft time per step, steps after the first
    tokens_per_s: float | None
    wall_s: float
    baseline_tokens_per_s: float | None = None      # the target alone on the same prompt, timed beside the run


def run_facts(trace: Trace) -> RunFacts:
    """The comparison's numbers for one trace, from its summary and step timings."""
    summary = trace.summary
    timed = trace.steps[1:] if len(trace.steps) > 1 else trace.steps
    costs = step_costs(trace.steps)
    reads = [step.kv_target.after_forward - step.kv_target.before for step in timed]      # no prompt prefill
    return RunFacts(summary.mean_accepted_length, summary.target_forwards, summary.new_tokens,
                    statistics.fmean(reads) if reads else 0.0, costs[1] if costs else None,
                    statistics.fmean(step.timing.draft for step in timed) if timed else None,
                    summary.tokens_per_s, summary.wall_s,
                    summary.baseline.tokens_per_s if summary.baseline is not None else None)


ROWS = (   # label (a named quantity carries its tooltip), the value's text, what it means
    (TOKENS_PER_STEP, lambda f: formatted(f.tokens_per_forward, "{:.2f}"),
     "accepted drafts (a tree's accepted path) + 1 recovered or bonus token, averaged over steps; one target "
     "forward each"),
    ("target forwards", lambda f: f"{f.target_forwards}", "one per step, for the same new tokens"),
    ("tokens a verify forward reads", lambda f: f"{f.verify_reads:.1f}",
     "pending tokens + the k drafts, or + every tree node (mean, steps after the first: the first also reads the "
     "prompt)"),
    ("one verify forward", lambda f: formatted(f.verify_ms, "{:.0f} ms"), "mean, steps after the first"),
    ("drafting per step", lambda f: formatted(f.draft_ms, "{:.0f} ms"), "mean, steps after the first"),
    ("speed", lambda f: formatted(f.tokens_per_s, "{:.1f} tok/s"), "as measured when recorded"),
    ("target alone", lambda f: formatted(f.baseline_tokens_per_s, "{:.1f} tok/s"),
     "target-only decoding of the same prompt, timed beside the run: how busy the machine was"),
)


def tree_comparison_html(chain: Trace | None, tree: Trace) -> str:
    """The two runs' numbers side by side and the sentence; without a chain run, the tree's column alone."""
    facts = {"chain": run_facts(chain) if chain is not None and chain.steps else None, "tree": run_facts(tree)}
    head = (f"<th>{escape(CHAIN_TITLE)}<br><small>k = {chain.config.k}</small></th>" if facts["chain"]
            else "<th>chain</th>")
    head += (f"<th>Tree (stage T)<br><small>up to {tree.config.tree_nodes} nodes, {tree.config.tree_branch} children "
             f"each, at most {tree.config.k} deep</small></th>")
    body = "".join(
        f"<tr><th>{label.html() if isinstance(label, Quantity) else escape(label)}<br><small>{escape(meaning)}</small></th>"
        f"<td>{escape(text(facts['chain'])) if facts['chain'] else '–'}</td>"
        f"<td>{escape(text(facts['tree']))}</td></tr>"
        for label, text, meaning in ROWS)
    device = tree.config.device or "this machine"
    return (f"<div class='sv-table-wrap'><table class='sv-table sv-lab-tree-table'><thead><tr><th></th>{head}</tr>"
            f"</thead><tbody>{body}</tbody></table></div>"
            f"<div class='sv-note sv-lab-why' id='sv-lab-tree-sentence'>"
            f"{escape(tree_sentence(facts['chain'], facts['tree']))} "
            f"<span class='sv-muted'>(Recorded one after the other on {escape(device)}, so the times are that "
            f"machine's; the 'target alone' row shows how fast the target ran by itself beside each run: where "
            f"those differ, so did the machine's load.)</span></div>{speed_note_html()}")


def tree_sentence(chain: RunFacts | None, tree: RunFacts) -> str:
    """What the tree bought (tokens per forward, forwards saved) and what it cost (verify and draft time)."""
    if chain is None:
        return "No chain run (stage D) to compare with: run the lab."
    bought = (f"The tree bought {TOKENS_PER_STEP.symbol} = {formatted(tree.tokens_per_forward, '{:.2f}')} tokens per "
              f"step (one target forward each) instead of {formatted(chain.tokens_per_forward, '{:.2f}')} "
              f"({tree.target_forwards} target forwards instead of "
              f"{chain.target_forwards} for {tree.new_tokens} tokens)")
    cost = (f"it cost verify forwards reading {tree.verify_reads:.1f} tokens instead of {chain.verify_reads:.1f} "
            f"({formatted(tree.verify_ms, '{:.0f} ms')} instead of {formatted(chain.verify_ms, '{:.0f} ms')}) and "
            f"{formatted(tree.draft_ms, '{:.0f} ms')} of drafting per step instead of {formatted(chain.draft_ms, '{:.0f} ms')}")
    if tree.tokens_per_s is None or chain.tokens_per_s is None:
        return f"{bought}; {cost}."
    speeds = f"so it ran at {tree.tokens_per_s:.1f} tokens/s against the chain's {chain.tokens_per_s:.1f}"
    if tree.baseline_tokens_per_s and chain.baseline_tokens_per_s:      # each against the target alone beside it
        mine, theirs = tree.tokens_per_s / tree.baseline_tokens_per_s, chain.tokens_per_s / chain.baseline_tokens_per_s
        return (f"{bought}; {cost}, {speeds}; against the target alone timed beside each (which evens out the "
                f"machine's load), the tree ran {mine:.2f}× and the chain {theirs:.2f}×: "
                + ("the tree paid off." if mine > theirs else "the dearer steps cost more than the saved forwards."))
    faster = "the tree was faster overall" if tree.tokens_per_s > chain.tokens_per_s else \
        "the chain was faster overall: the dearer steps cost more time than the saved forwards"
    return f"{bought}; {cost}, {speeds}: {faster}."


def chain_timeline(chain: Trace | None, tree: Figure, style: FigureStyle = FigureStyle()) -> tuple[Figure, Figure]:
    """Stage D's timeline, titled as the chain the tree is measured against, drawn above the tree's
    timeline `tree`, and the tree's timeline again: both on the same step axis (the union of their ranges), so
    step i of one sits over step i of the other. New figures: `tree` is left as it was."""
    if chain is None or not chain.steps:
        return empty_figure(CHAIN_TITLE, "No chain run (stage D) to compare with: run the lab.", style), tree
    figure = timeline_figure(chain, selected_step=None, style=style,
                             title=f"{escape(CHAIN_TITLE)}: the same prompt, k = {chain.config.k}")
    ranges = [drawn.spec.get("xaxis", {}).get("range") for drawn in (figure, tree)]
    if not all(ranges):
        return figure, tree
    shared = [min(low for low, _ in ranges), max(high for _, high in ranges)]
    return figure.with_layout(xaxis={"range": shared}), tree.with_layout(xaxis={"range": shared})


def is_tree_stage(key: str) -> bool:
    return key == TREE_STAGE.key
