"""bench.py's token-tree rows on tiny-random: they run beside the chain at the same depth, report
tokens per target forward and tokens/s, match stock target-only output in greedy mode, and mark
the i.i.d. chain theory "n/a: trees" (it does not describe a tree) where a chain row has numbers."""

from __future__ import annotations

import json

import bench
from benchmarks.table import TREES


def test_tree_rows_report_tokens_per_forward_and_mark_the_chain_theory_not_applicable(tmp_path, capsys):
    out = tmp_path / "results.json"
    assert bench.main(["--quick", "--no-startup", "--grid", "--only", "tree|target), k=5",
                       "--max-new-tokens", "8", "--temperatures", "0,0.7", "--out", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    trees = [r for r in rows if " tree " in r["name"]]
    chains = [r for r in rows if r["name"].endswith("k=5") and " tree " not in r["name"]]
    assert len(trees) == 2 * 3 and chains, [r["name"] for r in rows]
    for row in trees:
        assert row["theory_note"] == TREES and row["theoretical_speedup"] is None
        assert row["mean_accepted_length"] >= 1 and row["tokens_per_s"] > 0
        assert row["identical"] is (True if row["temperature"] == 0 else None)
    assert all(row["theory_note"] is None for row in chains)
    table = capsys.readouterr().out
    tree_lines = [line for line in table.splitlines() if " tree " in line and line.startswith("|")]   # the table's
    assert len(tree_lines) == 6 and all(line.count(TREES) == 3 for line in tree_lines)
    assert sum(line.startswith("Where time goes, ") and " tree " in line for line in table.splitlines()) == 6
    assert "tokens per target forward" in table
