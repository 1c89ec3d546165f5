"""The probe that cannot be fooled (issue 38, item 3; engine/vllm/server_info.py): a server's usability
and method are decided from what it publishes and how it drafts on pinned contexts, on real servers of
the tiny pair: the session's draft-model server, an n-gram server on vLLM's default (5, 5) lookup (every
one was refused before: a two-token probe never drafts under a 5-gram lookup), and one that reports a
summary without the per-step arrays. The verdict table itself is checked first without a server."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.vllm.server_info import NO_REPEAT, PINNED_NEW, REPEAT, ProbeRun, method_verdict, probe
from engine.vllm.source import start_generation
from engine.vllm.transport import ServerAddress, VllmError

WHERE = ServerAddress("127.0.0.1", 1)


def run(token: int, drafted: int) -> ProbeRun:
    stats = {"num_spec_tokens": 3, "num_draft_tokens": drafted}
    return ProbeRun((token, token), stats | ({"per_step_accepted": [0], "per_step_drafted": [drafted]} if drafted else {}))


def test_drafting_without_a_repeat_is_a_draft_model_and_only_with_one_is_ngram():
    model_like, ngram_like = run(PINNED_NEW, 3), run(PINNED_NEW, 0)
    assert method_verdict(WHERE, "draft_model", model_like, None).startswith("Checked: the server drafted after a "
                                                                              "context with no repeat")
    with pytest.raises(VllmError, match="which an n-gram lookup cannot: it speculates with a draft model"):
        method_verdict(WHERE, "ngram", model_like, None)
    assert method_verdict(WHERE, "ngram", ngram_like, run(REPEAT[0], 3)).startswith("Checked: the server drafted "
                                                                                     "only where the context repeats")
    with pytest.raises(VllmError, match="it speculates by n-gram lookup, so choose the n-gram method"):
        method_verdict(WHERE, "draft_model", ngram_like, run(REPEAT[0], 3))


def test_a_server_that_ignores_the_pinned_tokens_leaves_the_method_unchecked_and_says_so():
    ignored = ProbeRun((PINNED_NEW, 7), {"num_spec_tokens": 3, "num_draft_tokens": 3})
    for method in ("draft_model", "ngram"):
        assert method_verdict(WHERE, method, ignored, None) == (
            f"The {method} method is as told, not checked: the server did not keep to the tokens SpecViz's probe "
            "allowed.")
    silent = method_verdict(WHERE, "ngram", run(PINNED_NEW, 0), run(REPEAT[0], 0))
    assert "not checked: the server drafted in neither" in silent


def test_the_probe_contexts_separate_the_methods():
    """NO_REPEAT then the pinned token has no repeated token (no lookup of any size matches); REPEAT matches
    vLLM's default 5-gram lookup and every smaller one."""
    context = [*NO_REPEAT, PINNED_NEW]
    assert len(set(context)) == len(context)
    assert len(REPEAT) >= 6 and len(set(REPEAT)) == 1


@pytest.fixture(scope="module")
def ngram_server(tmp_path_factory):
    """An n-gram server as `scripts/vllm.sh start --method ngram` makes one: vLLM's default lookup."""
    from vllm_session import tiny_server
    with tiny_server(tmp_path_factory.mktemp("vllm-ngram"), "ngram") as started:
        yield started


@pytest.mark.vllm
def test_a_draft_model_server_is_checked_as_one(tiny_vllm):
    info = probe(tiny_vllm.url, "draft_model")
    assert (info.k, info.detailed_metrics, info.model) == (3, True, "target")
    assert info.method_note == "Checked: the server drafted after a context with no repeat, as a draft model does."
    with pytest.raises(VllmError, match=r"drafted after a context with no repeat, which an n-gram lookup cannot"):
        probe(tiny_vllm.url, "ngram")
    with pytest.raises(VllmError, match=r"serves 'target' \(.*target\), not 'other-model'\.$"):
        info.check_usable("other-model")


@pytest.mark.vllm
def test_a_default_ngram_server_is_drawn(ngram_server):
    info = probe(ngram_server.url, "ngram")
    assert (info.k, info.detailed_metrics, info.engine) == (3, True, "vllm 0.32.0")
    assert info.method_note == "Checked: the server drafted only where the context repeats, as an n-gram lookup does."
    info.check_usable("target")
    with pytest.raises(VllmError, match="drafted nothing after a context with no repeat and copies after one: it "
                                        "speculates by n-gram lookup, so choose the n-gram method"):
        probe(ngram_server.url, "draft_model")
    generation = start_generation(ngram_server.url, "abcabcabcabcabcabc", SpecConfig(k=3, max_new_tokens=12,
                                                                                      temperature=0.0, raw=True),
                                  method="ngram", expected_model="target")
    while not generation.is_done:
        generation.step()
    trace = generation.trace()
    assert trace.complete and trace.config.drafter == "ngram" and len(trace.output.token_ids) == 12


@pytest.mark.vllm
def test_a_server_without_the_per_step_arrays_is_refused_in_one_sentence(tmp_path):
    """--per-request-spec-decode-metrics summary: its requests that drafted come back without the arrays."""
    from vllm_session import tiny_server
    with tiny_server(tmp_path, "ngram", spec_metrics="summary") as started:
        info = probe(started.url, "ngram")
        assert info.k == 3 and info.detailed_metrics is False
        with pytest.raises(VllmError) as refused:
            info.check_usable()
        assert str(refused.value) == (f"The vLLM server at {started.url} does not report each step: start it with "
                                      "--per-request-spec-decode-metrics detailed (scripts/vllm.sh does).")
        with pytest.raises(VllmError, match="does not report each step"):
            start_generation(started.url, "abc", SpecConfig(k=3, max_new_tokens=4), method="ngram")
