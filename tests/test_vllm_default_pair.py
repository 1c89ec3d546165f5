"""The default pair (qwen-coder: Qwen2.5-Coder 0.5B drafting for 1.5B) on a real vLLM server
(markers real_models and vllm): SpecViz's converted folders served in float32 with draft-model
speculation, k = 5, detailed per-request metrics; started once for this module and stopped after.

Oracles: SpecViz's own chat formatting of the same prompts, SpecViz's target-only decoding of the
same weights (stock float32: greedy output identical token for token, or, where vLLM's CPU kernels
round differently, different only from a near tie of the target's top-2 logits on), and SpecViz's
own speculative engine with the same draft model and k for every step of the trace built from the
stream (tests/vllm_oracle.py), never the per-step arrays the trace was split from.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from engine.config import SpecConfig
from engine.decode.baseline import target_only
from engine.metrics import NEAR_TIE_LOGITS
from memory_room import GIB
from vllm_oracle import Reference as StepReference
from vllm_oracle import agree_up_to_a_near_tie, reference
from vllm_session import default_pair_server, streamed

pytestmark = [pytest.mark.real_models, pytest.mark.vllm, pytest.mark.needs_most_memory]
K, TOKENS = 5, 24
PROMPTS = ("Write a Python function that reverses a string.", "What does a hash table do?")
SERVER_PEAK_BYTES = 16 * GIB    # measured 2026-11-28: its three processes 15.6 GiB at their peak (the worker 13.9)


@dataclass(frozen=True)
class Reference:
    prompt_ids: list[int]
    output: tuple[int, ...]           # SpecViz's target-only greedy decoding
    margins: list[float]              # the target's top-2 logit margin before each of those tokens
    steps: StepReference              # SpecViz's speculative engine (the draft model, k = K) from the prompt


@pytest.fixture(scope="module")
def references() -> dict[str, Reference]:
    """SpecViz's side, worked out before the server starts and then freed (a 1.5B target in float32 on
    each side would not fit beside the rest of the suite): each prompt's chat-formatted ids, the stock
    float32 target's greedy output and its top-2 margin at every position (one forward), and the steps
    SpecViz's engine takes with the float32 draft model and k = K (tests/vllm_oracle.py)."""
    import gc

    import torch

    from engine.loading.models import load_pair
    pair = load_pair("qwen-coder", target_dtype="float32", draft_dtype="float32", prepack=False)
    found = {}
    for prompt in PROMPTS:
        ids = pair.encode_prompt(prompt)
        output = target_only(pair, ids, SpecConfig(max_new_tokens=TOKENS)).token_ids
        with torch.inference_mode():
            logits = pair.target(input_ids=torch.tensor([ids + list(output)])).logits[0, len(ids) - 1:-1,
                                                                                       :pair.vocab_size]
        top = torch.topk(logits.float(), 2).values
        found[prompt] = Reference(ids, tuple(output), (top[:, 0] - top[:, 1]).tolist(),
                                  reference(pair, ids, TOKENS, SpecConfig(k=K), max_model_len=1024))
    del pair
    gc.collect()
    return found


@pytest.fixture(scope="module")
def default_vllm(references, tmp_path_factory, shared_servers):
    """The server (draft model, k = K), started once there is room for it (tests/vllm_session.py)."""
    with default_pair_server(tmp_path_factory.mktemp("vllm-default"), "draft_model", K, SERVER_PEAK_BYTES,
                             shared_servers.stop_all) as url:
        yield url


@pytest.mark.parametrize("prompt", PROMPTS)
def test_greedy_output_is_specviz_target_only_up_to_a_near_tie(default_vllm, references, prompt):
    reference = references[prompt]
    trace = streamed(default_vllm, prompt, SpecConfig(k=K, max_new_tokens=TOKENS)).trace()
    assert list(trace.prompt.token_ids) == reference.prompt_ids, "the server's chat template formatted it otherwise"
    theirs, ours = trace.output.token_ids, reference.output
    differ = next((i for i, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
    if differ is None:
        assert len(theirs) == len(ours), (len(theirs), len(ours))
    else:
        margin = reference.margins[differ]
        assert margin < NEAR_TIE_LOGITS, f"token {differ} differs at a top-2 margin of {margin:.3f}"


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_trace_takes_specvizs_steps(default_vllm, references, prompt):
    """Real weights accept drafts (the tiny random pair's cannot show long runs): each step of the trace starts
    where one of SpecViz's engine's steps does, verifies and accepts as many drafts and emits its tokens. Past
    a token where vLLM's kernels round a near tie the other way the runs part: the steps before it are
    compared, and the tie is reported with its margin (a warning), never passed silently."""
    trace = streamed(default_vllm, prompt, SpecConfig(k=K, max_new_tokens=TOKENS)).trace()
    agreement = agree_up_to_a_near_tie(trace, references[prompt].steps, f"the default pair, {prompt!r}")
    assert agreement.steps_compared >= 3 and max(step.num_accepted for step in trace.steps) >= 2
    assert trace.config.engine == "vllm 0.32.0" and trace.config.k == K and trace.split is None
