"""Shared pytest setup: offline by default, in CI a skipped test is a failure, and the fixtures the
browser tests share (Debian's chromium, the real tiny-random app) and the vLLM tests' one real server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]

_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """CI must run every test: real models and the browser included."""
    if os.environ.get("CI") == "true" and _skipped and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter, exitstatus: int) -> None:
    if os.environ.get("CI") == "true" and _skipped:
        terminalreporter.write_line(f"CI=true: {len(_skipped)} skipped test(s) count as failures: "
                                    + ", ".join(_skipped[:5]), red=True)


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium through Playwright, launched once per test module."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def tiny_app():
    """The real app with the real engine on the tiny-random pair (built in code); yields its URL."""
    from app import EngineRunner
    from ui_server import serve
    demo, url = serve(EngineRunner(device="cpu"))
    yield url
    demo.close()


@pytest.fixture(scope="session")
def tiny_vllm(tmp_path_factory):
    """One real vLLM server for the whole session on the tiny random pair (tests/vllm_session.py);
    SPECVIZ_TEST_VLLM_URL reuses one already serving that pair (started by tests/vllm_session.py)."""
    from vllm_session import TinyVllm, start_tiny_vllm
    if os.environ.get("SPECVIZ_TEST_VLLM_URL"):
        yield TinyVllm(None, None, os.environ["SPECVIZ_TEST_VLLM_URL"])
        return
    from engine.vllm.server import vllm_python
    if vllm_python() is None:
        pytest.skip("no vLLM environment (.venv-vllm): scripts/test.sh installs it")
    started = start_tiny_vllm(tmp_path_factory.mktemp("vllm"))
    yield started
    started.server.stop()
