"""A step's cache arithmetic in words: why each KV cache grew and shrank by exactly what it did.

docs/architecture.md §2 (phase 4) in this step's numbers: the target's verify forward appends its
pending tokens and the k drafts and loses k − kept; the draft model feeds its carryover and
d1..d(k−1) (never its own last draft) and loses max(0, k − kept − 1). "kept" is the number
accepted, fewer when an EOS among the drafts ended the run. The lab's cutoff modes keep the
rejected positions as stale ones (§5); a tree step keeps the nodes on its accepted path. On a
static cache (the GPU's kind, §7) a cut frees nothing: the write pointer moves back and the cut
rows stay in memory, masked, until overwritten (`pointer_words`).

Every number is read from the step's record (CacheLengths, verdicts, emitted); the rule is
quoted only where the record agrees with it, else the record's number is stated as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.records import CacheLengths, StepRecord, TreeNode, TreeRecord
from specviz.figures.tree_text import gather_moves
from specviz.tokens import visible

KIND_WORDS = {"accepted": "accepted draft", "recovered": "recovered token", "bonus": "bonus token"}


@dataclass(frozen=True)
class CacheStory:
    """One cache through one step: its lengths, then the sentences that explain them."""

    headline: str
    sentences: tuple[str, ...]


def quoted(text: str) -> str:
    """A token as the stories quote it: whitespace made visible, in curly quotes."""
    return f"“{visible(text)}”"


def positions(count: int) -> str:
    return f"{count} position{'s' * (count != 1)}"


def span(first: int, last: int) -> str:
    """Draft positions first..last (1-based) as 'd3' or 'd3–d5'."""
    return f"d{first}" if first == last else f"d{first}–d{last}"


def headline(model: str, cache: CacheLengths) -> str:
    lengths = f"{cache.before} → {cache.after_forward}" + (f" → {cache.after_cutoff}" if cache.cutoff else "")
    return f"{model} cache {lengths}"


def target_story(step: StepRecord, previous: StepRecord | None, cutoff_mode: str, ends_run: str) -> CacheStory:
    """The target cache: what its verify forward appended, and why exactly `cutoff` positions went.
    `ends_run` says why nothing follows this step ("" when the run goes on)."""
    cache = step.kv_target
    nodes = len(step.tree.nodes) if step.tree is not None else None
    fed_drafts = step.k if nodes is None else nodes
    pending = cache.after_forward - cache.before - fed_drafts
    sentences = [_before(step, previous, cache, pending, "target"), _target_forward(step, cache, pending, nodes)]
    if nodes is not None:
        kept = nodes - cache.cutoff
        moves = gather_moves(cache, step)
        rows = "; ".join(f"row {before} → {after} (node {node_id}{', in place' if before == after else ''})"
                         for node_id, before, after in moves)
        kept_words = (f"the gather kept the {kept} on the accepted path, moved to the rows right after the pending "
                      f"one{'s' * (pending != 1)}: {rows}" if moves else "the gather kept none of them (no accepted path)")
        sentences.append(f"The verify forward appended {nodes} tree nodes, node i at row {cache.before + pending} + i; "
                         f"{kept_words}; {nodes} − {kept} = {cache.cutoff} removed.")
    else:
        sentences.append(_cut(step, cache, previous, cutoff_mode, step.k - step.num_kept, "k − {kept_word}",
                              f"{step.k} − {step.num_kept}"))
    sentences += pointer_words(cache)
    last = step.emitted[-1] if step.emitted else None
    if last is not None and last.kind != "accepted" or ends_run:
        what = f"The {KIND_WORDS[last.kind]} {quoted(last.text)}" if last is not None else "The last token"
        sentences.append(f"{what} is emitted but " + (f"never cached: {ends_run}." if ends_run
                                                      else "not cached: it is fed with the next step's forward."))
    committed = step.context_len + step.num_emitted
    if cache.num_text is not None and cache.num_text == committed - 1 and not ends_run:
        stale = f": {cache.num_text} of committed text + {cache.stale} stale" if cache.stale else ""
        sentences.append(f"After: {cache.after_cutoff} positions{stale}; the text is the {committed} committed "
                         "tokens but the newest.")
    return CacheStory(headline("target", cache), tuple(sentences))


def draft_story(step: StepRecord, previous: StepRecord | None, cutoff_mode: str, carryover_on: bool,
                ends_run: str, missing: int = 0) -> CacheStory:
    """The draft model's cache: what drafting fed, and why it lost max(0, k − kept − 1) positions.
    `missing` counts the last drafts a lab run without carryover skipped before this step."""
    cache = step.kv_draft
    assert cache is not None, "an n-gram step has no draft cache"
    if step.k == 0 and cache.after_forward == cache.before:
        return CacheStory(headline("draft", cache), (
            f"No drafts this step, so the draft model did not run: its cache stays at {cache.before}; "
            "the tokens it has not seen yet wait for its next run.",))
    if step.tree is not None:
        return _tree_draft_story(step, previous, cache, ends_run)
    fed_drafts = max(step.k - 1, 0)
    pending = cache.after_forward - cache.before - fed_drafts
    sentences = [_before(step, previous, cache, pending, "draft", missing)]
    last = step.k
    drafts = "" if last <= 1 else f" and {span(1, last - 1)}"
    sentences.append(f"Drafting fed {_pending_words(cache, pending)}{drafts} to propose "
                     f"{span(1, last)}; the draft never feeds its own last draft d{last} (nothing is drafted after it): "
                     f"{cache.before} + {pending} + {fed_drafts} = {cache.after_forward}.")
    kept = step.num_kept
    expected = max(0, step.k - kept - 1)
    sentences.append(_draft_cut(step, cache, previous, cutoff_mode, expected))
    sentences += pointer_words(cache)
    sentences += _draft_next(step, carryover_on, ends_run)
    return CacheStory(headline("draft", cache), tuple(sentences))


def _tree_draft_story(step: StepRecord, previous: StepRecord | None, cache: CacheLengths, ends_run: str) -> CacheStory:
    """A tree step's draft cache: the pending tokens, then one forward per level over the nodes it
    expanded (the deepest level is never fed); the gather keeps the fed nodes on the accepted path."""
    tree = step.tree
    pending = step.context_len if cache.before == 0 else len(step.carryover)
    expanded = cache.after_forward - cache.before - pending
    kept = cache.after_cutoff - cache.before - pending
    sentences = [_before(step, previous, cache, pending, "draft"),
                 f"Drafting fed {_pending_words(cache, pending)}, then the {expanded} candidate{'s' * (expanded != 1)} "
                 f"it expanded, one forward per level: {cache.before} + {pending} + {expanded} = "
                 f"{cache.after_forward}. {_expanded_words(tree, expanded)}"]
    unfed = unfed_leaf(step)
    leaf = quoted(unfed.token.text) if unfed is not None else ""
    if expanded == 0:
        sentences.append("Nothing to cut: no node was fed.")
    else:
        on_path = (f"kept the {kept} fed node{'s' * (kept != 1)} on the accepted path (gathered into place) and "
                   f"removed the other {cache.cutoff}" if kept
                   else f"removed all {cache.cutoff} (none is on the accepted path)")
        never = f"; the accepted {leaf} was never fed (nothing was drafted after it)" if leaf else ""
        sentences.append(f"The gather {on_path}: {expanded} − {kept} = {cache.cutoff}{never}.")
    sentences += pointer_words(cache)
    fed_next = next_carryover(step)
    if fed_next and not ends_run:
        sentences.append(f"{carried_next(fed_next)}.")
    return CacheStory(headline("draft", cache), tuple(sentences))


def _expanded_words(tree: TreeRecord, expanded: int) -> str:
    """How the expanded candidates relate to the tree's nodes: a candidate is fed only to draft its children,
    so every node with a child in the tree was fed; the tree keeps the best N of all the candidates offered,
    so a fed candidate's children may all have fallen out of it (the candidate is then a leaf of the tree, or
    fell out itself; engine/decode/tree/draft.py). The record keeps the count fed, not which ones: the words
    say only what the counts prove, and they add up."""
    parents = len({node.parent for node in tree.nodes} - {None})
    leaves = len(tree.nodes) - parents
    rule = "A candidate is fed only to draft its children"
    if expanded <= parents:
        return (f"{rule}: these are the {parents} tree node{'s' * (parents != 1)} with children in the tree; its "
                f"{leaves} lea{'ves were' if leaves != 1 else 'f was'} never fed.")
    other = expanded - parents
    others = (f"the other {other} drafted children that the tree's best {len(tree.nodes)} left out (each is a leaf "
              "of the tree or was left out itself)" if other != 1 else
              f"the other one drafted children that the tree's best {len(tree.nodes)} left out (it is a leaf of the "
              "tree or was left out itself)")
    return (f"{rule}: {parents} of them are the tree nodes with children in the tree, and {others}: "
            f"{parents} + {other} = {expanded}.")


def unfed_leaf(step: StepRecord) -> TreeNode | None:
    """A tree step's accepted node the draft never fed, or None. Only the path's last node can be unfed
    (every node before it has an accepted child, so it was expanded), and only when the gather kept fewer
    fed nodes than the path has (a node is fed only to draft its children)."""
    tree, cache = step.tree, step.kv_draft
    if tree is None or cache is None or not tree.path:
        return None
    pending = step.context_len if cache.before == 0 else len(step.carryover)
    kept = cache.after_cutoff - cache.before - pending
    return tree.nodes[tree.path[-1]] if len(tree.path) > kept else None


def next_carryover(step: StepRecord, carryover_on: bool = True) -> str:
    """What the draft model is fed first next step, in the order it is fed: 'd5 “x” and then the bonus
    token “y”', 'the recovered token “z”' ('' when nothing follows or the drafter has no model). The step
    detail's Emitted line and the draft cache's story both say it with these words."""
    last = step.emitted[-1] if step.emitted else None
    if last is None or last.kind == "accepted" or step.kv_draft is None:
        return ""
    own = f"the {KIND_WORDS[last.kind]} {quoted(last.text)}"
    leaf = unfed_leaf(step)
    if leaf is not None:
        return f"the accepted node {leaf.id} {quoted(leaf.token.text)} and then {own}"
    if step.tree is None and step.k and step.num_kept == step.k and last.kind == "bonus":
        if not carryover_on:
            return f"only {own} (this lab mode has no carryover: d{step.k} is skipped)"
        return f"d{step.k} {quoted(step.draft[-1].text)} and then {own}"
    return own


def are(phrase: str) -> str:
    """The verb for `phrase` (next_carryover's words): 'are' for two tokens, else 'is'."""
    return "are" if " and then " in phrase else "is"


def carried_next(fed_next: str) -> str:
    """'Next step, the recovered token “x” is fed to the draft model first, as carryover' (no full stop): the
    sentence opens with its own words, so a draft's name ('d5') keeps its lower case."""
    return f"Next step, {fed_next} {are(fed_next)} fed to the draft model first, as carryover"


def _pending_words(cache: CacheLengths, pending: int) -> str:
    what = "the prompt" if cache.before == 0 else "its carryover"
    return f"{pending} pending token{'s' * (pending != 1)} ({what})"


def _before(step: StepRecord, previous: StepRecord | None, cache: CacheLengths, pending: int, model: str,
            missing: int = 0) -> str:
    if cache.before == 0:
        return f"Before: empty; the prompt's {step.context_len} tokens are fed in this step (the prefill)."
    stale_before = _stale_before(previous, model)
    if stale_before is None:
        return f"Before: {cache.before} positions for {step.context_len} committed tokens."
    text = cache.before - stale_before
    stale = f" ({text} of committed text + {stale_before} stale)" if stale_before else ""
    head = f"Before: {cache.before} positions{stale} for {step.context_len} committed tokens"
    if step.context_len - text != pending + missing:
        return head + "."
    skipped = (f"; {missing} of them {'was' if missing == 1 else 'were'} never fed (without carryover, each fully "
               "accepted step's last draft is skipped, so its position is missing)" if missing else "")
    newest = _newest(previous, pending)
    count = "" if pending == 1 else f"{pending} "
    return (f"{head}{skipped}: the newest {count}{newest} {'is' if pending == 1 else 'are'} not cached yet, "
            "because a token enters a cache only when it is fed.")


def _newest(previous: StepRecord | None, pending: int) -> str:
    """The pending tokens named from the previous step's emitted tail (the only place they come from)."""
    if previous is None or pending < 1 or pending > len(previous.emitted):
        return f"token{'s' * (pending != 1)}"
    tail = previous.emitted[-pending:]
    if pending == 1:
        return f"one, {quoted(tail[0].text)} (the previous step's {KIND_WORDS[tail[0].kind]}),"
    return "tokens, " + " and ".join(quoted(token.text) for token in tail) + ","


def _target_forward(step: StepRecord, cache: CacheLengths, pending: int, nodes: int | None) -> str:
    fed = f"{pending} pending token{'s' * (pending != 1)}"
    if nodes is not None:
        return (f"The verify forward fed {fed} and the tree's {nodes} nodes: "
                f"{cache.before} + {pending} + {nodes} = {cache.after_forward}.")
    if step.k == 0:
        return f"No drafts this step: the forward fed only the {fed}: {cache.before} + {pending} = {cache.after_forward}."
    return (f"The verify forward fed {fed} and the k = {step.k} drafts {span(1, step.k)}: "
            f"{cache.before} + {pending} + {step.k} = {cache.after_forward}.")


def _cut(step: StepRecord, cache: CacheLengths, previous: StepRecord | None, cutoff_mode: str, expected: int,
         rule: str, numbers: str) -> str:
    """The target's cutoff: k − kept positions, with why those positions are not kept."""
    if step.k == 0:
        return "Nothing to cut: there were no drafts."
    kept = step.num_kept
    if kept == step.k:
        return f"All {step.k} drafts were accepted and kept: nothing to cut."
    kept_word = "accepted" if kept == step.num_accepted else "kept"
    why = _why_not_kept(step, step.k)
    formula = f"{rule.format(kept_word=kept_word)} = {numbers} = {expected}"
    return _removed(cache, previous, "target", cutoff_mode, why, expected, formula)


def _draft_cut(step: StepRecord, cache: CacheLengths, previous: StepRecord | None, cutoff_mode: str,
               expected: int) -> str:
    kept, k = step.num_kept, step.k
    kept_word = "accepted" if kept == step.num_accepted else "kept"
    formula = f"max(0, k − {kept_word} − 1) = max(0, {k} − {kept} − 1) = {expected}"
    if kept == k:
        return f"All {k} drafts accepted: nothing to cut ({formula})."
    if expected == 0:
        return f"{_why_not_kept(step, k)}, and the draft never fed d{k}: nothing to cut ({formula})."
    return _removed(cache, previous, "draft", cutoff_mode, _why_not_kept(step, k - 1), expected, formula,
                    f" (d{k} was never fed, so it needs no cut)")


def _why_not_kept(step: StepRecord, last: int) -> str:
    """Why drafts kept+1..last are not in the output: a rejection (and the unchecked rest), or an EOS."""
    kept = step.num_kept
    if kept < step.num_accepted:
        return f"d{kept} is the end-of-sequence token, so the output ends there and {span(kept + 1, last)} are not kept"
    rejected = kept + 1
    if rejected == last:
        return f"d{rejected} was rejected"
    rest = span(rejected + 1, last)
    return f"d{rejected} was rejected and {rest} after it {'was' if rejected + 1 == last else 'were'} never checked"


def kept_words(cutoff_mode: str) -> str:
    """What a lab mode that cuts nothing does to the positions a correct engine would cut."""
    return "zero-filled in place" if cutoff_mode == "zero_fill" else "left in place"


def _removed(cache: CacheLengths, previous: StepRecord | None, model: str, cutoff_mode: str, why: str,
             expected: int, formula: str, tail: str = "") -> str:
    """`why` the positions go, then what the record says happened to them: cut, or kept as stale by a lab mode."""
    if cache.stale is None:
        return f"{why}: the record says {positions(cache.cutoff)} cut (stale positions unknown, a specviz.trace/1 record)."
    left = cache.stale - (_stale_before(previous, model) or 0)
    if cutoff_mode != "truncate" and cache.cutoff == 0:
        kept_as = kept_words(cutoff_mode)
        return (f"{why}, but this lab mode removes nothing: {positions(left)} {kept_as}, now stale "
                f"({cache.stale} stale in total); a correct engine would cut {formula}{tail}.")
    if cache.cutoff == expected:
        return f"{why}, so {positions(expected)} {'is' if expected == 1 else 'are'} cut: {formula}{tail}."
    return f"{why}: the record says {positions(cache.cutoff)} cut, where the rule gives {formula}{tail}."


def _draft_next(step: StepRecord, carryover_on: bool, ends_run: str) -> list[str]:
    fed_next = next_carryover(step, carryover_on)
    if not fed_next or ends_run:
        return []
    sentence = carried_next(fed_next)
    if step.k and step.num_kept == step.k and step.emitted[-1].kind == "bonus":
        if not carryover_on:
            return [f"This lab mode has no carryover: d{step.k} is never fed, so its position stays missing; "
                    f"only the bonus {quoted(step.emitted[-1].text)} is fed next step."]
        sentence += (f", so until then the draft is one position behind the target "
                     f"({step.kv_draft.after_cutoff} vs {step.kv_target.after_cutoff})")
    return [sentence + "."]


def _stale_before(previous: StepRecord | None, model: str) -> int | None:
    if previous is None:
        return 0
    cache = previous.kv_target if model == "target" else previous.kv_draft
    return None if cache is None else cache.stale



def pointer_words(cache: CacheLengths) -> list[str]:
    """A static cache's cut in words (nothing for a dynamic cache, whose cut frees the rows)."""
    if cache.capacity is None or not cache.cutoff:
        return []
    return [f"Static cache: nothing is freed. The write pointer moves back from {cache.after_forward} to "
            f"{cache.after_cutoff}; the {positions(cache.cutoff)} cut stay in memory past it, hidden from attention "
            f"by the mask, until the next forward writes over them ({cache.masked} such rows now, in a cache "
            f"sized once for {cache.capacity})."]
