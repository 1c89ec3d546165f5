"""The default pair (qwen-coder: Qwen2.5-Coder 0.5B drafting for 1.5B) on a real vLLM server
(markers real_models and vllm): SpecViz's converted folders served in float32 with draft-model
speculation, k = 5, detailed per-request metrics; started once for this module and stopped after.

Oracles: SpecViz's own chat formatting of the same prompts, SpecViz's target-only decoding of the
same weights (stock float32: greedy output identical token for token, or, where vLLM's CPU kernels
round differently, different only from a near tie of the target's top-2 logits on), and the
server's own per-request counts for every step of the trace built from its stream.
"""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.decode.baseline import target_only, top2_margin
from engine.metrics import NEAR_TIE_LOGITS

pytestmark = [pytest.mark.real_models, pytest.mark.vllm]
K, TOKENS = 5, 24
PROMPTS = ("Write a Python function that reverses a string.", "What does a hash table do?")
STARTUP_TIMEOUT_S = 1800.0      # a first start compiles both models (minutes; cached in ~/.cache/vllm after)


@pytest.fixture(scope="module")
def default_vllm(tmp_path_factory):
    from engine.loading.model_folders import preset_folders
    from engine.vllm.server import ServerSpec, start_server, vllm_python
    if vllm_python() is None:
        pytest.skip("no vLLM environment (.venv-vllm): scripts/test.sh installs it")
    target, draft = preset_folders("qwen-coder")
    spec = ServerSpec(target=target, draft=draft, method="draft_model", k=K, dtype="float32", max_model_len=1024,
                      kv_cache_gib=1)
    server = start_server(spec, tmp_path_factory.mktemp("vllm-default") / "server.log", timeout_s=STARTUP_TIMEOUT_S)
    yield str(server.address)
    server.stop()


@pytest.fixture(scope="module")
def plain_target():
    """The default target as stock float32 (no prepacking), without a draft model: the oracle's decoder."""
    from engine.loading.models import load_pair
    return load_pair("qwen-coder", draft="ngram", target_dtype="float32", prepack=False)


def streamed(url: str, prompt: str):
    from engine.vllm.source import start_generation
    generation = start_generation(url, prompt, SpecConfig(k=K, max_new_tokens=TOKENS))
    while not generation.is_done:
        generation.step()
    return generation


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_output_is_specviz_target_only_up_to_a_near_tie(default_vllm, plain_target, prompt):
    generation = streamed(default_vllm, prompt)
    trace = generation.trace()
    ids = plain_target.encode_prompt(prompt)
    assert list(trace.prompt.token_ids) == ids, "the server's chat template formatted the prompt differently"
    ours = target_only(plain_target, ids, SpecConfig(max_new_tokens=TOKENS)).token_ids
    theirs = trace.output.token_ids
    differ = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
    if differ is None:
        assert len(theirs) == len(ours), (len(theirs), len(ours))
    else:
        margin = top2_margin(plain_target, ids + list(ours[:differ]))
        assert margin < NEAR_TIE_LOGITS, f"token {differ} differs at a top-2 margin of {margin:.3f}"


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_trace_accounts_for_every_step_the_server_counted(default_vllm, prompt):
    """Real weights accept drafts (the tiny random pair's tests cannot show that): each step's accepted
    count and draft length are the server's per-step arrays, and the cards' acceptance is the server's."""
    generation = streamed(default_vllm, prompt)
    trace, metrics = generation.trace(), generation.metrics
    _, *steps = trace.steps
    assert [step.num_accepted for step in steps] == list(metrics.per_step_accepted)
    assert [step.k for step in steps] == list(metrics.per_step_drafted)
    assert sum(step.num_emitted for step in trace.steps) == len(trace.output.token_ids) <= TOKENS
    assert metrics.num_accepted_draft_tokens > 0 and max(metrics.per_step_accepted) >= 2
    assert trace.summary.acceptance_rate == pytest.approx(metrics.num_accepted_draft_tokens / metrics.num_draft_tokens)
    assert trace.config.engine == "vllm 0.32.0" and trace.config.k == K
