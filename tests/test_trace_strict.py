"""The trace reader's strict checks, one by one: each malformed value is one TraceFormatError whose
message names the field's path (the bugs of the "Trust" issue first)."""

from __future__ import annotations

import json
import re

import pytest

from engine.formats.trace import Trace, TraceFormatError
from specviz.run.views import render
from trace_factory import make_trace

NAN, INF = float("nan"), float("inf")


def _document() -> dict:
    """Three sampled steps of k = 4 that accepted 4 (bonus), 1 and 0 drafts."""
    return make_trace([4, 1, 0], sampling=True).to_dict()


def _step(document: dict, index: int) -> dict:
    return document["steps"][index]


def _refused(change, message: str) -> None:
    document = _document()
    change(document)
    with pytest.raises(TraceFormatError, match=f"^{re.escape(message)}$"):
        Trace.from_dict(document)


def test_the_unchanged_document_loads_and_renders():
    trace = Trace.from_dict(_document())
    assert trace == make_trace([4, 1, 0], sampling=True)
    render(trace, "", selected=1)


def test_a_non_number_overlap_is_refused_by_path_not_a_type_error():
    _refused(lambda d: _step(d, 1)["overlap"].__setitem__(1, "x"), 'steps[1].overlap[1] must be a probability, got "x"')


def test_a_non_number_accept_prob_is_refused_before_it_reaches_a_renderer():
    _refused(lambda d: _step(d, 1)["accept_prob"].__setitem__(1, "x"),
             'steps[1].accept_prob[1] must be a probability or null, got "x"')


def test_a_number_too_long_for_python_is_a_trace_format_error():
    with pytest.raises(TraceFormatError, match="a number thousands of digits long"):
        Trace.from_json('{"schema": ' + "9" * 5000 + "}")


def test_json_nested_too_deeply_is_a_trace_format_error():
    with pytest.raises(TraceFormatError, match="nested too deeply"):
        Trace.from_json("[" * 100_000)


def _set(*path_and_value):
    """A change that sets document[path...] = value."""
    *path, key, value = path_and_value

    def change(document: dict) -> None:
        node = document
        for part in path:
            node = node[part]
        node[key] = value
    return change


def _pop(*path):
    *path, key = path

    def change(document: dict) -> None:
        node = document
        for part in path:
            node = node[part]
        del node[key]
    return change


WHOLE = "a whole number from 0 to 2147483647"
MALFORMED = [
    # wrong types, NaN and infinities, huge and negative numbers
    (_set("steps", 0, "draft", 0, "text", 5), "steps[0].draft[0].text must be a string, got 5"),
    (_set("prompt", "text", "\ud800"), 'prompt.text must be a string, got "\\ud800"'),
    (_set("steps", 0, "timing_ms", "draft", NAN), "steps[0].timing_ms.draft must be a number from 0 to 1e+12, got NaN"),
    (_set("steps", 2, "timing_ms", "verify", -1.5), "steps[2].timing_ms.verify must be a number from 0 to 1e+12, got -1.5"),
    (_set("summary", "wall_s", INF), "summary.wall_s must be a number from 0 to 1e+12, got Infinity"),
    (_set("summary", "baseline", {"tokens_per_s": -2.0, "identical": True}),
     "summary.baseline.tokens_per_s must be a number from 0 to 1e+12, got -2.0"),
    (_set("steps", 0, "draft", 1, "id", 10**30),
     f"steps[0].draft[1].id must be null or {WHOLE}, got 1000000000000000000000000000000"),
    # tokens another engine did not return (docs/architecture.md §10): null ids only where unknown, never emitted
    (_set("steps", 1, "draft", 2, "id", None), 'steps[1].draft[2] needs origin "unknown" exactly when its id is null'),
    (_set("steps", 1, "draft", 2, "origin", "unknown"), 'steps[1].draft[2] needs origin "unknown" exactly when its id is null'),
    (_set("steps", 1, "draft", 2, "origin", "guessed"),
     'steps[1].draft[2].origin must be one of engine, reconstructed, unknown, got "guessed"'),
    (lambda d: _step(d, 1)["draft"][0].update(id=None, origin="unknown"),
     "steps[1].draft[0] stands for an emitted token, so its id must be known"),
    (_set("steps", 1, "target", 1, "id", None), "steps[1].target[1] stands for an emitted token, so its id must be known"),
    (_set("steps", 1, "context_len", 2**31), f"steps[1].context_len must be {WHOLE}, got 2147483648"),
    (_set("steps", 0, "index", True), f"steps[0].index must be {WHOLE}, got true"),
    (_set("prompt", "token_ids", 2, -1), f"prompt.token_ids[2] must be {WHOLE}, got -1"),
    (_set("output", "token_ids", 0, 1.5), f"output.token_ids[0] must be {WHOLE}, got 1.5"),
    (_set("output", "token_ids", "1 2 3"), 'output.token_ids must be a list, got "1 2 3"'),
    (_set("steps", 0, "draft", 2, "q", 1.5), "steps[0].draft[2].q must be a probability or null, got 1.5"),
    (_set("steps", 0, "target", 0, "top", 1, "prob", NAN), "steps[0].target[0].top[1].prob must be a probability, got NaN"),
    (_set("steps", 1, "draws", 0, -INF), "steps[1].draws[0] must be a probability or null, got -Infinity"),
    (_set("steps", 1, "residual", 0, "prob", "0.5"), 'steps[1].residual[0].prob must be a probability, got "0.5"'),
    (_set("steps", 1, "verdicts", 1, "maybe"),
     'steps[1].verdicts[1] must be one of accepted, rejected, unverified, got "maybe"'),
    (_set("steps", 0, "emitted", 0, "kind", "extra"),
     'steps[0].emitted[0].kind must be one of accepted, recovered, bonus, got "extra"'),
    (_set("steps", 2, "eos", "yes"), 'steps[2].eos must be true or false, got "yes"'),
    (_set("steps", 0, "k", 33), "steps[0].k must be a whole number from 0 to 32, got 33"),
    # missing keys
    (_pop("steps", 0, "timing_ms"), "missing field steps[0].timing_ms"),
    (_pop("steps", 1, "emitted", 0, "text"), "missing field steps[1].emitted[0].text"),
    (_pop("prompt", "token_ids"), "missing field prompt.token_ids"),
    # empty lists and lengths inconsistent with k
    (_set("steps", 1, "accept_prob", []),
     "steps[1] has k=4 but 0 accept_prob, 4 draws and 4 overlap values (k each; overlap may be empty)"),
    (lambda d: _step(d, 2)["draws"].pop(),
     "steps[2] has k=4 but 4 accept_prob, 3 draws and 4 overlap values (k each; overlap may be empty)"),
    (lambda d: _step(d, 0)["overlap"].append(0.5),
     "steps[0] has k=4 but 4 accept_prob, 4 draws and 5 overlap values (k each; overlap may be empty)"),
    (_set("steps", 0, "emitted", []), "steps[0] emits 0 tokens after 4 accepted"),
    (_set("steps", 1, "k", 3), "steps[1] has k=3 but 4 draft tokens and 4 verdicts; needs k+1=4 target entries, has 5; "
                               "has k=3 but 4 accept_prob, 4 draws and 4 overlap values (k each; overlap may be empty)"),
    # the order of verdicts and emitted kinds
    (_set("steps", 1, "verdicts", ["rejected", "accepted", "unverified", "unverified"]),
     "steps[1].verdicts must be 1 accepted, then one rejected and the rest unverified"),
    (lambda d: [token.update(kind=kind) for token, kind in zip(_step(d, 1)["emitted"], ("recovered", "accepted"))],
     "steps[1].emitted must be the 1 accepted drafts, then the recovered token (cut short only by EOS or the token limit)"),
    # steps in order, each starting where the one before it ended
    (_set("steps", 1, "index", 5), "steps[1].index must be 1 (steps count from 0), got 5"),
    (lambda d: d["steps"].reverse(), "steps[0].index must be 0 (steps count from 0), got 2"),
    (_set("steps", 2, "context_len", 20), "steps[2].context_len must be 19 (the prompt and the tokens emitted before it), "
                                          "got 20"),
    (_set("steps", 0, "eos", True), "steps[0].eos is true, but steps follow it"),
    # each cache's lengths: a step starts where the last one ended, cutoff is what was removed
    (_set("steps", 1, "kv", "target", "before", 17), "steps[1].kv.target.before is 17 but the step before ended at 16"),
    (_set("steps", 2, "kv", "draft", "after_forward", 10), "steps[2].kv.draft.after_forward (10) is below before (18)"),
    (_set("steps", 1, "kv", "target", "cutoff", 5),
     "steps[1].kv.target.after_cutoff (18) must be after_forward (21) - cutoff (5)"),
    (_set("steps", 0, "kv", "target", "stale", 17), "steps[0].kv.target.stale (17) exceeds the cache length 16"),
    (_set("steps", 0, "kv", "draft", "stale", 3), "steps[1].kv.draft.stale fell from 3 to 0 (stale positions only pile up)"),
    (_pop("steps", 2, "kv", "target", "stale"),
     "missing field steps[2].kv.target.stale (specviz.trace/2 records stale positions)"),
    # config: SpecConfig's types, then its ranges, each named by field
    (_set("config", "k", "4"), 'config.k must be a whole number below 2**63, got "4"'),
    (_set("config", "k", True), "config.k must be a whole number below 2**63, got true"),
    (_set("config", "carryover", "false"), 'config.carryover must be true or false, got "false"'),
    (_set("config", "temperature", NAN), "config.temperature must be a finite number, got NaN"),
    (_set("config", "seed", 2**64), "config.seed must be a whole number below 2**63, got 18446744073709551616"),
    (_set("config", "target", ["a"]), 'config.target must be a string, got ["a"]'),
    (_set("config", "top_p", 1.5), "config.top_p: top-p must be in (0, 1], got 1.5"),
    (_set("config", "ngram_min", 5), "config.ngram_min: n-gram sizes need 1 <= min <= max <= 16, got 5..3"),
    (_set("config", "draft_temperature", 1.0),
     "config.temperature: sampled drafting with greedy verification needs temperature 0 for the target"),
]


@pytest.mark.parametrize("change, message", MALFORMED, ids=[re.sub(r"\W+", "-", message)[:48] for _, message in MALFORMED])
def test_each_malformed_value_is_refused_naming_its_field(change, message):
    _refused(change, message)


def test_an_error_message_shows_what_json_cannot_by_its_type():
    document = _document()
    _step(document, 0)["draft"][0]["text"] = {1, 2}
    with pytest.raises(TraceFormatError, match=r"^steps\[0\]\.draft\[0\]\.text must be a string, got set$"):
        Trace.from_dict(document)


def test_a_huge_number_in_a_file_is_named_by_its_field():
    text = json.dumps(_document()).replace('"context_len": 12', '"context_len": 1' + "0" * 40, 1)
    with pytest.raises(TraceFormatError, match=r"^steps\[0\]\.context_len must be a whole number from 0 to 2147483647"):
        Trace.from_json(text)
