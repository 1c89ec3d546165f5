"""The race as HTML: two lanes side by side, target-only and speculative, each with its clock,
token count, tokens/s and a bar, and the tokens as they were produced. Rendered finished;
specviz/race/player.py replays it in the browser from the times kept in `data-t` attributes.

In the speculative lane every step (one target forward) is one box holding the tokens it
emitted: accepted drafts, then the target's recovered or bonus token, all appearing together
when the forward ends. That box is why the lane runs ahead: one forward, several tokens.
"""

from __future__ import annotations

from html import escape

from engine.config import NGRAM_DRAFTER
from engine.formats.race import Race, tokens_per_s
from specviz.quantities import SPEED_NOTE
from specviz.style import LABELS

KINDS = ("accepted", "recovered", "bonus")


def race_html(race: Race | None, note: str = "") -> str:
    """The whole view: verdict, legend, both lanes and how it was measured; `note` says where the race came from."""
    if race is None:
        return ("<div class='sv-race sv-race-empty'>No race recorded yet: choose a prompt and press "
                "<b>Race</b>.</div>")
    winner = _winner(race)
    legend = "".join(f"<span class='sv-rt sv-{kind}'>{escape(LABELS[kind])}</span>" for kind in KINDS)
    source = f"<p class='sv-race-source'>{escape(note)}</p>" if note else ""
    return (f"<div class='sv-race' data-state='final' data-winner='{winner}'>{source}"
            f"<p class='sv-race-pending'>Replaying at the recorded pace (the clocks show recorded seconds): "
            f"which lane finishes first?</p><p class='sv-race-verdict'>{verdict(race)}</p>"
            f"<div class='sv-race-lanes'>{_target_lane(race, winner)}{_speculative_lane(race, winner)}</div>"
            f"<div class='sv-race-legend'>Speculative lane: each box is one step, one target forward; "
            f"{legend}</div><p class='sv-race-how'>{escape(measured_how(race))}</p></div>")


def _winner(race: Race) -> str:
    """The lane that finished first (a tie goes to the speculative lane)."""
    return "speculative" if race.speculative.wall_s <= race.target_only.wall_s else "target-only"


def verdict(race: Race) -> str:
    """Who finished first, by how much, and why (HTML)."""
    slow, fast = race.target_only, race.speculative
    count_fast = len(fast.token_ids)
    if race.speedup is None:
        return "One lane produced no tokens, so there is no winner."
    if _winner(race) == "speculative":
        lead = (f"<b>Speculative decoding finished first</b>: {count_fast} tokens in {fast.wall_s:.1f} s against "
                f"{slow.wall_s:.1f} s, <b>{race.speedup:.2f}×</b> the tokens per second.")
    else:
        lead = (f"<b>Target-only decoding finished first</b>: speculative decoding reached "
                f"{1 / race.speedup:.2f}× its time per token ({fast.wall_s:.1f} s against {slow.wall_s:.1f} s).")
    per_forward = count_fast / fast.forwards if fast.forwards else 0.0
    why = (f" Target-only needs one target forward per token ({slow.forwards} forwards); speculative decoding "
           f"needed {fast.forwards}, {per_forward:.2f} tokens per forward, paying for the drafts on top.")
    same = (" Both lanes wrote the same tokens." if race.identical
            else f" The texts differ: {race.config.exactness.note}")
    return lead + escape(why) + escape(same)


def measured_how(race: Race) -> str:
    config = race.config
    drafter = "n-gram prompt lookup" if config.drafter == NGRAM_DRAFTER else f"draft model {config.draft or 'draft'}"
    mode = "greedy" if config.is_greedy else f"temperature {config.temperature:g}, seed {config.seed}"
    warm = (f" Before the clocks started, both lanes first decoded {race.warmup_tokens} tokens as a warm-up, so "
            "one-time costs (the first call of each kernel, memory set-up) count in neither."
            if race.warmup_tokens else "")
    return (f"Target {config.target or 'target'}, {drafter}, k = {config.k}{' (adaptive)' if config.adaptive_k else ''}"
            f", {mode}, up to {config.max_new_tokens} new tokens. Run one after the other on the same loaded models "
            f"and the same machine; each clock starts before the prompt is read (prefill), and the replay shows "
            f"every token at the time it was produced.{warm} {SPEED_NOTE}")


def _lane(name: str, title: str, subtitle: str, wall_s: float, count: int, forwards: int, body: str,
          winner: str) -> str:
    rate = tokens_per_s(count, wall_s)
    place = "finished first" if name == winner else "finished second"
    return (f"<div class='sv-lane' data-lane='{name}' data-wall='{wall_s:.6f}' data-total='{count}' "
            f"data-shown='{count}'><div class='sv-lane-head'><b>{escape(title)}</b>"
            f"<span class='sv-lane-place'>{place}</span><br><span class='sv-lane-sub'>{escape(subtitle)}</span></div>"
            f"<div class='sv-lane-stats'><span><span class='sv-clock'>{wall_s:.1f}</span> s</span>"
            f"<span><span class='sv-count'>{count}</span> / {count} tokens</span>"
            f"<span><span class='sv-rate'>{'–' if rate is None else f'{rate:.1f}'}</span> tok/s</span>"
            f"<span><span class='sv-forwards'>{forwards}</span> target forwards</span></div>"
            f"<div class='sv-lane-bar'><div class='sv-lane-fill' style='width:100%'></div></div>"
            f"<div class='sv-lane-text'>{body}</div></div>")


def _target_lane(race: Race, winner: str) -> str:
    lane = race.target_only
    body = "".join(f"<span class='sv-rt sv-plain' data-t='{timed.t_s:.6f}' data-n='1' data-f='1'>"
                   f"{escape(timed.token.text)}</span>" for timed in lane.tokens)
    return _lane("target-only", "Target-only", "one target forward per token", lane.wall_s, len(lane.tokens),
                 lane.forwards, body, winner)


def _speculative_lane(race: Race, winner: str) -> str:
    lane = race.speculative
    boxes = []
    for index, step in enumerate(lane.steps):
        tokens = "".join(f"<span class='sv-rt sv-{token.kind}'>{escape(token.text)}</span>" for token in step.tokens)
        made = step.tokens[-1].kind if step.tokens[-1].kind != "accepted" else "no target token (the run ended)"
        title = f"step {index}: {step.accepted} accepted draft{'s' if step.accepted != 1 else ''} + {made}"
        boxes.append(f"<span class='sv-rstep' data-t='{step.t_s:.6f}' data-n='{len(step.tokens)}' data-f='1' "
                     f"title='{escape(title)}'>{tokens}</span>")
    config = race.config
    drafter = "n-gram lookup drafts" if config.drafter == NGRAM_DRAFTER else "the draft model drafts"
    return _lane("speculative", "Speculative", f"{drafter} k = {config.k}, one target forward checks them",
                 lane.wall_s, len(lane.token_ids), lane.forwards, "".join(boxes), winner)
