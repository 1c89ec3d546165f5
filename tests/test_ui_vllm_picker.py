"""The Run tab's "vLLM server (URL)…" model source (issue #32, item 3 page side): the picker shows the
URL box, the controls turn it into a ModelChoice naming the server (one spelling of the address), settings
a server cannot honour are refused in one sentence, and a hosted server connects only to the servers its
operator lists (`--vllm-server`, $SPECVIZ_VLLM_SERVERS): never to an address typed on the page."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from control_values import controls, progress
from engine.config import ConfigError
from fakes import FakeRunner
from specviz.controls import Controls
from specviz.layout import build_demo
from specviz.model_picker import BRANCH_INFO, TREE_NODES_INFO
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from specviz.serving.policy import SERVERS_ENV, Policy, allowed_servers, server_url
from specviz.serving.runner import CUSTOM, VLLM_SERVER
from trace_factory import make_trace

NAMES = Views.names()
SERVER = "http://127.0.0.1:8011"


def server_request(policy: Policy = Policy(), **changes):
    values = dict(zip(Controls.names(), controls(**{"preset": VLLM_SERVER, "server": SERVER, **changes})))
    return Controls(**values).to_request(policy)


@pytest.mark.parametrize("spelling", ["127.0.0.1:8011", "http://127.0.0.1:8011/", "http://127.0.0.1:8011/v1",
                                      " http://127.0.0.1:8011 "])
def test_every_spelling_of_an_address_is_one_server(spelling):
    assert server_url(spelling) == SERVER
    assert server_request(server=spelling).models.server == SERVER


@pytest.mark.parametrize("text", ["localhost", "ftp://host:21", "http://host:8000/metrics", "http://user@host:1",
                                  "http://host:port"])
def test_a_malformed_address_is_one_sentence(text):
    with pytest.raises(ConfigError, match=r"is not a vLLM server address: write it as http://host:port"):
        server_request(server=text)


def test_the_controls_name_the_server_and_its_method():
    request = server_request()
    assert (request.models.server, request.models.server_method) == (SERVER, "draft_model")
    assert server_request(drafter="ngram").models.server_method == "ngram"
    assert request.models.label == f"vLLM server {SERVER}" and request.models.target == ""
    expecting = server_request(target=" target ").models
    assert expecting.target == "target" and expecting.key != request.models.key
    assert request.models.key != server_request(drafter="ngram").models.key     # two runs, not one shared
    with pytest.raises(ConfigError, match=r"Enter the vLLM server's address \(http://host:port\)"):
        server_request(server="  ")


@pytest.mark.parametrize("changes, what", [(dict(tree_nodes=8), "token trees"), (dict(adaptive_k=True), "adaptive k"),
                                           (dict(with_baseline=True), "the target-only comparison")])
def test_settings_a_server_cannot_honour_are_refused(changes, what):
    with pytest.raises(ConfigError, match=f"A run on a vLLM server cannot use {what}"):
        server_request(**changes)
    Controls(**dict(zip(Controls.names(), controls(**changes)))).to_request()   # a preset's run takes them


def test_top_k_is_left_to_the_servers_probe():
    """Only the probe knows whether the server runs SpecViz's CPU sampler fix (tests/test_vllm_real_faults.py)."""
    assert server_request(top_k=40).config.top_k == 40


def test_a_classroom_server_connects_to_any_address_a_hosted_one_only_to_its_list():
    server_request(Policy(), server="http://10.0.0.9:8000")
    hosted = Policy.hosted_default()
    with pytest.raises(ConfigError, match="This hosted server does not connect to vLLM servers typed on the page; "
                                          "its operator can allow some with --vllm-server URL or "
                                          r"\$SPECVIZ_VLLM_SERVERS"):
        server_request(hosted)
    listed = Policy.hosted_default(allowed_servers(["127.0.0.1:8011/v1"]))
    assert server_request(listed).models.server == SERVER              # listed in another spelling
    with pytest.raises(ConfigError, match=r"http://169.254.169.254:80 is not a vLLM server this hosted server "
                                          r"connects to; choose one of: http://127.0.0.1:8011"):
        server_request(listed, server="169.254.169.254:80")
    assert "vLLM servers: http://127.0.0.1:8011 only" in listed.note


def test_the_operator_lists_servers_by_flag_and_environment():
    environ = {SERVERS_ENV: "10.0.0.1:8000, http://10.0.0.2:9000/v1\n10.0.0.3:1"}
    assert allowed_servers(["http://a.example:8000"], environ) == {
        "http://a.example:8000", "http://10.0.0.1:8000", "http://10.0.0.2:9000", "http://10.0.0.3:1"}
    assert allowed_servers([], {}) == frozenset()
    with pytest.raises(ConfigError, match="'nope' is not a vLLM server address"):
        allowed_servers([], {SERVERS_ENV: "10.0.0.1:8000,nope"})


def test_a_bad_listed_server_stops_the_app_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: pytest.fail("must not start"))
    monkeypatch.delenv(SERVERS_ENV, raising=False)
    with pytest.raises(SystemExit):
        app.main(["--no-preload", "--hosted", "--vllm-server", "http://h:1", "--vllm-server", "h"])
    assert "'h' is not a vLLM server address" in capsys.readouterr().err


def test_hosted_handlers_refuse_an_unlisted_server_and_keep_the_trace_on_screen():
    runner = FakeRunner(accepted=(1,))
    handlers = Handlers(runner, policy=Policy.hosted_default())
    shown = make_trace([2, 3])
    with pytest.raises(gr.Error, match="This hosted server does not connect to vLLM servers typed on the page"):
        list(handlers.run(shown, False, None, *controls(preset=VLLM_SERVER, server=SERVER), progress=progress))
    assert runner.requests == []                                   # no request left this server
    restyled = dict(zip(NAMES, handlers.restyle(shown, 1, False, None, "")))
    assert restyled["trace"] is shown and "Step 1" in restyled["detail"]


def test_the_picker_shows_the_url_box_only_for_the_server():
    handlers = Handlers(FakeRunner())
    draft, target, drafter, text, server, *_ = handlers.preset_changed(VLLM_SERVER)
    assert server["visible"] and not draft["visible"]
    assert target["visible"] and target["label"] == "Expected model (optional)"      # the model it must serve
    assert "--per-request-spec-decode-metrics detailed" in text and "the k slider is not used" in text
    draft, target, drafter, text, server, *_ = handlers.preset_changed("tiny-random")
    assert not server["visible"] and not target["visible"] and target["label"] == "Target model"
    listed = Handlers(FakeRunner(), policy=Policy.hosted_default(frozenset({SERVER})))
    assert f"connects only to: {SERVER}" in listed.preset_changed(VLLM_SERVER)[3]


def test_a_vllm_server_turns_off_the_controls_it_ignores_and_says_why():
    """Issue 41: with a vLLM server chosen, k, adaptive k, tree nodes and branch stayed active although "the k
    slider is not used". They are turned off, each with its reason, adaptive k unticked and tree nodes at 0 (what
    a server's run accepts: check_server_run refuses the others); any other choice turns them on again."""
    handlers = Handlers(FakeRunner())
    k, adaptive, nodes, branch = handlers.preset_changed(VLLM_SERVER)[5:]
    assert [c["interactive"] for c in (k, adaptive, nodes, branch)] == [False] * 4
    assert "vLLM server" in k["info"] and "own" in adaptive["info"] and "chain" in nodes["info"] == branch["info"]
    assert adaptive["value"] is False and nodes["value"] == 0
    request = controls(preset=VLLM_SERVER, server=SERVER, adaptive_k=adaptive["value"], tree_nodes=nodes["value"])
    assert Controls(*request).to_request(Policy()).models.server          # the values it leaves are accepted
    for preset in ("tiny-random", CUSTOM):
        k, adaptive, nodes, branch = handlers.preset_changed(preset)[5:]
        assert [c["interactive"] for c in (k, adaptive, nodes, branch)] == [True] * 4
        assert nodes["info"] == TREE_NODES_INFO and branch["info"] == BRANCH_INFO and "value" not in nodes
    demo = build_demo(FakeRunner())                       # the page's own notes are the ones turned on again
    assert _component(demo, "sv-tree-nodes").info == TREE_NODES_INFO
    assert _component(demo, "sv-tree-branch").info == BRANCH_INFO


def _component(demo: gr.Blocks, elem_id: str):
    return next(block for block in demo.blocks.values() if getattr(block, "elem_id", None) == elem_id)


def test_the_page_offers_the_server_beside_the_presets():
    demo = build_demo(FakeRunner(), policy=Policy.hosted_default(frozenset({SERVER})))
    preset = _component(demo, "sv-preset")
    assert ("vLLM server (URL)…", VLLM_SERVER) in [tuple(choice) for choice in preset.choices]
    box = _component(demo, "sv-server")
    assert box.value == SERVER and not box.visible              # hosted: the operator's server, hidden until picked
