"""Shared pytest setup: offline by default, in CI a skipped test is a failure, tests that need most of the
machine's memory last, and the fixtures the browser tests share (Debian's chromium, the real tiny-random app)
and the vLLM tests' one real server (stopped by those memory-hungry tests: tests/memory_room.py)."""

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
    """CI must run every test: real models and the browser included. In a pytest-xdist worker (scripts/test.sh),
    collect the garbage once and freeze what is left: pytest then collects five times more as it exits, and over a
    worker's heap at the end of the suite that took longer than the 5 s execnet waits before it interrupts the
    worker (a KeyboardInterrupt warning from both workers in the clean clone of 003a369). Anything this one
    collection frees still reaches pytest's hook for unraisable exceptions, which is installed until then."""
    if os.environ.get("CI") == "true" and _skipped and exitstatus == 0:
        session.exitstatus = 1
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import gc
        gc.collect()
        gc.freeze()


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


# The session's real vLLM servers (fixtures below): every module that uses one runs on one pytest-xdist worker.
SESSION_SERVERS = ("tiny_vllm", "tiny_plain_vllm")
SESSION_SERVERS_GROUP = "session-vllm-servers"


@pytest.hookimpl(tryfirst=True)     # before pytest-xdist's own hook reads the groups (`--dist loadgroup`)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    """Tests marked needs_most_memory run after every other test (in their own order): they stop the servers
    the session shares first (tests/memory_room.py), and nothing after them may need those. The modules with a
    test that uses a session vLLM server join one xdist group, whole, so none is split from its module fixtures
    (their ids then end in "@session-vllm-servers": rerun one by the part before the @);
    `pytest_xdist_make_scheduler` below sends that group to one worker."""
    items.sort(key=lambda item: item.get_closest_marker("needs_most_memory") is not None)
    grouped = {item.nodeid.split("::", 1)[0] for item in items
               if any(name in getattr(item, "fixturenames", ()) for name in SESSION_SERVERS)}
    for item in items:
        if item.nodeid.split("::", 1)[0] in grouped:
            item.add_marker(pytest.mark.xdist_group(SESSION_SERVERS_GROUP))


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    """Under `--dist loadgroup` (scripts/test.sh), each module's tests go to one worker, as `--dist loadfile`
    sends them (a module's browser, app and servers stay with it), except that the modules using a session vLLM
    server go to one worker together: a worker starts each session server it needs once, so under loadfile both
    workers started both tiny servers, about 35 s each on a busy 2-core machine. (xdist's own loadgroup would send
    every test outside a group alone.) Other `--dist` modes keep xdist's schedulers."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModulesAndServerGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:        # the scope a test is sent with (xdist's loadfile: its file)
            return SESSION_SERVERS_GROUP if nodeid.endswith("@" + SESSION_SERVERS_GROUP) else nodeid.split("::", 1)[0]
    return ModulesAndServerGroup(config, log)


@pytest.fixture(scope="module", autouse=True)
def return_heap_after_module():
    """After each module, hand the pages of the models it freed back to the system (tests/memory_room.py): the
    test process otherwise keeps them (5.6 GB by the end of CI's run of 2026-11-28) beside the real servers."""
    from memory_room import return_freed_heap
    yield
    return_freed_heap()


class SharedServers:
    """The real servers this session starts once and shares between modules, by name."""

    def __init__(self) -> None:
        self.running: dict[str, object] = {}      # name -> engine.vllm.server.RunningServer

    def add(self, name: str, server: object) -> None:
        self.running[name] = server

    def stop_all(self) -> list[str]:
        """Stop every shared server; the names of those that were running."""
        names = list(self.running)
        for name in names:
            self.running.pop(name).stop()
        return names


@pytest.fixture(scope="session")
def shared_servers():
    servers = SharedServers()
    yield servers
    servers.stop_all()


@pytest.fixture(scope="session")
def tiny_vllm(tmp_path_factory, shared_servers):
    """One real vLLM server for the whole session on the tiny random pair (tests/vllm_session.py);
    SPECVIZ_TEST_VLLM_URL reuses one already serving that pair (started by tests/vllm_session.py)."""
    from vllm_session import TinyVllm, require_vllm, start_tiny_vllm
    if os.environ.get("SPECVIZ_TEST_VLLM_URL"):
        yield TinyVllm(None, None, os.environ["SPECVIZ_TEST_VLLM_URL"])
        return
    require_vllm()
    started = start_tiny_vllm(tmp_path_factory.mktemp("vllm"))
    shared_servers.add("tiny vLLM server", started.server)
    yield started


@pytest.fixture(scope="session")
def tiny_plain_vllm(tmp_path_factory, shared_servers):
    """The tiny pair served without speculation, once for the session: a baseline (tests/test_load_vllm.py) and a
    server the page must refuse (tests/test_vllm_real_faults.py)."""
    from vllm_session import require_vllm, start_tiny_server
    require_vllm()
    started = start_tiny_server(tmp_path_factory.mktemp("vllm-plain"), "none")
    shared_servers.add("tiny vLLM server without speculation", started.server)
    yield started

