"""engine/vllm/ on a recorded vLLM server (tests/vllm_replay.py replays tests/data/vllm/ over real HTTP):
the trace a stream becomes, and every fault as one sentence with the steps so far kept.

The oracle is the server's own answer: its token ids and text, and the per-step arrays and totals
of its final chunk. tests/test_vllm_server.py checks the same against a live vLLM."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.formats.trace import Trace, first_steps
from engine.vllm.source import VllmGeneration, start_generation
from engine.vllm.ngram import propose
from engine.vllm.transport import VllmError, parse_address
from vllm_replay import Faults, ReplayServer, load_recording

RECORDING = load_recording()


@pytest.fixture
def replay():
    server = ReplayServer(RECORDING)
    yield server
    server.close()


def recorded(name: str) -> tuple[dict, tuple[int, ...], str, dict]:
    """A recorded stream: its request body, token ids, text and final speculative metrics."""
    stream = RECORDING["streams"][name]
    choices = [event["choices"][0] for event in stream["events"] if event.get("choices")]
    metrics = next(e["metrics"]["speculative_decoding"] for e in stream["events"] if not e.get("choices"))
    return (stream["body"], tuple(t for c in choices for t in c["token_ids"]), "".join(c["text"] for c in choices),
            metrics)


def prompt_of(body: dict) -> str:
    return next(prompt for prompt, ids in RECORDING["tokenize"].items() if ids == body["prompt"])


def run(url: str, name: str, **config) -> tuple[VllmGeneration, Trace]:
    body = RECORDING["streams"][name]["body"]
    spec = SpecConfig(k=3, temperature=body["temperature"], max_new_tokens=body["max_tokens"], seed=body["seed"],
                      raw=True, **config)
    generation = start_generation(url, prompt_of(body), spec)
    while not generation.is_done:
        generation.step()
    return generation, generation.trace()


def one_sentence(message: str) -> bool:
    return message.endswith(".") and "\n" not in message and ". " not in message.rstrip(".")


@pytest.mark.parametrize("name", sorted(RECORDING["streams"]))
def test_the_trace_splits_the_stream_as_the_server_counted(replay, name) -> None:
    body, token_ids, text, metrics = recorded(name)
    _, trace = run(replay.url, name)
    assert trace.complete and trace.output.token_ids == token_ids and trace.output.text == text
    prefill, *steps = trace.steps
    assert prefill.k == 0 and [e.kind for e in prefill.emitted] == ["bonus"]
    assert [s.num_accepted for s in steps] == metrics["per_step_accepted"]
    assert [s.k for s in steps] == metrics["per_step_drafted"]
    assert all(s.num_emitted == s.num_accepted + 1 for s in steps[:-1])
    assert trace.summary.drafted == metrics["num_draft_tokens"]
    assert trace.summary.accepted == metrics["num_accepted_draft_tokens"]
    assert trace.config.engine == f"vllm {RECORDING['version']['version']}" and trace.config.k == 3
    # each step's emitted tokens are the accepted drafts (known) then the target's own token
    for step in steps:
        kept = [d.id for d in step.draft[:step.num_accepted]]
        assert kept == [e.id for e in step.emitted[:step.num_accepted]]
        assert all(d.origin == "unknown" and d.id is None for d in step.draft[step.num_accepted:])
        assert [t.id for t in step.target[:step.num_emitted]] == [e.id for e in step.emitted]
    again = Trace.from_json(trace.to_json())       # the strict reader: every count and cache adds up
    assert again.to_dict() == trace.to_dict()
    for count in range(len(trace.steps) + 1):      # a replay's cuts read back too
        Trace.from_json(first_steps(trace, count).to_json())


def test_merged_chunks_make_the_same_trace(replay) -> None:
    """vLLM merges steps into one chunk when a client lags: the arrays, not the chunks, cut the steps."""
    _, plain = run(replay.url, "long")
    replay.faults = Faults(merge=True)
    _, merged = run(replay.url, "long")
    assert [(s.k, s.num_accepted, [e.id for e in s.emitted]) for s in merged.steps] == \
        [(s.k, s.num_accepted, [e.id for e in s.emitted]) for s in plain.steps]


def test_a_live_trace_is_valid_at_every_step(replay) -> None:
    body, token_ids, _, _ = recorded("greedy")
    generation = start_generation(replay.url, prompt_of(body), SpecConfig(k=3, max_new_tokens=body["max_tokens"],
                                                                          seed=body["seed"], raw=True))
    seen = 0
    while not generation.is_done:
        generation.step()
        trace = generation.trace()
        assert Trace.from_json(trace.to_json()).output.token_ids == token_ids[:len(trace.output.token_ids)]
        assert len(trace.output.token_ids) > seen or generation.is_done
        seen = len(trace.output.token_ids)
        assert trace.complete == generation.is_done


def test_a_cut_stream_keeps_the_steps_so_far(replay) -> None:
    body, token_ids, _, _ = recorded("greedy")
    generation = start_generation(replay.url, prompt_of(body), SpecConfig(k=3, max_new_tokens=24, raw=True))
    replay.faults = Faults(cut_after=4)     # the run's stream, not the probe's
    with pytest.raises(VllmError) as error:
        while not generation.is_done:
            generation.step()
    assert "ended its stream without finishing" in str(error.value) and one_sentence(str(error.value))
    partial = generation.trace()
    assert not partial.complete and partial.output.token_ids == token_ids[:len(partial.output.token_ids)]
    assert len(partial.output.token_ids) > 0
    Trace.from_json(partial.to_json())


@pytest.mark.parametrize("faults, expected", [
    (Faults(speculative=False), "runs without speculative decoding"),
    (Faults(detailed=False), "does not report each step"),
    (Faults(status=404), "refused /v1/completions (HTTP 404): The model `x` does not exist."),
])
def test_a_server_that_cannot_be_drawn_is_refused_at_start(replay, faults, expected) -> None:
    replay.faults = faults
    with pytest.raises(VllmError) as error:
        run(replay.url, "greedy")
    assert expected in str(error.value) and one_sentence(str(error.value))


def test_another_model_is_refused(replay) -> None:
    replay.faults = Faults(model="somebody/else")
    with pytest.raises(VllmError) as error:
        start_generation(replay.url, "abc", SpecConfig(k=3, raw=True), expected_model="target")
    assert "serves 'somebody/else'" in str(error.value) and one_sentence(str(error.value))


def test_more_than_one_sequence_is_refused(replay) -> None:
    replay.faults = Faults(two_sequences=True)
    with pytest.raises(VllmError) as error:       # the probe's own stream already shows it
        run(replay.url, "greedy")
    assert "more than one sequence" in str(error.value) and one_sentence(str(error.value))


def test_a_silent_server_times_out(replay) -> None:
    body, _, _, _ = recorded("greedy")
    generation = start_generation(replay.url, prompt_of(body), SpecConfig(k=3, max_new_tokens=24, raw=True),
                                  read_timeout_s=0.3)
    replay.faults = Faults(delay_s=1.0)
    with pytest.raises(VllmError) as error:
        while not generation.is_done:
            generation.step()
    assert "sent nothing for 0.3 s" in str(error.value) and one_sentence(str(error.value))
    assert not generation.trace().complete


def test_top_k_is_refused_before_the_server_sees_it(replay) -> None:
    with pytest.raises(VllmError) as error:
        run(replay.url, "greedy", top_k=5)
    assert "top_k" in str(error.value) and one_sentence(str(error.value))
    assert not any(r["path"] == "/v1/completions" and r.get("max_tokens") == 24 for r in replay.requests)


@pytest.mark.parametrize("text", ["", "localhost", "ftp://host:1", "http://host:port", "http://h:80/v2", "a b:1"])
def test_a_bad_address_is_one_sentence(text) -> None:
    with pytest.raises(VllmError) as error:
        parse_address(text)
    assert one_sentence(str(error.value))


@pytest.mark.parametrize("text, url", [("127.0.0.1:8000", "http://127.0.0.1:8000"),
                                       ("http://localhost:8000/v1/", "http://localhost:8000"),
                                       ("https://[::1]:443", "https://[::1]:443")])
def test_addresses_people_write(text, url) -> None:
    assert parse_address(text).base_url == url


def test_nothing_listening_is_one_sentence() -> None:
    from engine.vllm.server import free_port
    with pytest.raises(VllmError) as error:
        start_generation(f"http://127.0.0.1:{free_port()}", "abc", SpecConfig(k=3, raw=True))
    assert "No vLLM server answers" in str(error.value) and one_sentence(str(error.value))


NGRAM = load_recording("tiny_ngram_k3")


def replayed_ngram(name: str, **lookup) -> Trace:
    stream = NGRAM["streams"][name]
    body = stream["body"]
    prompt = next(p for p, ids in NGRAM["tokenize"].items() if ids == body["prompt"])
    server = ReplayServer(NGRAM)
    try:
        generation = start_generation(server.url, prompt, SpecConfig(k=3, temperature=body["temperature"],
                                                                     max_new_tokens=body["max_tokens"],
                                                                     seed=body["seed"], raw=True),
                                      method="ngram", **lookup)
        while not generation.is_done:
            generation.step()
    finally:
        server.close()
    return generation.trace()


@pytest.mark.parametrize("name", sorted(NGRAM["streams"]))
def test_an_ngram_servers_drafts_are_rebuilt_by_its_own_rule(name) -> None:
    """vLLM's arrays skip the steps where the lookup found nothing; the rule places them, and its
    drafts agree with every count and emitted token of the live server, so none stays unknown."""
    stream = NGRAM["streams"][name]
    metrics = next(e["metrics"]["speculative_decoding"] for e in stream["events"] if not e.get("choices"))
    token_ids = tuple(t for e in stream["events"] if e.get("choices") for t in e["choices"][0]["token_ids"])
    trace = replayed_ngram(name, ngram_lookup=(1, 3))
    assert trace.output.token_ids == token_ids and trace.config.drafter == "ngram"
    verify = [s for s in trace.steps[1:] if s.k > 0]
    assert [s.num_accepted for s in verify] == metrics["per_step_accepted"]
    assert [s.k for s in verify] == metrics["per_step_drafted"]
    assert all(s.num_emitted == 1 for s in trace.steps if s.k == 0)
    assert len(verify) < len(trace.steps) - 1, "every step had a match: the placement of the others is untested"
    rebuilt = [d for s in verify for d in s.draft[s.num_accepted:]]
    assert rebuilt and all(d.origin == "reconstructed" and d.id is not None for d in rebuilt)
    assert Trace.from_json(trace.to_json()).to_dict() == trace.to_dict()


@pytest.mark.parametrize("name", sorted(NGRAM["streams"]))
def test_a_server_started_with_another_lookup_is_drawn_as_it_ran(name) -> None:
    """The recording's server looked up 1- to 3-grams; the page, told nothing, assumes vLLM's default
    (5-grams only), under which the counts do not split the tokens (or rebuild drafts the server never
    made). The finished trace is built under a lookup that agrees with every count and emitted token:
    the same steps, drafts and kinds as when told the server's own lookup, and the config names it."""
    told = replayed_ngram(name, ngram_lookup=(1, 3))
    inferred = replayed_ngram(name)
    assert (inferred.config.ngram_min, inferred.config.ngram_max) != (5, 5)
    def shape(trace: Trace) -> list:
        return [(step.k, step.num_accepted, [(d.id, d.origin) for d in step.draft], step.verdicts,
                 [(e.id, e.kind) for e in step.emitted]) for step in trace.steps]
    assert shape(inferred) == shape(told) and inferred.output.token_ids == told.output.token_ids
    rule, context = inferred.config, list(inferred.prompt.token_ids)
    for step in inferred.steps:
        if step.k:
            assert tuple(d.id for d in step.draft) == propose(context, rule.ngram_min, rule.ngram_max, 3)
        context += [token.id for token in step.emitted]


def test_a_run_the_server_stopped_ends_on_an_eos_step() -> None:
    """finish_reason "stop" (an EOS) marks the last step, and only once the run is complete."""
    from engine.formats.trace import TextTokens
    from engine.vllm.server_info import ServerInfo
    from engine.vllm.stream import SpecMetrics, StreamChunk
    from engine.vllm.to_trace import build_trace, external_config
    from engine.vllm.transport import ServerAddress
    body, token_ids, _, metrics = recorded("greedy")
    info = ServerInfo(ServerAddress("127.0.0.1", 1), "target", "target", 512, "0.32.0", "draft_model", 3, True)
    chunks = [StreamChunk(1.0 + i, (token,), "x", None) for i, token in enumerate(token_ids)]
    chunks[-1] = StreamChunk(chunks[-1].time_s, chunks[-1].token_ids, "x", "stop")
    config = external_config(info, SpecConfig(k=3, raw=True))
    prompt = TextTokens("abc", tuple(body["prompt"]))
    done = build_trace(info, config, prompt, chunks, SpecMetrics.from_json(metrics), 0.5, lambda ids: ["x"] * len(ids),
                       True, "stop")
    assert [step.eos for step in done.steps] == [False] * (len(done.steps) - 1) + [True]
    assert Trace.from_json(done.to_json()).steps[-1].eos
    live = build_trace(info, config, prompt, chunks, None, 0.5, lambda ids: ["x"] * len(ids), False, "stop")
    assert not any(step.eos for step in live.steps) and not live.complete


def test_an_ngram_run_in_which_no_step_drafted_is_one_token_a_step() -> None:
    """The default pair's n-gram server once streamed 8 tokens with no verify step although SpecViz's
    5-gram rule found a match in the context (bench.py's first peer run died there). Such a run is one
    token a step, and no lookup is claimed for it: any lookup that proposes nothing would fit."""
    from engine.vllm.ngram import DEFAULT_LOOKUP
    from engine.vllm.server_info import ServerInfo
    from engine.vllm.stream import SpecMetrics, StreamChunk
    from engine.vllm.to_trace import engine_steps, external_config
    info = ServerInfo(parse_address("127.0.0.1:1"), "target", "target", 512, "0.32.0", "ngram", 5, True)
    prompt = [1, 2, 3, 4, 5, 9, 1, 2, 3, 4, 5]                     # a repeated 5-gram: the rule proposes 9, 1, ...
    output = [7, 8, 6, 7, 8, 6, 7, 8]
    chunks = [StreamChunk(1.0 + i, (token,), "x", None) for i, token in enumerate(output)]
    metrics = SpecMetrics.from_json({"num_spec_tokens": 5, "num_draft_tokens": 0, "num_accepted_draft_tokens": 0,
                                     "per_step_accepted": [], "per_step_drafted": [], "num_spec_steps": 0,
                                     "acceptance_histogram": [0] * 6, "mean_acceptance_length": 1.0,
                                     "draft_acceptance_rate": 0.0})
    config, steps = engine_steps(info, external_config(info, SpecConfig(k=5), DEFAULT_LOOKUP), chunks, metrics, prompt)
    assert [(step.token_ids, step.drafted) for step in steps] == [((token,), 0) for token in output]
    assert (config.ngram_min, config.ngram_max) == DEFAULT_LOOKUP
