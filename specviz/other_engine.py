"""What the page says about a run another engine made (a vLLM server, docs/architecture.md §10): which
of SpecViz's numbers that engine does not return, in one sentence each, instead of blank cells.

A trace with `config.engine` set (`SpecConfig.is_external`) has no p, q, draws, top lists or phase
times, and the drafts it rejected are unknown (`DraftToken.origin == "unknown"`, drawn as UNKNOWN_MARK) or
rebuilt by SpecViz with the server's own n-gram rule (`"reconstructed"`, marked so). Every view reads
its words here, so the timeline, the step detail and the cards say the same thing; an audited trace's words too
(engine/formats/trace_audit.py: the tokens SpecViz's own target would almost never emit).
"""

from __future__ import annotations

from engine.config import NGRAM_DRAFTER, SpecConfig
from engine.formats.trace import Trace, emitted_places
from engine.records import DraftToken, TargetToken
from engine.vllm.server_info import FIX_NAME, samples_wrongly
from specviz.tokens import visible

UNKNOWN_MARK = "⬚"             # a drafted token the engine did not return: an empty dotted box, never a
                               # token's text ('?' is one: an accepted '?' looked like an unreturned draft)
RECONSTRUCTED_MARK = "≈"       # a drafted token SpecViz rebuilt with the engine's own lookup rule


def engine_name(config: SpecConfig) -> str:
    """'vLLM 0.32.0' for config.engine 'vllm 0.32.0' (any other engine as written)."""
    name, _, version = config.engine.partition(" ")
    return f"{'vLLM' if name.lower() == 'vllm' else name} {version}".strip()


def server_name(config: SpecConfig) -> str:
    """'vLLM 0.32.0', or 'vLLM 0.32.0, CPU sampler fixed' for a server that ran SpecViz's fix (ServerInfo.engine)."""
    engine, fixed, _ = config.engine.partition(f" + {FIX_NAME}")
    return engine_name(config.replace(engine=engine)) + (", CPU sampler fixed" if fixed else "")


def short_name(config: SpecConfig) -> str:
    """'vLLM': the engine without its version, for sentences."""
    return engine_name(config).split(" ")[0]


def no_numbers(config: SpecConfig) -> str:
    """Why p, q and the draws are absent: one sentence."""
    return (f"{short_name(config)} does not return p, q or the random draws, only how many drafts each step "
            "accepted, so they are not shown.")


def no_phases(config: SpecConfig) -> str:
    return f"{short_name(config)} does not time its draft and verify phases; a step's time is its tokens' arrival gap."


def unknown_draft(config: SpecConfig) -> str:
    return f"{short_name(config)} does not return the drafts it rejected: drawn as '{UNKNOWN_MARK}'."


def unknown_legend(config: SpecConfig) -> str:
    """The timeline legend's entry for the unknown mark."""
    return f"{UNKNOWN_MARK} not returned by {short_name(config)} (colour: its verdict)"


def reconstructed_draft(config: SpecConfig) -> str:
    return (f"rebuilt by SpecViz with {short_name(config)}'s own n-gram lookup rule (marked {RECONSTRUCTED_MARK}): "
            "the server does not return its rejected drafts.")


def unknown_target(config: SpecConfig) -> str:
    return f"{short_name(config)} does not say what the target chose past the first rejection."


def no_draft_cache(config: SpecConfig) -> str:
    if config.drafter == NGRAM_DRAFTER:
        return "The n-gram drafter copies its guesses from earlier text: it has no model, so no cache to feed or cut."
    return (f"{short_name(config)} does not report its draft model's cache (nor what it feeds it): only the "
            "target's lengths follow from the per-step counts.")


def no_guarantee(config: SpecConfig) -> str:
    """Instead of SpecViz's exactness note, which speaks for its own engine only."""
    return (f"{engine_name(config)} ran this: SpecViz's exactness guarantees cover its own engine, not this one "
            "(docs/benchmark.md has what was measured of vLLM's).")


def split_words(trace: Trace) -> str:
    """What the steps are when they are not what the engine reported (`Trace.split`; '' when they are)."""
    if trace.split == "provisional":
        return (f"Provisional steps: each chunk {short_name(trace.config)} streamed stands in for a step until its "
                "per-step counts arrive with the last chunk and replace them.")
    if trace.split == "unsplit":
        return (f"Unsplit: {short_name(trace.config)}'s per-step counts never came, so each token is shown alone "
                "with its arrival time; which were drafts, and their verdicts, are unknown.")
    return ""


def cut_note(trace: Trace) -> str:
    """'; counts 2 accepted drafts never emitted (…)': another engine's step the output ended inside, whose
    accepted drafts past the end τ and the acceptance rate still count, by that engine's definition ('' if none)."""
    if not trace.config.is_external:
        return ""
    unseen = sum(step.num_accepted - step.num_kept for step in trace.steps)
    if not unseen:
        return ""
    return (f"; counts {unseen} accepted draft{'s' * (unseen != 1)} never emitted: the output ended inside the "
            f"last step, and {short_name(trace.config)} counts a step's accepted drafts before it cuts")


def draft_label(token: DraftToken) -> str:
    """A draft's text as a cell shows it: '?' when unknown, '≈' before a reconstructed one."""
    if not token.known:
        return UNKNOWN_MARK
    return RECONSTRUCTED_MARK + token.text if token.origin == "reconstructed" else token.text


def draft_origin(config: SpecConfig, token: DraftToken) -> str:
    """Where a draft's text comes from, when it is not what the engine returned ('' otherwise)."""
    if not token.known:
        return unknown_draft(config)
    return reconstructed_draft(config) if token.origin == "reconstructed" else ""


def target_label(token: TargetToken) -> str:
    return token.text if token.known else UNKNOWN_MARK


def config_words(config: SpecConfig) -> str:
    """'vLLM 0.32.0 at http://… · target … (float32) · draft model (the server's) · k = 3, the server's
    setting · greedy · …', then how SpecViz checked the server's drafting method (or why it could not): what the
    run was, as far as the engine says."""
    where = config.device.removeprefix("vLLM server ").strip()
    drafter = ("n-gram prompt lookup" + (f" ({config.ngram_min}-{config.ngram_max} grams)" if config.ngram_max else "")
               if config.drafter == NGRAM_DRAFTER else f"draft model {config.draft or '(the server’s)'}")
    dtype = config.target_dtype or "dtype not reported"
    sampling = "greedy" if config.is_greedy else f"temperature {config.temperature:g}, top-p {config.top_p:g}"
    return (f"{engine_name(config)}{f' at {where}' if where else ''} · target {config.target or '?'} ({dtype}) · "
            f"{drafter} · k = {config.k}, the server's setting · {sampling} · max {config.max_new_tokens} new tokens"
            f" · seed {config.seed}" + (f". {config.engine_note}" if config.engine_note else ""))


def audit_summary(trace: Trace) -> str:
    """The audit of the whole run in a few sentences ('' when the trace was not audited): what was marked, of which
    kind, the law's own yardstick, and for a vLLM 0.32 server without SpecViz's fix, its known CPU sampler bug."""
    audit = trace.audit
    if audit is None:
        return ""
    marked, tokens = len(audit.marked), len(audit.probabilities)
    kinds: dict[str, int] = {}
    for position, step, j in emitted_places(trace):
        if position in audit.marked:
            kinds[step.emitted[j].kind] = kinds.get(step.emitted[j].kind, 0) + 1
    rule = ("is not the target's argmax" if audit.temperature == 0 else
            f"gets under {audit.threshold:g} from the target at T = {audit.temperature:g} (it would be drawn less than "
            "once in a million draws)")
    words = (f"Audited by {audit.scored_by}: {marked} of {tokens} tokens {'are' if marked != 1 else 'is'} marked ✕ on "
             f"the timeline, each one that {rule}")
    words += ("; by kind: " + ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) + "." if kinds
              else ".")
    if audit.temperature > 0:
        words += (f" Had each of these {tokens} tokens been drawn from the target itself, {audit.expected_marked:.2g} "
                  "would be marked on average (where the target spreads its probability thinly, a fair draw can fall "
                  "under the threshold too).")
    if kinds.get("recovered") and samples_wrongly(trace.config.engine, audit.temperature):
        words += (" A recovered token is drawn from norm(max(0, p − q)) of the server's own target, so one this target "
                  "gives almost nothing did not come from that law: vLLM 0.32's CPU sampler draws it wrongly (vLLM "
                  "issue #55005). The recorded run marked \"CPU sampler fixed\" is the same request on a server with "
                  "SpecViz's fix (the `--fix-cpu-sampler` option of `scripts/vllm.sh start`).")
    return words


def audit_step(trace: Trace, step_index: int) -> str:
    """What the audit found in the step: its marked tokens with their probabilities, or, where none is marked, each
    of its tokens' probability, so a run's clean steps can be set beside a broken run's ('' when not audited)."""
    audit = trace.audit
    if audit is None:
        return ""
    found, scored = [], []
    for position, step, j in emitted_places(trace):
        if step.index == step_index:
            token, p = step.emitted[j], audit.probabilities[position]
            scored.append(f"“{visible(token.text)}” {p:.2g}")
            if position in audit.marked:
                found.append(f"“{visible(token.text)}” ({token.kind}, p = {p:.2g})")
    if not scored:
        return ""
    if not found:
        rule = "the target's argmax" if audit.temperature == 0 else f"at or above {audit.threshold:g}"
        return (f"Audit: nothing marked in this step; the target ({audit.scored_by}) gives its tokens p = "
                f"{', '.join(scored)}, each {rule}.")
    each = "each " if len(found) > 1 else ""
    why = (f"{each}not the target's argmax" if audit.temperature == 0 else
           f"{each}under {audit.threshold:g} at T = {audit.temperature:g}: the target would emit it less than once "
           "in a million draws")
    return f"Audit ✕: {', '.join(found)}: {why} ({audit.scored_by})."
