"""Property-based tests (hypothesis): the acceptance rule, the trace parser, real tiny-random runs
with random configs, and the run controls on arbitrary input."""

from __future__ import annotations

import functools
import json

import torch
from hypothesis import given, settings, strategies as st

from engine.config import ConfigError, SpecConfig
from engine.formats.trace import Trace, TraceFormatError
from engine.decode.verify import accept_greedy, accept_sampling
from records_factory import make_trace
from specviz.controls import Controls
from specviz.serving.policy import Policy

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


# --- real runs: the engine on the tiny-random pair with random configs ---------------------------

@functools.cache
def _tiny_engine():
    from engine.decode.speculative import SpeculativeEngine
    from engine.loading.models import load_pair
    return SpeculativeEngine(load_pair("tiny-random", device="cpu"))


@st.composite
def run_configs(draw):
    temperature = draw(st.sampled_from([0.0, 0.0, 0.3, 0.8, 1.5]))
    return SpecConfig(k=draw(st.integers(1, 8)), temperature=temperature,
                      top_p=draw(st.sampled_from([1.0, 0.9, 0.5])), top_k=draw(st.sampled_from([0, 5, 50])),
                      max_new_tokens=draw(st.integers(1, 40)), seed=draw(st.integers(0, 2**63 - 1)),
                      drafter=draw(st.sampled_from(["model", "model", "ngram"])), adaptive_k=draw(st.booleans()))


PROMPTS = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=60).filter(str.strip)


def _tokens_and_verdicts(trace):
    return trace.output.token_ids, [(step.verdicts, tuple(t.id for t in step.emitted)) for step in trace.steps]


@settings(max_examples=15, deadline=None)
@given(PROMPTS, run_configs())
def test_real_runs_keep_the_step_invariants(prompt, config):
    """emitted = accepted + 1 except where EOS or max new tokens cut the last step; caches cut
    exactly the rejected positions; the trace round-trips; the same seed gives the same run
    (with adaptive k, whose choices follow measured timings, the same greedy output)."""
    trace = _tiny_engine().generate(prompt, config)
    eos_ids = _tiny_engine().pair.eos_token_ids
    new_tokens = trace.summary.new_tokens
    assert trace.complete and new_tokens <= config.max_new_tokens
    assert new_tokens == config.max_new_tokens or trace.steps[-1].eos
    for position, step in enumerate(trace.steps):
        is_last = position == len(trace.steps) - 1
        assert step.k <= (min(2 * config.k, 32) if config.adaptive_k else config.k)
        assert step.num_accepted == step.verdicts.count("accepted")
        assert step.verdicts == ("accepted",) * step.num_accepted + step.verdicts[step.num_accepted:]
        if is_last and (step.eos or new_tokens == config.max_new_tokens):
            assert 1 <= step.num_emitted <= step.num_accepted + 1
        else:
            assert step.num_emitted == step.num_accepted + 1 and not step.eos
        assert step.eos == (step.emitted[-1].id in eos_ids)
        assert step.kv_target.cutoff == step.k - step.num_kept          # kept: accepted, up to an EOS
        assert step.kv_target.after_cutoff == step.kv_target.after_forward - step.kv_target.cutoff
        assert step.kv_target.stale == 0
        if step.kv_draft is not None:
            assert step.kv_draft.cutoff == max(0, step.k - step.num_kept - 1) and step.kv_draft.stale == 0
        else:
            assert config.drafter == "ngram"
    assert Trace.from_json(trace.to_json()) == trace
    again = _tiny_engine().generate(prompt, config)
    if not config.adaptive_k:
        assert _tokens_and_verdicts(again) == _tokens_and_verdicts(trace)
    elif config.is_greedy:
        assert again.output.token_ids == trace.output.token_ids


# --- the run controls: any JSON an API caller sends is a request or one ConfigError --------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children,
                                                                                       max_size=3), max_leaves=6)


@st.composite
def control_values(draw):
    """Each control either a plausible value or any JSON value at all."""
    plausible = dict(preset=st.sampled_from(["tiny-random", "custom", "", "qwen-coder", "vllm-server"]),
                     server=st.sampled_from(["", "127.0.0.1:8000", "http://h:1/v1", "nope", "ftp://h:2"]),
                     draft=st.sampled_from(["", "distilgpt2", "/tmp/x"]), target=st.sampled_from(["", "gpt2", "./m"]),
                     drafter=st.sampled_from(["model", "ngram"]), prompt=st.text(max_size=20),
                     k=st.integers(-2, 40), adaptive_k=st.booleans(), tree_nodes=st.integers(-2, 80),
                     tree_branch=st.integers(-1, 10), temperature=st.floats(-1, 12),
                     top_p=st.floats(-0.5, 1.5), top_k=st.integers(-5, 100), max_new_tokens=st.integers(-5, 5000),
                     seed=st.integers(-5, 2**64), draft_dtype=st.sampled_from(["float32", "bfloat16", "int8"]),
                     target_dtype=st.sampled_from(["float32", "float16"]), with_baseline=st.booleans())
    return {name: draw(st.one_of(strategy, JSON) if draw(st.booleans()) else strategy)
            for name, strategy in plausible.items()}


@settings(max_examples=400, deadline=None)
@given(control_values(), st.sampled_from([Policy(), Policy.hosted_default()]))
def test_controls_turn_any_values_into_a_request_or_one_config_error(values, policy):
    try:
        request = Controls(**values).to_request(policy)
    except ConfigError as error:
        assert str(error) and "\n" not in str(error)
        return
    config = request.config
    assert 1 <= config.k <= policy.max_k and 1 <= config.max_new_tokens <= policy.max_new_tokens
    assert 0 <= config.tree_nodes <= policy.max_tree_nodes <= 64 and 1 <= config.tree_branch <= 8
    assert 0.0 <= config.temperature <= policy.max_temperature and request.prompt.strip() == request.prompt != ""
