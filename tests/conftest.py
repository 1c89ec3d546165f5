"""Shared pytest setup: offline by default, and in CI a skipped test is a failure."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

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
