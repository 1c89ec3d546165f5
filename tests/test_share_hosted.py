"""A public link is hosted (issue 38, item 6): `python app.py --share` turns hosted mode on unless
`--no-hosted` is given explicitly, and a server reachable from other machines without hosted mode
prints exactly one warning line. Through app.py's real command line and the real page; only
Gradio's launch is replaced (no tunnel: there is no network) and the default pair is not loaded."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from engine.config import ConfigError
from specviz.serving.policy import HOSTED_ENV
from specviz.serving.space import SPACE_ENV


def boot(argv: list[str], monkeypatch, capsys, environ: dict[str, str] | None = None) -> tuple[dict, list[str]]:
    """Run app.main(argv) up to its launch; what it launched with and the lines it printed to stderr."""
    for name in (HOSTED_ENV, SPACE_ENV, "GRADIO_SERVER_NAME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in (environ or {}).items():
        monkeypatch.setenv(name, value)
    seen: dict = {}
    real_build = app.build_demo

    def build(runner, **kwargs):
        seen["policy"], seen["runner"] = kwargs["policy"], runner
        return real_build(runner, **kwargs)

    monkeypatch.setattr(app, "build_demo", build)
    monkeypatch.setattr(gr.Blocks, "launch", lambda self, **kwargs: seen.setdefault("launch", kwargs))
    capsys.readouterr()
    app.main([*argv, "--no-preload"])
    return seen, [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_a_share_link_is_hosted_and_cannot_reach_an_unlisted_address(monkeypatch, capsys):
    seen, printed = boot(["--share"], monkeypatch, capsys)
    assert seen["launch"]["share"] is True
    policy = seen["policy"]
    assert policy.hosted and seen["runner"].policy is policy and printed == []
    with pytest.raises(ConfigError, match="does not connect to vLLM servers typed on the page"):
        policy.check_server("http://10.0.0.7:8000")
    with pytest.raises(ConfigError, match="is a local path"):
        policy.check_models(app.ModelChoice(target="/etc", draft="/etc"))


def test_a_share_link_lets_through_only_the_servers_its_operator_lists(monkeypatch, capsys):
    seen, _ = boot(["--share", "--vllm-server", "127.0.0.1:8000"], monkeypatch, capsys)
    assert seen["policy"].check_server("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000"
    with pytest.raises(ConfigError, match="is not a vLLM server this hosted server connects to"):
        seen["policy"].check_server("http://127.0.0.1:8001")


def test_a_share_link_stays_hosted_whatever_the_environment_says_unless_the_flag_turns_it_off(monkeypatch, capsys):
    seen, printed = boot(["--share"], monkeypatch, capsys, {HOSTED_ENV: "0"})
    assert seen["policy"].hosted and printed == []
    seen, printed = boot(["--share", "--no-hosted"], monkeypatch, capsys)
    assert not seen["policy"].hosted and seen["runner"].policy is None and seen["launch"]["share"] is True
    assert len(printed) == 1 and printed[0].startswith("warning: SpecViz is reachable through a public share link "
                                                       "without hosted mode")


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "teacher-laptop"])
def test_listening_beyond_loopback_without_hosted_mode_warns_in_one_line(host, monkeypatch, capsys):
    seen, printed = boot(["--host", host], monkeypatch, capsys)
    assert not seen["policy"].hosted and seen["launch"]["server_name"] == host
    assert printed == [app.exposure_warning(host, False, False)]
    assert printed[0].startswith(f"warning: SpecViz is reachable on {host} without hosted mode") and "--hosted" in printed[0]
    seen, printed = boot(["--host", host, "--hosted"], monkeypatch, capsys)
    assert seen["policy"].hosted and printed == []


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"])
def test_loopback_says_nothing(host, monkeypatch, capsys):
    seen, printed = boot(["--host", host], monkeypatch, capsys)
    assert not seen["policy"].hosted and printed == []


def test_a_space_listening_on_every_address_is_hosted_and_quiet(monkeypatch, capsys):
    seen, printed = boot([], monkeypatch, capsys, {SPACE_ENV: "teacher/specviz", "GRADIO_SERVER_NAME": "0.0.0.0"})
    assert seen["policy"].hosted and seen["launch"]["server_name"] == "0.0.0.0" and printed == []
    seen, printed = boot([], monkeypatch, capsys, {SPACE_ENV: "teacher/specviz", "GRADIO_SERVER_NAME": "0.0.0.0",
                                                   HOSTED_ENV: "0"})
    assert not seen["policy"].hosted and len(printed) == 1 and printed[0].startswith("warning:")
