"""A static cache on the page (docs/architecture.md §7): the KV figure draws the rows left past the
write pointer, and the step's cache arithmetic says the cut moved the pointer and freed nothing,
with the record's own numbers; a dynamic cache's views say none of it."""

from __future__ import annotations

import pytest

from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.tiny import build_tiny_pair
from specviz.figures.kv_cache import STATIC_SUBTITLE, kv_cache_figure
from specviz.run.cache_story import draft_story, target_story
from specviz.run.step_detail import cache_sentence


@pytest.fixture(scope="module")
def traces():
    engine = SpeculativeEngine(build_tiny_pair(seed=0))
    config = SpecConfig(k=4, max_new_tokens=30)
    return {cache: engine.generate("Speculative decoding is", config.replace(cache=cache))
            for cache in ("static", "dynamic")}


def test_the_kv_figure_draws_the_masked_rows_of_a_static_cache(traces):
    figure = kv_cache_figure(traces["static"])
    masked = [trace for trace in figure.data if trace.meta == "target.masked"]
    assert len(masked) == 1 and masked[0].line.dash == "dot"          # a line style, not a colour alone
    spans = [(low, high) for low, high in zip(masked[0].y[0::3], masked[0].y[1::3])]
    steps = [step for step in traces["static"].steps if step.kv_target.masked]
    assert spans == [(s.kv_target.after_cutoff, s.kv_target.after_cutoff + s.kv_target.masked) for s in steps]
    assert STATIC_SUBTITLE in figure.layout.title.subtitle.text.replace("<br>", " ")
    assert any(trace.name == "cutoff (the write pointer moves back)" for trace in figure.data)
    dynamic = kv_cache_figure(traces["dynamic"])
    assert not [trace for trace in dynamic.data if str(trace.meta).endswith(".masked")]
    assert "static cache" not in dynamic.layout.title.subtitle.text


def test_the_cache_story_says_the_pointer_moved_and_nothing_was_freed(traces):
    trace = traces["static"]
    step = next(s for s in trace.steps if s.kv_target.cutoff and s.kv_draft.cutoff)
    previous = trace.steps[step.index - 1]
    cache = step.kv_target
    words = " ".join(target_story(step, previous, "truncate", "").sentences)
    assert (f"The write pointer moves back from {cache.after_forward} to {cache.after_cutoff}" in words
            and f"({cache.masked} such rows now, in a cache sized once for {cache.capacity})" in words)
    assert "Static cache: nothing is freed" in " ".join(draft_story(step, previous, "truncate", True, "").sentences)
    assert "pointer moved back" in cache_sentence("target", cache)
    same = traces["dynamic"].steps[step.index]
    assert "pointer" not in " ".join(target_story(same, traces["dynamic"].steps[step.index - 1], "truncate", "").sentences)
