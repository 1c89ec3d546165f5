"""Both forms of vLLM's per-request speculative statistics (engine/vllm/stream.py), from recorded responses:
- vLLM 0.32.0 (`--per-request-spec-decode-metrics detailed`): `metrics.speculative_decoding` on the final
  usage chunk, a dense histogram list (tests/data/vllm/, recorded on a real 0.32.0 server; the shape is
  vllm/v1/metrics/stats.py `RequestSpecDecodeMetrics.to_dict` in the 0.32.0 wheel);
- vLLM's main branch (`--per-request-spec-decode-stats detailed`): `speculative_decoding_stats` on the
  terminal chunk's choice, a sparse histogram map (docs/features/speculative_decoding/acceptance_metrics.md
  at vllm-project/vllm cd199986df1171c3255ce2e07e2c63be4385ef9f; the recording rewritten into that form by
  tests/vllm_replay.py `main_branch_form`, served over real HTTP).
"""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.vllm.server_info import ServerInfo
from engine.vllm.source import VllmGeneration
from engine.vllm.stream import SpecMetrics, speculative_payload
from engine.vllm.transport import VllmError, parse_address
from vllm_replay import Faults, ReplayServer, load_recording

RECORDING = load_recording()

# The summary example of each form, as each source writes it (no per-step arrays: `summary` level).
V032_SUMMARY = {"mean_acceptance_length": 1.2325581395348837, "draft_acceptance_rate": 0.07751937984496124,
                "acceptance_histogram": [39, 1, 0, 3], "acceptance_histogram_by_draft_length": {"3": [39, 1, 0, 3]},
                "num_spec_steps": 43, "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3}
MAIN_SUMMARY_CHOICE = {"index": 0, "message": {"role": "assistant", "content": "..."}, "finish_reason": "stop",
                       "speculative_decoding_stats": {
                           "mean_acceptance_length": 1.2325581395348837, "draft_acceptance_rate": 0.07751937984496124,
                           "acceptance_histogram": {"0": 39, "1": 1, "3": 3}, "num_spec_steps": 43,
                           "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3}}


def test_both_summary_forms_read_alike() -> None:
    old = SpecMetrics.from_json(speculative_payload({"choices": [], "metrics": {"speculative_decoding": V032_SUMMARY}}))
    new = SpecMetrics.from_json(speculative_payload({"choices": [MAIN_SUMMARY_CHOICE]}))
    assert old == new and new.acceptance_histogram == (39, 1, 0, 3) and new.num_spec_tokens == 3
    assert speculative_payload({"choices": [{"index": 0, "speculative_decoding_stats": None}]}) is None


def test_a_sparse_histogram_outside_k_is_one_sentence() -> None:
    stats = dict(MAIN_SUMMARY_CHOICE["speculative_decoding_stats"], acceptance_histogram={"0": 39, "4": 4})
    with pytest.raises(VllmError, match="not in a form vLLM sends") as error:
        SpecMetrics.from_json(stats)
    assert str(error.value).count(". ") == 0


def run(server: ReplayServer, name: str = "greedy"):
    body = RECORDING["streams"][name]["body"]
    card = RECORDING["models"]["data"][0]
    info = ServerInfo(parse_address(server.url), card["id"], card["root"], card.get("max_model_len"),
                      RECORDING["version"]["version"], "draft_model", 3, True, "float32")
    prompt = next(p for p, ids in RECORDING["tokenize"].items() if ids == body["prompt"])
    generation = VllmGeneration(info, prompt, SpecConfig(k=3, temperature=body["temperature"], seed=body["seed"],
                                                         max_new_tokens=body["max_tokens"], raw=True))
    while not generation.is_done:
        generation.step()
    return generation


@pytest.mark.parametrize("name", ["greedy", "sampled"])
def test_a_main_branch_stream_draws_the_same_trace(name) -> None:
    old_server, new_server = ReplayServer(RECORDING), ReplayServer(RECORDING, Faults(main_branch=True))
    try:
        old, new = run(old_server, name), run(new_server, name)
    finally:
        old_server.close()
        new_server.close()
    served = [e for e in RECORDING["streams"][name]["events"] if not e.get("choices")][0]
    assert old.metrics == new.metrics == SpecMetrics.from_json(served["metrics"]["speculative_decoding"])
    assert new.metrics.per_step_accepted and new.trace().split is None

    def shape(generation):
        return [(s.k, s.num_accepted, [e.id for e in s.emitted], s.kv_target) for s in generation.trace().steps]
    assert shape(old) == shape(new)
