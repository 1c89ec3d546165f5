"""A short soak (tests/soak.py runs the long one): 30 runs through a real `python app.py`
server on loopback, from four sessions in turn. No run may fail, and once every kind of run
has been seen (the warm-up), the server's resident memory must level off."""

from __future__ import annotations

import pytest

from soak import run_soak


@pytest.mark.soak
def test_a_short_soak_has_no_failures_and_memory_that_levels_off(tmp_path):
    report = run_soak(runs=30, sessions=4, max_new_tokens=24, warmup=10, log=tmp_path / "server.log")
    print(report.summary())
    assert report.failures == [], report.summary()
    assert report.completed + report.stopped == 27 and report.refused == 3 and report.exported == 6
    # Warm-up: torch, plotly and the pair loaded, and each kind of run (stop, baseline, export) seen once.
    assert report.rss_end_mb <= 1.15 * report.rss_warm_mb + 30, report.summary()
