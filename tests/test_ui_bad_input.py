"""The UI's bad-input catalogue (issue #7): every input a user or an API caller can get wrong
is one gr.Error sentence, nothing starts or changes, and the app stays usable.

Controls through the launched server (API callers can send any JSON for any control);
models through the handlers on app.py's real EngineRunner (tiny-random, files in tmp_path);
trace uploads through the upload handler.
"""

from __future__ import annotations

import json
import re

import gradio as gr
import pytest
from gradio_client import Client

from app import EngineRunner
from control_values import controls, progress
from engine.formats.trace import MAX_TRACE_BYTES
from fakes import FakeRunner
from specviz.controls import MAX_PROMPT_CHARS
from specviz.run.handlers import Handlers
from specviz.serving.runner import CUSTOM
from specviz.run.views import Views
from test_models import _fake_gguf, _save_tiny
from trace_factory import make_trace
from ui_server import serve

NAMES = Views.names()


def run_args(**changes) -> dict:
    values = dict(large=False, width=1280, preset="tiny-random", draft="", target="", drafter="model",
                  prompt="def fib(n):", k=4, adaptive_k=False, temperature=0.0, top_p=1.0, top_k=0,
                  max_new_tokens=16, seed=0, draft_dtype="float32", target_dtype="float32", with_baseline=False)
    values.update(changes)
    return values


# --- the controls, as an API caller can send them -------------------------------------------------

CONTROL_ERRORS = [
    (dict(k=0), "k must be a whole number from 1 to 16, got 0"),
    (dict(k=40), "k must be a whole number from 1 to 16, got 40"),
    (dict(k=17), "k must be a whole number from 1 to 16, got 17"),
    (dict(k=2.5), "k must be a whole number, got 2.5"),
    (dict(k="four"), "k must be a number, got 'four'"),
    (dict(k=None), "k is empty: enter a number"),
    (dict(k=[4]), "k must be a number, got '[4]'"),
    (dict(temperature=-0.5), "temperature must be between 0 and 2, got -0.5"),
    (dict(temperature=2.5), "temperature must be between 0 and 2, got 2.5"),
    (dict(temperature="hot"), "temperature must be a number, got 'hot'"),
    (dict(top_p=0), "top-p must be in (0, 1], got 0.0"),
    (dict(top_p=1.5), "top-p must be in (0, 1], got 1.5"),
    (dict(top_p="most"), "top-p must be a number, got 'most'"),
    (dict(top_k=-3), "top-k must be a whole number >= 0, got -3"),
    (dict(top_k="x"), "top-k must be a number, got 'x'"),
    (dict(max_new_tokens=0), "max new tokens must be a whole number from 1 to 512, got 0"),
    (dict(max_new_tokens=10_000), "max new tokens must be a whole number from 1 to 512, got 10000"),
    (dict(max_new_tokens=513), "max new tokens must be a whole number from 1 to 512, got 513"),
    (dict(max_new_tokens="lots"), "max new tokens must be a number, got 'lots'"),
    (dict(seed=-1), "seed must be a whole number >= 0, got -1"),
    (dict(seed=1.5), "seed must be a whole number, got 1.5"),
    (dict(seed="s"), "seed must be a number, got 's'"),
    (dict(seed=True), "seed must be a number, got True"),
    (dict(seed=10 ** 30), "seed must be a whole number >= 0, got 1000000000000000019884624838656"),
    (dict(prompt="   \n\t "), "The prompt is empty"),
    (dict(prompt=None), "The prompt is empty"),
    (dict(prompt=42), "the prompt must be text, got int"),
    (dict(prompt="x" * (MAX_PROMPT_CHARS + 1)), f"the limit is {MAX_PROMPT_CHARS}"),
    (dict(preset=""), "Choose a model preset"),
    (dict(preset=["tiny-random"]), "the preset must be text, got list"),
    (dict(preset=CUSTOM), "Enter a target model"),
    (dict(preset=CUSTOM, target="gpt2"), "Enter a draft model for the custom pair, or switch the drafter"),
    (dict(drafter="beam"), "drafter must be one of model, ngram, got 'beam'"),
    (dict(draft_dtype="float8"), "draft dtype must be one of auto, float32, bfloat16, float16, int8, int4, got 'float8'"),
    (dict(adaptive_k="yes"), "adaptive k must be true or false, got 'yes'"),
    (dict(with_baseline=1), "the target-only comparison must be true or false, got 1"),
]


@pytest.fixture(scope="module")
def fake_server():
    runner = FakeRunner(accepted=(4, 2))
    demo, url = serve(runner)
    yield Client(url, verbose=False), runner
    demo.close()


def test_every_bad_control_value_is_one_clear_error_through_the_server(fake_server):
    client, runner = fake_server
    for changes, message in CONTROL_ERRORS:
        with pytest.raises(Exception, match=re.escape(message)):
            client.predict(**run_args(**changes), api_name="/run")
    assert runner.requests == []                                      # nothing started
    for seed, width in enumerate(("wide", None, -5, 10 ** 9)):          # the page's own hidden values, garbled
        result = dict(zip(NAMES[1:], client.predict(**run_args(width=width, seed=seed), api_name="/run")))
        assert result["status"].startswith("Done")
    assert len(runner.requests) == 4                                  # and the app stays usable


# --- models, on the real loader -------------------------------------------------------------------

@pytest.fixture(scope="module")
def engine_handlers():
    return Handlers(EngineRunner(device="cpu"), min_interval=60.0)


def run_all(handlers: Handlers, **changes) -> list[dict]:
    return [dict(zip(NAMES, out)) for out in handlers.run(None, False, None, *controls(**changes), progress=progress)]


def model_errors(tmp_path) -> list[tuple[dict, str]]:
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "notes.txt").write_text("hello")
    odd_gguf = _fake_gguf(tmp_path / "odd.gguf", "foo-arch")
    small, big = _save_tiny(tmp_path / "small", "ab"), _save_tiny(tmp_path / "big", "abcdefgh")
    custom = dict(preset=CUSTOM, drafter="ngram", draft="")
    return [
        (dict(prompt="x" * 1100, max_new_tokens=64), "Could not start: the prompt is 1101 tokens; with 64 new tokens "
                                                     "that exceeds the target tiny-random/target's context of 1024 "
                                                     "tokens"),
        (dict(preset="no-such-preset"), "Could not start: unknown preset 'no-such-preset'; choose one of: qwen-coder"),
        (dict(custom, target=str(tmp_path / "missing")), "not found: no such file or directory, and not a Hub id"),
        (dict(custom, target=str(not_a_model)), "does not hold a model: it has no config.json"),
        (dict(custom, target=str(not_a_model / "notes.txt")), "is a file but not a .gguf file"),
        (dict(custom, target=str(odd_gguf)), "holds a 'foo-arch' model, an architecture transformers cannot load"),
        (dict(preset=CUSTOM, draft=small, target=big), "draft vocabulary has 6 tokens but target has 12: "
                                                       "speculative decoding needs the same tokenizer"),
        (dict(custom, target="specviz-tests/not-cached"), "could not fetch 'specviz-tests/not-cached' from the "
                                                          "Hugging Face Hub \\(HF_HUB_OFFLINE is set\\)"),
    ]


def test_every_model_problem_is_one_clear_error_and_the_next_run_works(engine_handlers, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    for changes, message in model_errors(tmp_path):
        with pytest.raises(gr.Error, match=message) as caught:
            run_all(engine_handlers, **changes)
        assert "\n" not in caught.value.message and "Traceback" not in caught.value.message
    final = run_all(engine_handlers, prompt="still here", max_new_tokens=12)[-1]
    assert final["status"].startswith("Done") and final["trace"].summary.new_tokens == 12


# --- trace uploads --------------------------------------------------------------------------------

def _document() -> dict:
    return make_trace([4, 1, 0], sampling=True).to_dict()


def _with(change) -> bytes:
    document = _document()
    change(document)
    return json.dumps(document).encode()


UPLOAD_ERRORS = [
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not valid JSON"),
    (b"name,k\nrun,4\n", "not valid JSON"),
    (json.dumps(_document())[:-40].encode(), "not valid JSON .*the file may be truncated"),
    (b"[1, 2, 3]", "trace must be an object, got list"),
    (b'{"schema": "specviz.sweep/1", "runs": []}', "schema must be 'specviz.trace/2' or 'specviz.trace/1', got 'specviz.sweep/1'"),
    (_with(lambda d: d.pop("steps")), "missing field steps"),
    (_with(lambda d: d["steps"][0].update(num_accepted="4")), r"steps\[0\].num_accepted must be a whole number"),
    (_with(lambda d: d["summary"].update(accepted=99)), "summary.accepted is 99 but the steps give"),
    (_with(lambda d: d["steps"][1].update(num_accepted=3)), r"steps\[1\] says 3 accepted but its verdicts accept 1"),
    (_with(lambda d: d["output"].update(token_ids=[1, 2])), "output.token_ids differ from the tokens its steps emitted"),
    (_with(lambda d: d["steps"][1]["accept_prob"].__setitem__(1, "x")),
     r'steps\[1\]\.accept_prob\[1\] must be a probability or null, got "x"'),
    (_with(lambda d: d["steps"][1]["overlap"].__setitem__(1, "x")), r'steps\[1\]\.overlap\[1\] must be a probability'),
    (b'{"schema": ' + b"9" * 5000 + b"}", "it holds a number thousands of digits long"),
    (b"[" * 100_000, "its JSON is nested too deeply to read"),
    (b" " * (MAX_TRACE_BYTES + 1), "over the 20 MiB trace size limit"),
    (b"", "The uploaded file is empty"),
]


@pytest.mark.parametrize("data, message", UPLOAD_ERRORS, ids=[m.split(" ")[0] + str(i) for i, (_, m) in
                                                              enumerate(UPLOAD_ERRORS)])
def test_every_bad_trace_upload_is_one_clear_error(data, message):
    with pytest.raises(gr.Error, match=message) as caught:
        Handlers(FakeRunner()).upload(data, False, None)
    assert "\n" not in caught.value.message


def test_a_good_upload_after_bad_ones_replays():
    handlers, good = Handlers(FakeRunner()), make_trace([4, 1, 0], sampling=True)
    for data, _ in UPLOAD_ERRORS[:3]:
        with pytest.raises(gr.Error):
            handlers.upload(data, False, None)
    out = dict(zip(NAMES, handlers.upload(good.to_json().encode(), False, None)))
    assert out["trace"] == good and "3 steps" in out["status"]
