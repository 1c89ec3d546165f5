"""The Run tab's step detail read back as a student reads it: every number in its sentences
(cache arithmetic, offsets, carryover, the verdict reasons) is checked against the step record
and against the rule of docs/architecture.md §2, on real runs of the tiny pair in every mode
(greedy, sampled, the lab's cutoff modes, no carryover, n-gram, EOS, the token budget) and on
the bundled traces. A planted wrong sentence must be caught."""

from __future__ import annotations

import dataclasses
import html
import re

import pytest

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from engine.records import StepRecord
from engine.formats.trace import Trace
from specviz.assets import ASSETS_DIR, DEMO_TRACE, SAMPLED_TRACE
from specviz.run import cache_story
from specviz.run.step_detail import step_detail_html
from specviz.tokens import visible

PROMPT = "The cache keeps keys and values"


def stories(page: str) -> dict[str, list[str]]:
    """{'target': sentences, 'draft': sentences} from the step detail's cache section."""
    found = {}
    for head, items in re.findall(r"<div class='sv-story-head'>(.*?)</div><ul>(.*?)</ul>", page):
        model = html.unescape(head).split()[0].rstrip(":")
        found[model] = [html.unescape(item) for item in re.findall(r"<li>(.*?)</li>", items)]
    return found


def row(page: str, label: str) -> str:
    match = re.search(rf"<b>{label}</b>(.*?)</div>", page)
    assert match, label
    return html.unescape(re.sub(r"<[^>]+>", "", match.group(1)))


def previous_of(trace: Trace, step: StepRecord) -> StepRecord | None:
    position = trace.steps.index(step)
    return trace.steps[position - 1] if position else None


def check_equations(sentence: str) -> None:
    """Every 'a + b (+ c) = d' and 'max(0, a − b − 1) = d' a sentence states is arithmetic that holds."""
    for terms, total in re.findall(r"((?:\d+ \+ )+\d+) = (\d+)", sentence):
        assert sum(int(t) for t in terms.split(" + ")) == int(total), sentence
    for a, b, total in re.findall(r"max\(0, (\d+) − (\d+) − 1\) = (\d+)", sentence):
        assert max(0, int(a) - int(b) - 1) == int(total), sentence
    for a, b, total in re.findall(r"(?<!\()(\d+) − (\d+) = (\d+)", sentence):
        assert int(a) - int(b) == int(total), sentence


def check_cache(trace: Trace, step: StepRecord, model: str, sentences: list[str], page: str) -> None:
    cache = step.kv_target if model == "target" else step.kv_draft
    previous = previous_of(trace, step)
    prev_cache = None if previous is None else (previous.kv_target if model == "target" else previous.kv_draft)
    prev_stale = 0 if prev_cache is None else prev_cache.stale or 0
    kept = sum(token.kind == "accepted" for token in step.emitted)           # drafts the output keeps
    rule = step.k - kept if model == "target" else max(0, step.k - kept - 1)
    text = " ".join(sentences)
    for sentence in sentences:
        check_equations(sentence)
    lengths = f"{model} cache {cache.before} → {cache.after_forward}" + (f" → {cache.after_cutoff}" if cache.cutoff else "")
    assert lengths in page
    # The forward: before + pending + fed drafts = after_forward, with pending counted from the text.
    fed = step.k if model == "target" else max(step.k - 1, 0)
    pending = cache.after_forward - cache.before - fed
    if step.k or model == "target":
        forward = next(s for s in sentences if s.startswith(("The verify forward", "No drafts", "Drafting")))
        assert f"{cache.before} + {pending}" in forward and forward.endswith(f"= {cache.after_forward}.")
        if model == "target" and step.k:
            assert f"the k = {step.k} drafts d1–d{step.k}" in forward or step.k == 1
    if cache.before == 0:
        assert pending == len(trace.prompt.token_ids) and "prefill" in sentences[0]
    elif prev_cache is not None and prev_cache.stale is not None and (step.k or model == "target"):
        cached_text = cache.before - prev_stale       # the offset: committed tokens minus cached text
        missing = 0 if model == "target" or trace.config.carryover else sum(
            s.k > 0 and s.num_kept == s.k for s in trace.steps[:trace.steps.index(step)])
        assert pending == step.context_len - cached_text - missing
        if missing:
            assert f"{missing} of them {'was' if missing == 1 else 'were'} never fed" in sentences[0]
        assert "not cached yet" in sentences[0]
        assert f"Before: {cache.before} positions" in sentences[0] and f"for {step.context_len} committed" in sentences[0]
        if prev_stale:
            assert f"{cached_text} of committed text + {prev_stale} stale" in sentences[0]
    # The cutoff: the record, the rule and the words agree.
    if step.k == 0:
        return
    if cache.stale is not None and trace.config.cutoff_mode != "truncate":
        assert cache.cutoff == 0
        left = cache.stale - prev_stale
        if rule:
            assert f"{left} position{'s' * (left != 1)} " in text and f"({cache.stale} stale in total)" in text
            assert "a correct engine would cut" in text and text.count(f"= {rule}") >= 1
        return
    assert cache.cutoff == rule, (model, step.index)
    if rule == 0:
        assert "nothing to cut" in text
    else:
        assert f"so {rule} position{'s' * (rule != 1)} {'is' if rule == 1 else 'are'} cut" in text
        assert re.search(rf"= {rule}\b", text)
    if model == "draft" and kept == step.k and step.emitted[-1].kind == "bonus" and trace.config.carryover:
        if not step.eos and step is not trace.steps[-1]:
            assert f"({step.kv_draft.after_cutoff} vs {step.kv_target.after_cutoff})" in text
            assert step.kv_target.after_cutoff - step.kv_draft.after_cutoff == 1


def check_step(trace: Trace, step: StepRecord) -> None:
    page = step_detail_html(trace, step.index)
    found = stories(page)
    check_cache(trace, step, "target", found["target"], page)
    if step.kv_draft is not None:
        check_cache(trace, step, "draft", found["draft"], page)
    else:
        assert "n-gram" in " ".join(found["draft"])
    carry = row(page, "Carryover")
    quoted = re.findall(r"“(.*?)”", carry)
    assert quoted == [visible(token.text) for token in step.carryover] or not step.carryover and not quoted
    if step.carryover and len(step.carryover) == 2 and previous_of(trace, step).emitted[-1].kind == "bonus":
        assert "last draft" in carry and "bonus" in carry
    if len(step.carryover) == 1:
        assert "last draft" not in carry and "bonus token" not in carry or previous_of(trace, step).emitted[-1].kind == "bonus"
    # Why each draft got its verdict.
    for position, verdict in enumerate(step.verdicts):
        reason = re.findall(r"<td[^>]*class='sv-why'>(.*?)</td>", page)[position]
        reason = html.unescape(reason)
        if verdict == "unverified":
            assert "never checked" in reason
        elif trace.config.is_greedy:
            assert ("= the target's argmax" if verdict == "accepted" else "≠ the target's argmax") in reason
        else:
            draw, ratio = step.draws[position], step.accept_prob[position]
            assert f"u = {draw:.3f} {'<' if verdict == 'accepted' else '≥'} {ratio:.3f}" in reason
            assert (draw < ratio) == (verdict == "accepted")
    if trace.config.is_greedy:
        assert "max(0, p − q)" not in page and "resampl" not in page


@pytest.fixture(scope="module")
def pair():
    return build_tiny_pair(seed=3)


RUNS = {
    "greedy": SpecConfig(k=4, max_new_tokens=40),
    "sampled": SpecConfig(k=4, temperature=0.9, max_new_tokens=40, seed=5),
    "lab-none": SpecConfig(k=4, max_new_tokens=30, cutoff_mode="none", carryover=False),
    "lab-zero-fill": SpecConfig(k=4, max_new_tokens=30, cutoff_mode="zero_fill"),
    "no-carryover": SpecConfig(k=3, max_new_tokens=30, carryover=False),
    "ngram": SpecConfig(k=4, max_new_tokens=30, drafter="ngram"),
    "budget": SpecConfig(k=6, max_new_tokens=9),
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_step_of_a_real_run_explains_its_numbers(pair, name):
    trace = SpeculativeEngine(pair).generate(PROMPT, RUNS[name])
    assert any(step.rejected_at is not None for step in trace.steps) or name in ("ngram", "budget")
    for step in trace.steps:
        check_step(trace, step)


def test_a_step_cut_short_by_the_budget_says_why(pair):
    trace = SpeculativeEngine(pair).generate(PROMPT, RUNS["budget"])
    short = [step for step in trace.steps if step.k < 6]
    assert short, "the budget of 9 new tokens leaves the last step fewer than k + 1"
    for step in short:
        page = html.unescape(step_detail_html(trace, step.index))
        remaining = 9 - (step.context_len - len(trace.prompt.token_ids))
        assert f"k = {step.k} this step, not 6: only {remaining} of the 9 new tokens" in page
    assert "at its budget of 9 new tokens" in html.unescape(step_detail_html(trace, trace.steps[-1].index))


def test_an_eos_inside_the_drafts_is_explained(pair):
    pair = build_tiny_pair(seed=1, draft_noise=0.0)
    free = SpeculativeEngine(pair).generate("stop here", SpecConfig(k=4, max_new_tokens=20))
    eos = free.output.token_ids[6]                   # step 0 emits 5 tokens: EOS is the 2nd draft of step 1
    assert eos not in free.output.token_ids[:6]
    pair.target.generation_config.eos_token_id = eos
    trace = SpeculativeEngine(pair).generate("stop here", SpecConfig(k=4, max_new_tokens=20))
    last = trace.steps[-1]
    assert last.eos and last.num_kept < last.num_accepted
    check_step(trace, last)
    page = html.unescape(step_detail_html(trace, last.index))
    assert f"d{last.num_kept} is the end-of-sequence token" in page and "at this end-of-sequence token" in page


@pytest.mark.parametrize("name", [DEMO_TRACE, SAMPLED_TRACE])
def test_every_step_of_the_bundled_traces_explains_its_numbers(name):
    trace = Trace.load(ASSETS_DIR / "traces" / name)
    for step in trace.steps:
        check_step(trace, step)


def test_a_planted_wrong_cut_is_caught(pair, monkeypatch):
    """A story that says the draft loses k − accepted (the target's rule) must fail the check."""
    trace = SpeculativeEngine(pair).generate(PROMPT, RUNS["greedy"])
    step = next(s for s in trace.steps if s.rejected_at is not None and s.rejected_at < s.k - 1)
    check_step(trace, step)
    original = cache_story._draft_cut

    def wrong(step, cache, previous, cutoff_mode, expected):
        return original(step, cache, previous, cutoff_mode, step.k - step.num_kept)
    monkeypatch.setattr(cache_story, "_draft_cut", wrong)
    with pytest.raises(AssertionError):
        check_step(trace, step)


def test_a_planted_fixed_carryover_sentence_is_caught(pair, monkeypatch):
    """Today's bug: 'its last draft and the bonus token' on a step whose carry is one recovered token."""
    trace = SpeculativeEngine(pair).generate(PROMPT, RUNS["greedy"])
    step = next(s for s in trace.steps if len(s.carryover) == 1 and previous_of(trace, s).emitted[-1].kind == "recovered")
    monkeypatch.setattr("specviz.run.step_detail.carryover_sentence",
                        lambda step, previous: "fed first: its last draft and the bonus token "
                                               + " ".join(f"“{visible(t.text)}”" for t in step.carryover))
    with pytest.raises(AssertionError):
        check_step(trace, step)


def test_a_planted_off_by_one_offset_is_caught(pair, monkeypatch):
    trace = SpeculativeEngine(pair).generate(PROMPT, RUNS["greedy"])
    step = trace.steps[2]
    original = cache_story._target_forward
    monkeypatch.setattr(cache_story, "_target_forward",
                        lambda step, cache, pending, nodes: original(step, cache, pending + 1, nodes))
    with pytest.raises(AssertionError):
        check_step(trace, step)


def test_the_bundled_sampled_trace_teaches_sampling_beside_the_greedy_one():
    from specviz.assets import load_demo_trace
    from specviz.quantities import probability_text
    demo = load_demo_trace()
    names = [name for name, _ in demo.choices]
    assert names[:2] == [DEMO_TRACE, SAMPLED_TRACE] and demo.name == DEMO_TRACE
    greedy, sampled = (dict(demo.choices)[name] for name in (DEMO_TRACE, SAMPLED_TRACE))
    assert greedy.config.is_greedy and 0.7 <= sampled.config.temperature <= 1.0
    assert sampled.config.target == greedy.config.target and sampled.config.draft == greedy.config.draft
    rejections = [step for step in sampled.steps if step.rejected_at is not None]
    assert len(rejections) >= 3 and any(step.num_accepted == step.k for step in sampled.steps)
    for step in rejections:                              # the residual the recovered token was drawn from
        recovered = step.emitted[-1]
        assert recovered.kind == "recovered" and step.residual
        assert recovered.id in [alt.id for alt in step.residual]
        page = html.unescape(step_detail_html(sampled, step.index))
        assert "◀ drawn here" in page and f"at d{step.rejected_at + 1}" in page
        assert "Why drawing from the residual keeps the output's law p" in page
        position = step.rejected_at             # the recorded numbers add up: min(p, q) + (1 − Σ min) · residual = p
        p_of = {alt.id: alt.prob for alt in step.target[position].top}
        q_of = {alt.id: alt.prob for alt in step.draft[position].top}
        rest = 1 - step.overlap[position]
        residual = {alt.id: alt.prob for alt in step.residual}
        assert recovered.id in p_of and recovered.id in q_of
        total = min(p_of[recovered.id], q_of[recovered.id]) + rest * residual[recovered.id]
        assert total == pytest.approx(p_of[recovered.id], abs=0.01)
        shown = f"{probability_text(total)}; p = {probability_text(p_of[recovered.id])}"   # '=' or '≈', as digits give
        assert f"= {shown}" in page or f"≈ {shown}" in page


def check_tree_draft(trace: Trace, step: StepRecord, sentences: list[str]) -> None:
    """A tree step's draft cache: pending tokens plus the expanded nodes fed, then the gather."""
    cache = step.kv_draft
    pending = step.context_len - cache.before       # truncate mode: every committed token not cached is pending
    expanded = cache.after_forward - cache.before - pending
    kept = cache.after_cutoff - cache.before - pending
    for sentence in sentences:
        check_equations(sentence)
    forward = next(s for s in sentences if s.startswith("Drafting"))
    assert f"{cache.before} + {pending} + {expanded} = {cache.after_forward}." in forward
    assert f"{pending} pending token{'s' * (pending != 1)}" in forward
    if cache.before:
        assert "not cached yet" in sentences[0] and f"for {step.context_len} committed" in sentences[0]
    if expanded:
        assert f"{expanded} − {kept} = {cache.cutoff}" in " ".join(sentences)
    assert 0 <= kept <= len(step.tree.path) and cache.cutoff == expanded - kept


def tree_run(pair) -> Trace:
    return SpeculativeEngine(pair).generate(PROMPT, SpecConfig(k=4, max_new_tokens=40, tree_nodes=8, tree_branch=2))


def test_every_tree_step_explains_its_draft_cache(pair):
    trace = tree_run(pair)
    assert trace.steps and all(step.tree is not None for step in trace.steps)
    assert any(step.kv_draft.cutoff for step in trace.steps) and any(step.carryover for step in trace.steps)
    for step in trace.steps:
        check_tree_draft(trace, step, stories(step_detail_html(trace, step.index))["draft"])


def test_a_tree_step_told_with_the_chain_formula_is_caught(pair, monkeypatch):
    """The planted bug: the chain's sentence (pending = after − before − (k − 1)) for a tree step."""
    trace = tree_run(pair)
    monkeypatch.setattr(cache_story, "_tree_draft_story", lambda step, previous, cache, ends_run: cache_story.draft_story(
        dataclasses.replace(step, tree=None), previous, "truncate", True, ends_run))
    with pytest.raises(AssertionError):
        for step in trace.steps:
            check_tree_draft(trace, step, stories(step_detail_html(trace, step.index))["draft"])
