"""Hosted mode (`python app.py --hosted`, SPECVIZ_HOSTED=1, or any Hugging Face Space unless
SPECVIZ_HOSTED=0): presets' models only, no local paths, short runs, and the page says so. The
policy alone, then through the handlers, the page, app.py's runner and app.py's command line;
and a Space's caches on its persistent storage."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from app import EngineRunner
from control_values import controls, progress
from engine.config import ConfigError, SpecConfig
from engine.presets import PRESETS, looks_like_path
from fakes import FakeRunner
from specviz.run.handlers import Handlers
from specviz.layout import build_demo
from specviz.controls import Controls
from specviz.serving.policy import HOSTED_ENV, Policy, hosted_from_env, preset_models
from specviz.serving.runner import CUSTOM, ModelChoice, RunRequest
from specviz.serving.space import SPACE_ENV, use_persistent_storage

HOSTED = Policy.hosted_default()


def request(models: ModelChoice = ModelChoice(preset="tiny-random"), **config) -> RunRequest:
    return RunRequest(models, "def f():", SpecConfig(**config))


def test_the_allow_list_is_every_model_the_presets_name():
    allowed = preset_models()
    assert {"distilgpt2", "gpt2", "HuggingFaceTB/SmolLM2-135M-Instruct", "Qwen/Qwen2.5-1.5B-Instruct",
            "embedded:qwen2.5-coder-0.5b-instruct", "embedded:smollm2-135m-instruct"} <= allowed
    assert allowed == {p.target for p in PRESETS.values()} | {p.draft for p in PRESETS.values() if p.draft}
    assert HOSTED.allowed_models == allowed and (HOSTED.max_k, HOSTED.max_new_tokens) == (8, 128)


@pytest.mark.parametrize("value, hosted", [("1", True), ("true", True), (" YES ", True), ("on", True),
                                           ("0", False), ("", False), ("no", False), (None, False)])
def test_hosted_mode_from_the_environment(value, hosted):
    assert hosted_from_env({} if value is None else {HOSTED_ENV: value}) is hosted


@pytest.mark.parametrize("value, hosted", [(None, True), ("", True), ("1", True), ("0", False), ("off", False)])
def test_a_space_is_hosted_unless_its_owner_turns_it_off(value, hosted):
    """A public Space that forgets SPECVIZ_HOSTED must not load paths or any hub id a visitor types."""
    environ = {SPACE_ENV: "teacher/specviz"} | ({} if value is None else {HOSTED_ENV: value})
    assert hosted_from_env(environ) is hosted
    assert hosted_from_env({SPACE_ENV: ""}) is False


def test_an_unclear_hosted_setting_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv(HOSTED_ENV, "maybe")
    with pytest.raises(ConfigError, match="SPECVIZ_HOSTED must be 1 or 0"):
        hosted_from_env()
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("must not start"))
    with pytest.raises(SystemExit) as exit_info:
        app.main(["--no-preload"])
    error = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and "SPECVIZ_HOSTED must be 1 or 0" in error[-1] and "Traceback" not in str(error)


def test_a_space_with_persistent_storage_keeps_its_caches_there(tmp_path):
    environ = {SPACE_ENV: "teacher/specviz"}
    assert use_persistent_storage(environ, tmp_path) == {"SPECVIZ_CACHE": str(tmp_path / "specviz-cache"),
                                                         "HF_HOME": str(tmp_path / "huggingface")}
    assert environ["SPECVIZ_CACHE"] == str(tmp_path / "specviz-cache")
    chosen = {SPACE_ENV: "teacher/specviz", "SPECVIZ_CACHE": "/elsewhere"}
    assert use_persistent_storage(chosen, tmp_path) == {"HF_HOME": str(tmp_path / "huggingface")}
    assert chosen["SPECVIZ_CACHE"] == "/elsewhere"                           # the owner's choice stays
    assert use_persistent_storage({SPACE_ENV: "t/s"}, tmp_path / "missing") == {}   # no persistent storage
    assert use_persistent_storage({}, tmp_path) == {}                        # not a Space


def test_a_classroom_server_takes_any_model_within_the_page_ranges():
    policy = Policy()
    policy.check(request(ModelChoice(draft="/models/draft", target="./target.gguf"), k=16, max_new_tokens=512,
                         temperature=2.0))
    with pytest.raises(ConfigError, match="k must be a whole number from 1 to 16, got 17"):
        policy.check(request(k=17))
    with pytest.raises(ConfigError, match="max new tokens must be a whole number from 1 to 512, got 600"):
        policy.check(request(max_new_tokens=600))
    with pytest.raises(ConfigError, match="temperature must be between 0 and 2, got 3"):
        policy.check(request(temperature=3.0))
    assert policy.note == ""


def test_hosted_mode_caps_k_and_new_tokens():
    HOSTED.check(request(k=8, max_new_tokens=128))
    with pytest.raises(ConfigError, match="k must be a whole number from 1 to 8 on this hosted server, got 9"):
        HOSTED.check(request(k=9))
    with pytest.raises(ConfigError, match="max new tokens must be a whole number from 1 to 128 on this hosted server"):
        HOSTED.check(request(max_new_tokens=129))


def test_hosted_mode_caps_a_token_tree_at_16_nodes_and_a_classroom_server_at_the_engine_limit():
    HOSTED.check(request(k=5, tree_nodes=16, tree_branch=3))
    with pytest.raises(ConfigError, match=r"tree nodes must be a whole number from 0 \(a chain\) to 16 on this hosted "
                                          "server, got 17"):
        HOSTED.check(request(k=5, tree_nodes=17, tree_branch=3))
    with pytest.raises(ConfigError, match="to 16 on this hosted server, got 64"):     # the page's controls say the same
        Controls(preset="tiny-random", draft="", target="", drafter="model", prompt="def f():", k=5, adaptive_k=False,
                 tree_nodes=64, tree_branch=3, temperature=0.0, top_p=1.0, top_k=0, max_new_tokens=16, seed=0,
                 draft_dtype="float32", target_dtype="float32", with_baseline=False).to_request(HOSTED)
    Policy().check(request(k=5, tree_nodes=64, tree_branch=3))


@pytest.mark.parametrize("path", ["/etc/passwd", "./models/qwen", "~/models/qwen", "../qwen", "qwen.GGUF",
                                  "C:\\models\\qwen", "models\\qwen", "tests", "org/../../etc"])
def test_hosted_mode_refuses_local_paths_as_custom_models(path):
    assert looks_like_path(path)
    for models in (ModelChoice(draft=path, target="gpt2"), ModelChoice(draft="distilgpt2", target=path)):
        with pytest.raises(ConfigError, match="is a local path, and this hosted server does not load files"):
            HOSTED.check(request(models))


@pytest.mark.parametrize("reference", ["meta-llama/Llama-3.1-70B", "gpt2-xl", "embedded:something-else"])
def test_hosted_mode_refuses_models_off_the_list(reference):
    assert not looks_like_path(reference)
    with pytest.raises(ConfigError, match=f"'{reference}' is not one this hosted server runs; choose a preset or one "
                                          "of: HuggingFaceTB/"):
        HOSTED.check(request(ModelChoice(draft="", target=reference)))


def test_hosted_mode_takes_every_preset_and_custom_pairs_from_the_list():
    for name in PRESETS:
        HOSTED.check(request(ModelChoice(preset=name)))
    HOSTED.check(request(ModelChoice(draft="distilgpt2", target="gpt2")))
    HOSTED.check(request(ModelChoice(draft="", target="embedded:smollm2-135m-instruct"), drafter="ngram"))
    HOSTED.check(request(ModelChoice(draft="ngram", target="Qwen/Qwen2.5-1.5B-Instruct"), drafter="ngram"))
    with pytest.raises(ConfigError, match="unknown preset 'nope'"):
        HOSTED.check(request(ModelChoice(preset="nope")))


def test_hosted_handlers_refuse_before_anything_starts():
    runner = FakeRunner(accepted=(1,))
    handlers = Handlers(runner, policy=HOSTED)
    for changes, message in ((dict(preset=CUSTOM, draft="distilgpt2", target="/srv/models/big"), "is a local path"),
                             (dict(preset=CUSTOM, draft="", drafter="ngram", target="org/huge"), "not one this hosted"),
                             (dict(k=12), "from 1 to 8 on this hosted server"),
                             (dict(max_new_tokens=400), "from 1 to 128 on this hosted server")):
        with pytest.raises(gr.Error, match=message):
            list(handlers.run(None, False, None, *controls(**changes), progress=progress))
    assert runner.requests == []
    updates = list(handlers.run(None, False, None, *controls(preset=CUSTOM, draft="distilgpt2", target="gpt2"),
                                progress=progress))
    assert updates[-1][-1].startswith("Done") and runner.requests[0].models.target == "gpt2"
    assert "hosted mode, no local paths" in handlers.preset_changed(CUSTOM)[3]
    assert "local folder" in Handlers(runner).preset_changed(CUSTOM)[3]


def _component(demo: gr.Blocks, elem_id: str):
    return next((block for block in demo.blocks.values() if getattr(block, "elem_id", None) == elem_id), None)


def test_the_page_says_it_is_hosted_and_caps_its_sliders():
    hosted = build_demo(FakeRunner(), policy=HOSTED)
    note = _component(hosted, "sv-hosted")
    assert note is not None and "**Hosted mode**" in note.value and "no local paths" in note.value
    assert "gpt2" in note.value and "k up to 8" in note.value and "128 new tokens" in note.value
    assert _component(hosted, "sv-k").maximum == 8 and _component(hosted, "sv-max-new").maximum == 128
    classroom = build_demo(FakeRunner())
    assert _component(classroom, "sv-hosted") is None
    assert _component(classroom, "sv-k").maximum == 16 and _component(classroom, "sv-max-new").maximum == 512


def test_the_engine_runner_checks_again_before_loading(monkeypatch):
    import engine
    monkeypatch.setattr(engine, "load_pair", lambda *args, **kwargs: pytest.fail("nothing may load"))
    runner = EngineRunner(device="cpu", policy=HOSTED)
    with pytest.raises(ConfigError, match="is a local path"):
        runner.start(request(ModelChoice(draft="", target="/srv/models/x"), drafter="ngram"), progress)
    with pytest.raises(ConfigError, match="from 1 to 128 on this hosted server"):
        runner.start(request(max_new_tokens=256), progress)
    with pytest.raises(ConfigError, match="is a local path"):
        runner.with_baseline(request(ModelChoice(draft="./d", target="gpt2")), None)
    with pytest.raises(ConfigError, match="is a local path"):
        next(runner.race(request(ModelChoice(draft="", target="~/x.gguf"), drafter="ngram"), progress, lambda: False))
    with pytest.raises(ConfigError, match="from 1 to 8 on this hosted server"):
        next(runner.race(request(k=9), progress, lambda: False))


@pytest.mark.parametrize("argv, environ, hosted", [([], {}, False), (["--hosted"], {}, True),
                                                   ([], {HOSTED_ENV: "1"}, True), ([], {HOSTED_ENV: "0"}, False),
                                                   ([], {SPACE_ENV: "t/s"}, True),
                                                   (["--no-hosted"], {SPACE_ENV: "t/s"}, False),
                                                   ([], {SPACE_ENV: "t/s", HOSTED_ENV: "0"}, False)])
def test_app_flag_and_environment_switch_hosted_mode(argv, environ, hosted, monkeypatch):
    monkeypatch.delenv(HOSTED_ENV, raising=False)
    monkeypatch.delenv(SPACE_ENV, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    seen = {}
    monkeypatch.setattr(EngineRunner, "preload", lambda runner, models: seen.setdefault("preload", models))
    real_build = app.build_demo

    def build(runner, **kwargs):
        seen["runner"], seen["policy"] = runner, kwargs["policy"]
        return real_build(runner, **kwargs)

    monkeypatch.setattr(app, "build_demo", build)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: seen.setdefault("launch", kwargs))
    app.main(argv)
    assert seen["policy"].hosted is hosted and (seen["runner"].policy is not None) is hosted
    launch = seen["launch"]
    assert launch["max_file_size"] == app.MAX_UPLOAD == "20mb" and launch["state_session_capacity"] == app.MAX_SESSIONS
    assert "allowed_paths" not in launch and "blocked_paths" not in launch and not launch["share"]
    assert seen["preload"] == ModelChoice(preset="qwen-coder")        # the default pair starts loading at once
