"""The default pair's target (qwen-coder: Qwen2.5-Coder 1.5B) on a real vLLM server speculating by n-gram
lookup (markers real_models and vllm), as `scripts/vllm.sh start --method ngram` serves it: vLLM's default
(5, 5) lookup, k = 5, float32, detailed per-request metrics; started once for this module and stopped after.

The oracle (tests/vllm_oracle.py) is SpecViz's own engine on the same weights, greedy, drafting by SpecViz's
port of vLLM's lookup (engine/vllm/ngram.py) with the server's settings: every step of the trace built from the
stream must start where one of SpecViz's does, verify as many drafts, accept as many and emit its tokens. A
token vLLM's kernels round the other way is allowed only at a near tie and reported with its margin. The
prompts make the answer copy from the prompt (a repeat, a code edit), so the lookup drafts and long runs are
accepted: a lookup that drafted nothing would compare nothing.
"""

from __future__ import annotations

import pytest

from engine.config import NGRAM_DRAFTER, SpecConfig
from engine.vllm.ngram import DEFAULT_LOOKUP
from memory_room import GIB
from vllm_oracle import Reference, agree_up_to_a_near_tie, reference
from vllm_session import default_pair_server, streamed

pytestmark = [pytest.mark.real_models, pytest.mark.vllm, pytest.mark.needs_most_memory]
K, TOKENS = 5, 24
PROMPTS = ("Repeat exactly, once: red green blue, red green blue, red green blue.",
           "Rename x to total. Reply with the code only, no explanation:\n"
           "def add_all(values):\n    x = 0\n    for value in values:\n        x = x + value\n    return x")
# The target alone; the draft-model server of the same module pair holds 15.6 GiB at its peak, this one less
# (predicted, not measured: the target's weights and their oneDNN-packed copy, without the draft's).
SERVER_NEED_BYTES = 12 * GIB
CONFIG = SpecConfig(k=K, drafter=NGRAM_DRAFTER, ngram_min=DEFAULT_LOOKUP[0], ngram_max=DEFAULT_LOOKUP[1],
                    max_new_tokens=TOKENS)


@pytest.fixture(scope="module")
def references() -> dict[str, Reference]:
    """SpecViz's steps for each prompt (chat-formatted), worked out before the server starts and then freed."""
    import gc

    from engine.loading.models import load_pair
    pair = load_pair("qwen-coder", draft="ngram", target_dtype="float32", prepack=False)
    found = {prompt: reference(pair, pair.encode_prompt(prompt), TOKENS, CONFIG, max_model_len=1024)
             for prompt in PROMPTS}
    del pair
    gc.collect()
    return found


@pytest.fixture(scope="module")
def ngram_vllm(references, tmp_path_factory, shared_servers):
    with default_pair_server(tmp_path_factory.mktemp("vllm-default-ngram"), "ngram", K, SERVER_NEED_BYTES,
                             shared_servers.stop_all) as url:
        yield url


@pytest.mark.parametrize("prompt", PROMPTS)
def test_an_ngram_trace_takes_specvizs_steps(ngram_vllm, references, prompt):
    trace = streamed(ngram_vllm, prompt, CONFIG, method="ngram").trace()
    assert list(trace.prompt.token_ids) == list(references[prompt].prompt), "the server formatted it otherwise"
    assert (trace.config.drafter, trace.config.k, trace.config.ngram_min, trace.config.ngram_max) == \
        (NGRAM_DRAFTER, K, *DEFAULT_LOOKUP)
    agreement = agree_up_to_a_near_tie(trace, references[prompt], f"the default target by n-gram, {prompt!r}")
    drafted = [step for step in trace.steps[1:] if step.k]
    assert agreement.steps_compared >= 3 and drafted, (agreement, [step.k for step in trace.steps])
    assert max(step.num_accepted for step in drafted) >= 2           # the lookup copied, and the target kept it
    assert trace.config.engine == "vllm 0.32.0" and trace.split is None and trace.complete
