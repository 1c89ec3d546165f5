"""Property-based tests (hypothesis) for the acceptance rule and the trace parser."""

from __future__ import annotations

import json

import torch
from hypothesis import given, settings, strategies as st

from engine.trace import Trace, TraceFormatError
from engine.verify import accept_greedy, accept_sampling
from records_factory import make_trace

VOCAB = 6


@st.composite
def distributions(draw, rows: int):
    weights = draw(st.lists(st.lists(st.floats(0.0, 1.0), min_size=VOCAB, max_size=VOCAB), min_size=rows, max_size=rows))
    tensor = torch.tensor(weights) + 1e-3
    return tensor / tensor.sum(-1, keepdim=True)


@st.composite
def speculative_inputs(draw):
    k = draw(st.integers(0, 6))
    draft_probs = draw(distributions(k)) if k else torch.zeros(0, VOCAB)
    target_probs = draw(distributions(k + 1))
    draft_ids = [draw(st.integers(0, VOCAB - 1)) for _ in range(k)]
    return draft_ids, draft_probs, target_probs, draw(st.integers(0, 2**31))


@settings(max_examples=200, deadline=None)
@given(speculative_inputs(), st.booleans())
def test_sampling_acceptance_is_consistent(inputs, point_mass):
    draft_ids, draft_probs, target_probs, seed = inputs
    k = len(draft_ids)
    result = accept_sampling(draft_ids, None if point_mass else draft_probs, target_probs,
                             torch.Generator().manual_seed(seed))
    assert 0 <= result.num_accepted <= k
    assert all(0.0 <= p <= 1.0 for p in result.accept_probs)
    assert len(result.draws) == k
    # every accepted draft had its draw under min(1, p/q); the first rejection did not
    for i in range(result.num_accepted):
        assert result.draws[i] < result.accept_probs[i]
    if result.num_accepted < k:
        assert result.draws[result.num_accepted] >= result.accept_probs[result.num_accepted]
        assert all(d is None for d in result.draws[result.num_accepted + 1:])
        assert result.next_kind == "recovered"
        assert float(result.residual[result.next_token]) > 0
    else:
        assert result.next_kind == "bonus"
    assert 0 <= result.next_token < VOCAB


@settings(max_examples=200, deadline=None)
@given(speculative_inputs())
def test_greedy_acceptance_is_the_longest_matching_prefix(inputs):
    draft_ids, _, target_probs, _ = inputs
    result = accept_greedy(draft_ids, target_probs.log())
    choice = target_probs.argmax(-1).tolist()
    assert draft_ids[:result.num_accepted] == choice[:result.num_accepted]
    assert result.num_accepted == len(draft_ids) or draft_ids[result.num_accepted] != choice[result.num_accepted]
    assert result.next_token == choice[result.num_accepted]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=8))
def test_emitted_is_accepted_plus_one_and_round_trips(shapes):
    shapes = [(k, min(accepted, k)) for k, accepted in shapes]
    trace = make_trace(shapes)
    for step in trace.steps:
        assert step.num_emitted == step.num_accepted + 1
        assert step.verdicts.count("accepted") == step.num_accepted
    assert Trace.from_json(trace.to_json()) == trace


def _mutations(data):
    """Every way of deleting one field or replacing one value by a wrong type."""
    if isinstance(data, dict):
        for key in list(data):
            yield lambda d, key=key: d.pop(key)
            for mutate in _mutations(data[key]):
                yield lambda d, key=key, mutate=mutate: mutate(d[key])
    elif isinstance(data, list):
        for index in range(min(len(data), 2)):
            for mutate in _mutations(data[index]):
                yield lambda d, index=index, mutate=mutate: mutate(d[index])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_parser_never_crashes_on_damaged_traces(data):
    """A damaged trace either parses or raises TraceFormatError: never another exception."""
    document = make_trace([(3, 1), (2, 2)]).to_dict()
    text = json.dumps(document)
    choice = data.draw(st.sampled_from(["truncate", "replace", "mutate"]))
    if choice == "truncate":
        text = text[: data.draw(st.integers(0, len(text) - 1))]
    elif choice == "replace":
        position = data.draw(st.integers(0, len(text) - 1))
        text = text[:position] + data.draw(st.sampled_from(['"x"', "null", "-1", "[]", "{}", "1e999", "true"])) + text[position + 1:]
    else:
        mutations = list(_mutations(document))
        mutations[data.draw(st.integers(0, len(mutations) - 1))](document)
        text = json.dumps(document)
    try:
        Trace.from_json(text)
    except TraceFormatError:
        pass
