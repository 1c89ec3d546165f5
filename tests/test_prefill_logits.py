"""Only the logits a step reads are computed: the draft's prompt prefill, its carryover feed and
the target's first verify run the vocabulary head over their last rows only (`logits_to_keep`),
never over the whole prompt. Oracle: forward hooks counting the rows each output head sees."""

from __future__ import annotations

import pytest
import torch

from engine import SpecConfig
from engine.decode.generation import Generation
from engine.loading.tiny import build_tiny_pair

pytestmark = pytest.mark.cpu_arithmetic     # run again with the CPU capped to AVX2 (scripts/test.sh)


def _head_rows(model: torch.nn.Module, seen: list[int]) -> None:
    head = model.get_output_embeddings()
    head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0].reshape(-1, inputs[0].shape[-1]).shape[0]))


def test_prefill_and_verify_compute_only_the_rows_they_read():
    pair = build_tiny_pair(seed=2)
    draft_rows: list[int] = []
    target_rows: list[int] = []
    _head_rows(pair.draft, draft_rows)
    _head_rows(pair.target, target_rows)
    k = 3
    prompt_ids = pair.encode_prompt("a prompt long enough to span many positions", raw=True)
    generation = Generation(pair, "p", prompt_ids, SpecConfig(k=k, max_new_tokens=20, temperature=0.0))
    assert len(prompt_ids) > k + 1
    record = generation.step()                                      # prefills both caches
    assert draft_rows == [1] * record.k                              # the prompt prefill included
    assert target_rows == [record.k + 1]
    while not generation.is_done:                                    # carryover feeds (2 tokens) too
        generation.step()
    assert set(draft_rows) == {1}
    assert max(target_rows) <= k + 1
