"""The CLI: a run prints its summary and writes a trace; every bad input is one
line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.machine import describe_machine
from engine.cli.main import main
from engine.formats.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
TINY = ["run", "--preset", "tiny-random", "--prompt", "Hello", "--max-new-tokens", "12"]


def test_run_prints_a_summary_and_writes_a_trace(tmp_path, capsys):
    out = tmp_path / "trace.json"
    assert main(TINY + ["--k", "3", "--baseline", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "acceptance" in printed and "identical    yes" in printed and "speedup" in printed
    trace = Trace.load(out)
    assert trace.summary.new_tokens == 12 and trace.config.k == 3 and trace.summary.baseline.identical


def test_sweep_writes_a_complete_table(tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello there\nabc abc abc\n")
    stem = tmp_path / "grid"
    assert main(["sweep", "--preset", "tiny-random", "--ks", "1,3", "--temperatures", "0,0.7", "--prompts",
                 str(prompts), "--max-new-tokens", "8", "--out", str(stem)]) == 0
    data = json.loads(stem.with_suffix(".json").read_text())
    assert len(data["runs"]) == 2 * 2 * 2 and len(data["cells"]) == 4
    assert data["meta"]["machine"] == describe_machine() and "threads" in data["meta"]["machine"]   # speeds' machine
    assert all(cell["acceptance_rate"] is not None and cell["speedup"] > 0 for cell in data["cells"])
    assert len(stem.with_suffix(".csv").read_text().strip().splitlines()) == 5


BAD_INPUTS = [
    (TINY + ["--k", "0"], "k must be"),
    (TINY + ["--k", "33"], "k must be"),
    (TINY + ["--k", "two"], "invalid int value"),
    (TINY + ["--k", "2.5"], "invalid int value"),
    (TINY + ["--temperature", "-1"], "temperature"),
    (TINY + ["--temperature", "hot"], "invalid float value"),
    (TINY + ["--temperature", "nan"], "temperature must be between 0 and 10, got nan"),
    (TINY + ["--max-new-tokens", "5000"], "max new tokens must be an integer from 1 to 4096"),
    (TINY + ["--seed", "x"], "invalid int value"),
    (TINY + ["--top-p", "0"], "top-p"),
    (TINY + ["--top-p", "1.5"], "top-p"),
    (TINY + ["--top-k", "-3"], "top-k"),
    (TINY + ["--max-new-tokens", "0"], "max new tokens"),
    (TINY + ["--seed", "-1"], "seed"),
    (["run", "--preset", "tiny-random", "--prompt", "   "], "empty"),
    (["run", "--preset", "tiny-random"], "prompt"),
    (["run", "--preset", "tiny-random", "--prompt", "x" * 1100], "context"),
    (["run", "--preset", "nope", "--prompt", "hi"], "invalid choice"),
    (["run", "--draft", "/no/such/dir", "--target", "/no/such/dir", "--prompt", "hi"], "not found"),
    (["run", "--draft", "gpt2", "--target", "distilgpt2", "--prompt", "hi"], "could not fetch 'gpt2' from the Hugging Face Hub"),
    (["run", "--target", "gpt2", "--prompt", "hi"], "both --draft and --target"),
    (["run", "--preset", "tiny-random", "--prompt-file", "/no/such/file", ], "cannot read"),
    (["run", "--preset", "tiny-random", "--prompt", "hi", "--out", "/no/such/dir/t.json"], "cannot write"),
    (["sweep", "--preset", "tiny-random", "--ks", "1,x"], "comma-separated"),
    (["sweep", "--preset", "tiny-random", "--temperatures", "0,50"], "temperature must be between 0 and 10"),
    (["bogus"], "invalid choice"),
]


@pytest.mark.parametrize("argv, message", BAD_INPUTS, ids=[" ".join(a[1:4])[:40] for a, _ in BAD_INPUTS])
def test_bad_input_is_one_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.strip().splitlines() if not line.startswith("[")]   # progress lines
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    assert message in lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_directory_that_is_not_a_model_and_mismatched_vocabularies(tmp_path, capsys):
    assert main(["run", "--draft", str(tmp_path), "--target", str(tmp_path), "--prompt", "hi"]) == 2
    assert "model" in capsys.readouterr().err


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = [line for line in captured.err.strip().splitlines() if not line.startswith("[")]   # progress lines
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in captured.err, captured.err
    return lines[0]


def test_model_files_a_user_can_get_wrong(tmp_path, capsys, monkeypatch):
    from test_models import _fake_gguf, _save_tiny
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    run = ["run", "--prompt", "hi", "--draft", "ngram", "--target"]
    assert main(run + [str(tmp_path / "empty")]) == 2
    assert "does not hold a model: it has no config.json" in _one_error_line(capsys)
    assert main(run + [str(_fake_gguf(tmp_path / "odd.gguf", "foo-arch"))]) == 2
    assert "an architecture transformers cannot load" in _one_error_line(capsys)
    small, big = _save_tiny(tmp_path / "small", "ab"), _save_tiny(tmp_path / "big", "abcdefgh")
    assert main(["run", "--prompt", "hi", "--draft", small, "--target", big]) == 2
    assert "draft vocabulary has 6 tokens but target has 12" in _one_error_line(capsys)


@pytest.mark.parametrize("content", ['[{"text": "no prompt key"}]', '{"prompt": "not a list"}', "[1, 2]", "\n\n"])
def test_sweep_prompt_files_a_user_can_get_wrong(content, tmp_path, capsys):
    prompts = tmp_path / "prompts.json"
    prompts.write_text(content)
    assert main(["sweep", "--preset", "tiny-random", "--prompts", str(prompts), "--ks", "1"]) == 2
    assert "holds no prompts" in _one_error_line(capsys)


def test_module_entry_point_has_no_traceback():
    result = subprocess.run([sys.executable, "-m", "engine", "run", "--preset", "tiny-random", "--prompt", "hi",
                             "--top-p", "7"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 2
    assert result.stderr.strip() == "error: top-p must be in (0, 1], got 7.0"


def test_cli_modules_import_each_other_in_one_direction():
    """main -> sweep -> arguments (and machine), main -> arguments: no cycle, none hidden inside a function."""
    graph = {}
    for path in sorted((ROOT / "engine" / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and (node.module or "").startswith("engine.cli.")}
        top_level = {node.module for node in tree.body if isinstance(node, ast.ImportFrom)}
        assert imported <= top_level, f"{path.name} imports {sorted(imported - top_level)} inside a function"
        graph[f"engine.cli.{path.stem}"] = imported
    assert graph["engine.cli.main"] >= {"engine.cli.arguments", "engine.cli.sweep"}
    assert graph["engine.cli.sweep"] == {"engine.cli.arguments", "engine.cli.machine"}
    assert graph["engine.cli.arguments"] == set() and graph["engine.cli.machine"] == set()
    done = set()
    while len(done) < len(graph):
        ready = {name for name, needs in graph.items() if name not in done and needs <= done}
        assert ready, f"import cycle among {sorted(set(graph) - done)}"
        done |= ready
