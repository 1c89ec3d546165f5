"""Step detail: one step's drafts against the target's choices, as escaped HTML.

Answers three questions from one screen (issue #17): which drafts were accepted and why
(the target's argmax, or u < min(1, p/q) with both numbers), what the target's own token is
and where it goes next, and why each cache lost exactly the positions it lost (the cache
arithmetic in words, specviz/run/cache_story.py). At a sampled rejection the residual
norm(max(0, p − q)) the recovered token was drawn from is drawn as bars (residual_view.py).
A run on another engine (a vLLM server) says, once per table, what that engine does not return
(specviz/other_engine.py) and shows its unreturned drafts as '?'.
"""

from __future__ import annotations

from html import escape

from engine.config import NGRAM_DRAFTER, SpecConfig
from engine.records import Alternative, CacheLengths, StepRecord
from engine.formats.trace import Trace
from specviz.figures.tree_text import tree_outcome
from specviz.other_engine import (audit_step, draft_label, draft_origin, no_draft_cache, no_numbers, no_phases,
                                  short_name, target_label, unknown_draft, unknown_target)
from specviz.run.cache_story import (CacheStory, are, carried_next, draft_story, kept_words, next_carryover, quoted,
                                     target_story)
from specviz.run.residual_view import residual_html
from specviz.run.step_reasons import (after_eos, budget_note, carryover_sentence, ends_run, greedy_rule, outcome,
                                      tree_depth_limit, verdict_reason)
from specviz.run.step_table import column_names, labelled, probability_cell, ratio_cell
from specviz.run.tree_walk import walk_stop_html, walk_table
from specviz.style import kind_labels
from specviz.tokens import chip, number, visible

VERDICT_MARK = {"accepted": "✓ accepted", "rejected": "✗ rejected", "unverified": "– unverified"}
AFTER_REJECTION = "after a rejected draft"


def step_detail_html(trace: Trace | None, step_index: int | None) -> str:
    """The detail of the step whose `index` is `step_index` (clamped into the trace)."""
    if trace is None or not trace.steps:
        return "<div class='sv-empty'>No step to show yet. Press <b>Run</b> or load a trace.</div>"
    step = find_step(trace, step_index)
    position = trace.steps.index(step)
    previous = trace.steps[position - 1] if position else None
    greedy = trace.config.is_greedy
    if step.tree is not None:              # a tree step reads as one: the walk's nodes, why it stopped
        middle = [walk_table(step, greedy), walk_stop_html(step, tree_depth_limit(trace, step), greedy, trace.config.k)]
    else:
        middle = [_table(step, trace.config), _resolution(step, trace.config)]
    parts = [
        _header(trace, step),
        _carryover(step, previous, trace.config),
        *middle,
        _emitted(trace, step),
        _audited(trace, step),
        _caches(trace, step, previous),
    ]
    return "<div class='sv-detail'>" + "".join(parts) + "</div>"


def find_step(trace: Trace, step_index: int | None) -> StepRecord:
    """The step with this index, or the nearest one; the last step for None."""
    if step_index is None:
        return trace.steps[-1]
    return min(trace.steps, key=lambda step: (abs(step.index - step_index), step.index))


def step_after(trace: Trace, step_index: int | None, delta: int) -> int:
    """The index of the step `delta` steps after the one `find_step` picks for `step_index` (Prev and
    Next), held within the trace's first and last steps."""
    position = trace.steps.index(find_step(trace, step_index)) + delta
    return trace.steps[min(max(position, 0), len(trace.steps) - 1)].index


def _header(trace: Trace, step: StepRecord) -> str:
    last = trace.steps[-1].index
    prompt = len(trace.prompt.token_ids)
    generated = step.context_len - prompt
    context = (f"context before: {step.context_len} tokens ({prompt} prompt + {generated} generated)"
               if generated >= 0 else f"context before: {step.context_len} tokens")
    note = budget_note(trace, step)
    return (f"<div class='sv-detail-head'><span class='sv-step-no'>Step {step.index}"
            f"<span class='sv-of'> (steps {trace.steps[0].index}–{last})</span></span>"
            f"<span>{escape(tree_outcome(step) if step.tree is not None else outcome(step))} → emitted "
            f"{step.num_emitted} token{'s' * (step.num_emitted != 1)}</span>"
            f"<span class='sv-muted'>{escape(context)} · {escape(_timing(trace.config, step))}"
            f"{' · EOS' if step.eos else ''}"
            "</span></div>"
            + (f"<div class='sv-row sv-muted sv-k-note'>{escape(note)}</div>" if note else ""))


def timing_words(step: StepRecord) -> str:
    """'draft 16 ms · verify 4.4 ms · engine 0.9 ms': the step's phases (engine: the work outside the
    model forwards, acceptance, the one copy to the host, cutoff, emit; absent in older traces)."""
    parts = [("draft", step.timing.draft), ("verify", step.timing.verify), ("engine", step.timing.engine)]
    return " · ".join(f"{name} {ms:.0f} ms" if ms >= 10 else f"{name} {ms:.1f} ms" for name, ms in parts if ms is not None)


def _timing(config: SpecConfig, step: StepRecord) -> str:
    """The step's phases, or on another engine its arrival gap and why there are no phases."""
    if not config.is_external:
        return timing_words(step)
    ms = step.timing.total
    return f"arrived {ms:.0f} ms after the previous step ({no_phases(config).split(';')[0]})"


def _carryover(step: StepRecord, previous: StepRecord | None, config: SpecConfig) -> str:
    chips = "".join(_chip(token.text, "carryover") for token in step.carryover)
    sentence = escape(no_draft_cache(config) if config.is_external else carryover_sentence(step, previous))
    return f"<div class='sv-row sv-carry'><b>Carryover</b> {chips} <span class='sv-muted'>{sentence}</span></div>"


def _choice(text: str, unused_because: str = "", unknown: str = "", how: str = "") -> str:
    """The target's choice cell. Past a rejection (or an accepted EOS) the verify forward still computed
    a row, but it is a choice the output never takes: drawn muted, with `unused_because` said; `unknown`
    is why another engine's row shows no token ('' when it is known); `how` says how a sampled step came to
    this token (`sampled_how`)."""
    if not unused_because:
        return f"<td>{_token(text)}{f'<br><small>{escape(how)}</small>' if how else ''}</td>"
    title = unknown or f"computed {unused_because}, so never used"
    return (f"<td class='sv-muted' title='{escape(title)}'>{_token(text)}"
            f"<br><small>{unused_because}: unused</small></td>")


def _reason(step: StepRecord, position: int, config: SpecConfig) -> str:
    """Why the draft got its verdict; another engine's sampled verdicts come without the numbers that decided them."""
    if config.is_external and not config.is_greedy and step.verdicts[position] != "unverified":
        decided = "accepted" if step.verdicts[position] == "accepted" else "rejected"
        return f"{decided} by {short_name(config)}'s own test of u against min(1, p/q), whose numbers it does not return"
    return verdict_reason(step, position, config.is_greedy)


def _table(step: StepRecord, config: SpecConfig) -> str:
    greedy, external = config.is_greedy, config.is_external
    rule = greedy_rule() if greedy else ("sampling: accept d_i if a uniform draw u < min(1, p/q), so always when the "
                                         "target gives the token at least the draft's probability; else reject and stop")
    if external:
        rule += f". {no_numbers(config)}" + ("" if all(d.known for d in step.draft) else f" {unknown_draft(config)}")
    tested = not greedy and not external            # the test's columns: only where the engine returned them
    sampled_heads = "" if not tested else "<th class='sv-col-test'>min(1, p/q)</th><th class='sv-col-test'>draw u</th>"
    head = ("<tr><th>pos</th><th>draft token</th><th>q<br><small>draft prob</small></th>"
            f"<th>p<br><small>target prob</small></th>{sampled_heads}<th class='sv-verdict'>verdict</th><th>why</th>"
            "<th>target's choice</th><th class='sv-col-top'>draft top</th><th class='sv-col-top'>target top</th></tr>")
    rows = []
    for position, draft in enumerate(step.draft):
        target = step.target[position]
        verdict = step.verdicts[position]
        sampled = ("" if not tested else f"{ratio_cell(step.accept_prob[position], target.p, draft.q, verdict != 'unverified')}"
                                         f"<td class='sv-col-test'>{number(step.draws[position])}</td>")
        origin = draft_origin(config, draft) if external else ""
        absent = f" title='{escape(no_numbers(config))}'" if external else ""
        rows.append(
            f"<tr class='sv-{verdict}'><td>d{position + 1}</td>"
            f"<td>{chip(draft_label(draft), verdict if draft.known else f'{verdict} sv-unknown', origin or None)}"
            f"{'<br><small>reconstructed</small>' if draft.origin == 'reconstructed' else ''}</td>"
            f"<td class='sv-prob'{absent}>{probability_cell(draft.q)}</td>"
            f"<td class='sv-prob'{absent}>{probability_cell(target.p)}</td>{sampled}"
            f"<td class='sv-verdict'>{VERDICT_MARK[verdict]}</td>"
            f"<td class='sv-why'>{escape(_reason(step, position, config))}</td>"
            f"{_choice(target_label(target), _unused_because(step, position), '' if target.known else unknown_target(config), sampled_how(step, position) if tested else '')}"
            f"<td class='sv-col-top'>{_alternatives(draft.top)}</td>"
            f"<td class='sv-col-top'>{_alternatives(target.top)}</td></tr>")
    bonus = step.target[step.k] if len(step.target) > step.k else None
    if bonus is not None:
        reached = step.num_accepted == step.k
        ended = reached and step.k > 0 and after_eos(step, step.k)     # an accepted EOS ended the output first
        pick = "the target's argmax here" if greedy else "drawn from p here"
        if step.k == 0:
            place, mark, why = ("(no drafts this step)", "target step",
                                f"no drafts this step: {pick} (coloured like a bonus: the target's own token, "
                                "with nothing drafted)")
        elif ended:
            place, mark, why = ("(no draft: bonus position)", "",
                                f"all drafts accepted, but the output ended at the EOS d{step.num_kept}: not emitted")
        elif reached:
            place, mark, why = "(no draft: bonus position)", "bonus", f"all drafts accepted: {pick}"
        else:
            place, mark, why = "(not reached)", "", "not reached: a draft was rejected"
        blanks = "<td></td><td></td>" + ("" if not tested else "<td class='sv-col-test'></td><td class='sv-col-test'></td>")
        rows.append(
            f"<tr class='sv-bonus-row{'' if reached and not ended else ' sv-unreached'}'><td>+1</td>"
            f"<td class='sv-muted'>{place}</td>{blanks}<td class='sv-verdict'>{mark}</td>"
            f"<td class='sv-why'>{escape(why)}</td>"
            f"{_choice(target_label(bonus), AFTER_REJECTION if not reached else 'after the EOS' if ended else '', '' if bonus.known else unknown_target(config), sampled_how(step, step.k) if tested else '')}"
            f"<td class='sv-col-top'></td>"
            f"<td class='sv-col-top'>{_alternatives(bonus.top)}</td></tr>")
    kind = "sv-steps sv-stacks sv-sampled" if tested else "sv-steps sv-stacks"   # sv-sampled: the test's columns
    return (f"<div class='sv-table-wrap'><table class='sv-table {kind}'><caption>Draft vs target ({escape(rule)})"
            f"</caption><thead>{head}</thead><tbody>{labelled(''.join(rows), column_names(head))}</tbody></table></div>")


def sampled_how(step: StepRecord, position: int) -> str:
    """How a sampled step's target came to its token at `position` (issue 41: "·use" sat beside "target top:
    ·follow 0.54" unexplained): an accepted draft is kept as drafted, the recovered token and the bonus are draws
    (from the residual, from p), not the target's argmax; a row the output never takes holds its argmax."""
    target = step.target[position]
    argmax = target.top[0] if target.top else None
    differs = f", not the argmax “{visible(argmax.text)}”" if argmax is not None and argmax.id != target.id else ""
    if position >= step.k:
        return f"drawn from p{differs}"
    verdict = step.verdicts[position]
    if verdict == "accepted":
        return "the draft, kept"
    if verdict == "rejected":
        return f"drawn from the residual{differs}"
    return "the argmax (no draw made)"


def _unused_because(step: StepRecord, position: int) -> str:
    """Why the target's choice at draft `position` never reaches the output ('' when it may)."""
    if step.verdicts[position] == "unverified":
        return AFTER_REJECTION
    return "after the EOS" if step.verdicts[position] == "rejected" and after_eos(step, position) else ""


def _resolution(step: StepRecord, config: SpecConfig) -> str:
    greedy = config.is_greedy
    position = step.rejected_at
    if position is None:
        if step.k and step.num_accepted == step.k and after_eos(step, step.k):
            return (f"<div class='sv-row'><b>All {step.k} drafts accepted</b>, but d{step.num_kept} is the "
                    "end-of-sequence token: the output ends there, so the drafts after it and the bonus token are "
                    "not emitted.</div>")
        if step.k and step.num_accepted == step.k:
            bonus = step.target[step.k]
            how = "its argmax" if greedy else "a token drawn from its distribution p"
            return (f"<div class='sv-row'><b>All {step.k} drafts accepted.</b> The same target forward also gave the "
                    f"distribution after d{step.k}, so the target adds {how} as a bonus token for free: "
                    f"{chip(bonus.text, 'bonus')}.</div>")
        return ""
    draft = step.draft[position]
    shown = draft_label(draft)
    replacement = step.target[position]
    if config.is_external and not greedy:
        return (f"<div class='sv-row'><b>Rejected at d{position + 1}</b> (the draft {chip(shown, 'rejected')}): "
                f"{short_name(config)} drew {chip(replacement.text, 'recovered')} in its place from the residual "
                f"norm(max(0, p − q)). {escape(no_numbers(config))}</div>")
    if after_eos(step, position):
        eos = step.num_kept
        return (f"<div class='sv-row'><b>Rejected at d{position + 1}</b>, after the end-of-sequence token d{eos}: "
                f"the draft proposed {chip(shown, 'rejected')} and the target's token there is "
                f"{chip(replacement.text, 'recovered')}, but the output already ended at d{eos}, so neither is "
                "emitted.</div>")
    if greedy:
        return (f"<div class='sv-row'><b>Rejected at d{position + 1}:</b> the draft proposed "
                f"{chip(shown, 'rejected')} but the target's argmax is {chip(replacement.text, 'recovered')}, "
                f"which is emitted instead (recovered)"
                f"{'; the drafts after it are dropped unchecked' if position < step.k - 1 else ''}.</div>")
    return residual_html(step, position)


def _emitted(trace: Trace, step: StepRecord) -> str:
    chips = "".join(_chip(token.text, token.kind, step.tree is not None) for token in step.emitted)
    end = ends_run(trace, step)
    fed_next = next_carryover(step, trace.config.carryover)
    if end:
        nxt = f"{end[0].upper()}{end[1:]}."
    elif step.emitted:
        last = step.emitted[-1]
        target = f"the target is fed {quoted(last.text)} with its verify forward."
        nxt = f"{carried_next(fed_next)}; {target}" if fed_next else f"Next step, {target}"
    else:
        nxt = ""
    return (f"<div class='sv-row sv-emitted'><b>Emitted</b> {chips}{' <b>EOS</b>' if step.eos else ''} "
            f"<span class='sv-muted'>{escape(nxt)}</span></div>")


def _audited(trace: Trace, step: StepRecord) -> str:
    """The step's tokens the trace's audit marked (nothing when none or not audited)."""
    words = audit_step(trace, step.index)
    return f"<div class='sv-row sv-audit'>{escape(words)}</div>" if words else ""


def _caches(trace: Trace, step: StepRecord, previous: StepRecord | None) -> str:
    mode, end = trace.config.cutoff_mode, ends_run(trace, step)
    stories = [target_story(step, previous, mode, end)]
    if step.kv_draft is not None:
        missing = 0 if trace.config.carryover else sum(
            earlier.k > 0 and earlier.num_kept == earlier.k for earlier in trace.steps[:trace.steps.index(step)])
        stories.append(draft_story(step, previous, mode, trace.config.carryover, end, missing))
    elif trace.config.is_external and trace.config.drafter != NGRAM_DRAFTER:
        stories.append(CacheStory(f"draft: not reported by {short_name(trace.config)}",
                                  (no_draft_cache(trace.config),)))
    else:
        stories.append(CacheStory("draft: n-gram lookup, no cache", (
            "The n-gram drafter copies its guesses from earlier text: it has no model, so there is no cache to "
            "feed or cut.",)))
    return ("<div class='sv-row sv-caches'><b>Why the caches have these lengths</b>"
            + "".join(_story(story) for story in stories) + "</div>")


def _story(story: CacheStory) -> str:
    items = "".join(f"<li>{escape(sentence)}</li>" for sentence in story.sentences)
    return f"<div class='sv-story'><div class='sv-story-head'>{escape(story.headline)}</div><ul>{items}</ul></div>"


def cache_sentence(model: str, cache: CacheLengths, previous: CacheLengths | None = None,
                   cutoff_mode: str = "truncate") -> str:
    """'target cache 48 → 53 → 50: 3 rejected positions cut', or where a lab mode keeps them
    'target cache 64 → 70: 5 rejected positions left in place, 12 stale in total' (the KV figure's hover).

    `previous` is the step before's record of the same cache (None for the first step): the
    positions left this step are the growth of the cumulative `stale`.
    """
    lengths = f"{model} cache {cache.before} → {cache.after_forward}"
    if cache.cutoff:
        lengths += f" → {cache.after_cutoff}"
    moved = " (static cache: the pointer moved back, the rows stay in memory, masked)" if cache.capacity else ""
    parts = [f"{_rejected(cache.cutoff)} cut{moved}"] if cache.cutoff else []
    if cache.stale is None:
        return f"{lengths}: {(parts or ['nothing to cut'])[0]}; stale positions unknown (a specviz.trace/1 record)"
    stale_before = previous.stale if previous is not None and previous.stale is not None else 0
    if cache.stale > stale_before:
        kept = kept_words(cutoff_mode)
        parts.append(f"{_rejected(cache.stale - stale_before)} {kept}")
    parts = parts or ["nothing to cut"]
    if cache.stale:
        parts.append(f"{cache.stale} stale in total")
    return f"{lengths}: {', '.join(parts)}"


def _rejected(count: int) -> str:
    return f"{count} rejected position{'s' * (count != 1)}"


def _chip(text: str, kind: str, tree: bool = False) -> str:
    return chip(text, kind, kind_labels(tree).get(kind, kind))


def _token(text: str) -> str:
    return f"<code class='sv-code'>{escape(visible(text))}</code>"


def _alternatives(top: tuple[Alternative, ...]) -> str:
    return " ".join(f"<span class='sv-alt'>{escape(visible(alt.text))}&nbsp;<small>{alt.prob:.2f}</small></span>"
                    for alt in top[:5])
