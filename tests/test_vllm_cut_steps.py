"""The oracle against a real vLLM 0.32 server (marker vllm; the tiny pair tests/vllm_session.py serves: float32,
draft model, k = 3): SpecViz's own engine on the same weights takes the steps the server's trace draws
(tests/vllm_oracle.py), on whole runs and on runs the server's budget (max_tokens) ends inside a step; a run a stop string
ends inside a step comes without vLLM's per-step counts and is kept unsplit. vLLM counts a step's accepted drafts before it truncates (vllm/v1/core/sched/scheduler.py
`update_from_output`; stop strings: vllm/v1/engine/output_processor.py `_trim_surplus_tokens`), so such a
step shows accepted drafts that were never emitted: drawn as accepted but not in the output, and neither
they nor their cache rows counted as output.

Budgets and stop strings are chosen from each prompt's 24-token run so the cut falls inside accepted drafts.
"""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.formats.trace import Trace
from engine.vllm.source import VllmGeneration, start_generation
from vllm_oracle import Reference, compare, reference
from vllm_session import K, tiny_pair

pytestmark = pytest.mark.vllm
PROMPTS = ("abc", "Hello, world", "def f(x):\n    return x")
TOKENS = 24


def served(url: str, prompt: str, tokens: int, stop: str | None = None) -> Trace:
    """A greedy raw run on the server, through engine/vllm/source.py; `stop` adds a stop string to the request
    (SpecConfig has none: the body is amended before the stream starts)."""
    generation: VllmGeneration = start_generation(url, prompt, SpecConfig(k=K, max_new_tokens=tokens, raw=True))
    if stop is not None:
        generation._stream.body["stop"] = [stop]
    while not generation.is_done:
        generation.step()
    return generation.trace()


@pytest.fixture(scope="module")
def runs(tiny_vllm) -> dict[str, tuple[Trace, Reference]]:
    pair = tiny_pair()
    found = {}
    for prompt in PROMPTS:
        trace = served(tiny_vllm.url, prompt, TOKENS)
        found[prompt] = trace, reference(pair, trace.prompt.token_ids, TOKENS, trace.config, 512)
    return found


def starts(trace: Trace) -> list[tuple[int, int]]:
    """(output position, accepted) of each verify step."""
    found, position = [], 0
    for step in trace.steps:
        if step.k:
            found.append((position, step.num_accepted))
        position += step.num_emitted
    return found


@pytest.mark.parametrize("prompt", PROMPTS)
def test_whole_runs_take_specvizs_steps(runs, prompt) -> None:
    trace, ours = runs[prompt]
    agreement = compare(trace, ours)
    assert agreement.problems == () and agreement.steps_compared == len(trace.steps) - 1 >= 6
    assert trace.split is None and trace.complete


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_budget_that_ends_inside_accepted_drafts(tiny_vllm, runs, prompt) -> None:
    whole, ours = runs[prompt]
    position = next(p for p, accepted in starts(whole) if accepted >= 2)
    trace = served(tiny_vllm.url, prompt, position + 1)          # one of the step's accepted drafts is emitted
    last = trace.steps[-1]
    assert compare(trace, ours).problems == ()
    assert len(trace.output.token_ids) == position + 1 and last.num_emitted == 1 and last.num_kept == 1
    assert last.num_accepted >= 2 and last.verdicts[:last.num_accepted] == ("accepted",) * last.num_accepted
    assert all(d.id is None for d in last.draft[1:last.num_accepted])    # accepted, never returned
    assert last.kv_target.after_cutoff == len(trace.prompt.token_ids) + position + 1      # the tokens that exist
    assert trace.summary.new_tokens == position + 1 and not last.eos


@pytest.mark.parametrize("prompt", PROMPTS)
def test_a_stop_string_inside_accepted_drafts_keeps_the_tokens_unsplit(tiny_vllm, runs, prompt) -> None:
    """vLLM keeps the token that completes the stop string and drops the step's tokens after it, but sends no
    per-step counts for such a run (its scheduler attaches them only when it finishes a request itself): the
    run ends in one sentence and its tokens are kept unsplit (no verdicts), never the chunk-by-chunk guess."""
    from engine.vllm.transport import VllmError
    whole, _ = runs[prompt]
    texts = [e.text if len(e.text) == 1 else "" for s in whole.steps for e in s.emitted]   # special tokens: no text
    for position, accepted in starts(whole):
        if accepted < 2 or not texts[position]:
            continue
        text = "".join(texts[:position + 1])
        stop = next((text[-n:] for n in range(1, 4) if text[-n:].isascii() and text[-n:].isprintable()
                     and text.find(text[-n:]) == len(text) - n), None)
        if stop is not None:
            break
    else:
        pytest.fail(f"no stop string ends inside accepted drafts in {texts!r}")
    generation = start_generation(tiny_vllm.url, prompt, SpecConfig(k=K, max_new_tokens=TOKENS, raw=True))
    generation._stream.body["stop"] = [stop]
    with pytest.raises(VllmError, match="stop string .* its tokens are kept, unsplit"):
        while not generation.is_done:
            generation.step()
    trace = generation.trace()
    assert list(trace.output.token_ids) == list(whole.output.token_ids[:position + 1])   # cut mid-step
    assert trace.split == "unsplit" and all(step.k == 0 and step.num_emitted == 1 for step in trace.steps)
    assert Trace.from_json(trace.to_json()).split == "unsplit"
    generation.close()


def test_the_oracle_holds_over_many_budgets(tiny_vllm, runs) -> None:
    """Every budget from 2 to 24 on one prompt: each trace takes SpecViz's steps, and the cut steps among
    them include both kinds (accepted drafts not emitted; only the target's own token cut)."""
    whole, ours = runs["abc"]
    cuts = []
    for tokens in range(2, TOKENS + 1):
        trace = served(tiny_vllm.url, "abc", tokens)
        assert compare(trace, ours).problems == (), tokens
        cuts.append(trace.steps[-1])
    assert any(s.num_kept < s.num_accepted for s in cuts) and any(s.num_emitted == s.num_accepted for s in cuts)
