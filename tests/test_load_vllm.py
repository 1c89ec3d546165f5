"""engine/load/ on real tiny vLLM servers (tests/vllm_session.py): the session's speculative server and one
without speculation, levels 1, 2, 4 at a few tokens each. Oracles: each request's trace holds the tokens the
server sent and its accepted counts sum, over a level, to the server's own /metrics counters' delta (the
levels run one after another, so the delta is exactly that level's requests); the level's figures are the
plain computation over its requests; the server without speculation is a baseline, not an error; an answer
that is not vLLM's is refused in one sentence. The document the CLI writes passes the strict reader."""

from __future__ import annotations

import http.server
import json
import statistics
import threading

import gradio as gr
import pytest

from engine.cli.main import main
from engine.config import SpecConfig
from engine.formats.load_reader import read_load
from engine.formats.trace import Trace
from engine.load.runner import run_server
from engine.load.stats import other_traffic
from engine.vllm.transport import VllmError
from specviz.explore.load_view import LoadHandlers

pytestmark = pytest.mark.vllm
LEVELS = (1, 2, 4)
PROMPTS = ("abc abc abc", "hello there", "def f(x):")
CONFIG = SpecConfig(temperature=0.0, max_new_tokens=6)


@pytest.fixture(scope="module")
def measured(tiny_vllm, tiny_plain_vllm):
    return (run_server(tiny_vllm.url, PROMPTS, LEVELS, CONFIG),
            run_server(tiny_plain_vllm.url, PROMPTS, LEVELS, CONFIG))


def check_figures(level: dict) -> None:
    requests = level["requests"]
    assert len(requests) == level["concurrency"]
    assert [r["prompt_index"] for r in requests] == [i % len(PROMPTS) for i in range(level["concurrency"])]
    assert min(r["sent_s"] for r in requests) == 0.0
    assert level["wall_s"] == pytest.approx(max(r["done_s"] for r in requests))
    assert level["output_tokens"] == sum(r["output_tokens"] for r in requests)
    assert level["aggregate_tokens_per_s"] == pytest.approx(level["output_tokens"] / level["wall_s"])
    latencies = sorted(r["done_s"] - r["sent_s"] for r in requests)
    firsts = sorted(r["first_token_s"] - r["sent_s"] for r in requests)
    assert level["latency_s"]["p50"] == pytest.approx(statistics.median(latencies))
    assert level["first_token_s"]["p50"] == pytest.approx(statistics.median(firsts))
    assert level["latency_s"]["p99"] <= latencies[-1] + 1e-12 and level["latency_s"]["p90"] >= latencies[0]
    speeds = [(r["output_tokens"] - r["first_chunk_tokens"]) / (r["done_s"] - r["first_token_s"]) for r in requests
              if r["done_s"] > r["first_token_s"] and r["output_tokens"] > r["first_chunk_tokens"]]
    if speeds:
        assert level["tokens_per_s_per_request"]["mean"] == pytest.approx(statistics.fmean(speeds))


def test_speculative_levels_match_the_servers_own_counters(measured):
    speculative, _ = measured
    assert speculative["speculative"] is True and speculative["k"] == 3
    assert [level["concurrency"] for level in speculative["levels"]] == list(LEVELS)
    for level in speculative["levels"]:
        check_figures(level)
        accepted = drafted = 0
        for request in level["requests"]:
            trace = Trace.from_dict(request["trace"])
            assert trace.complete and trace.split is None
            assert len(trace.output.token_ids) == request["output_tokens"] == CONFIG.max_new_tokens
            assert [t.id for step in trace.steps for t in step.emitted] == list(trace.output.token_ids)
            accepted += sum(step.num_accepted for step in trace.steps)
            drafted += sum(step.k for step in trace.steps)
        before, after = level["counters_before"], level["counters_after"]
        delta_accepted = after["num_accepted_tokens"] - before["num_accepted_tokens"]
        delta_drafted = after["num_draft_tokens"] - before["num_draft_tokens"]
        assert (accepted, drafted) == (delta_accepted, delta_drafted) == \
            (level["acceptance"]["accepted"], level["acceptance"]["drafted"])
        steps = after["num_drafts"] - before["num_drafts"]
        assert level["acceptance"]["tau"] == pytest.approx(1 + accepted / steps)
    assert other_traffic(speculative["levels"]) == []          # the session's server served nothing else meanwhile


def test_the_server_without_speculation_is_a_baseline(measured):
    _, baseline = measured
    assert baseline["speculative"] is False and baseline["k"] is None
    for level in baseline["levels"]:
        check_figures(level)
        assert level["acceptance"] is None and level["counters_before"] is None and level["counters_after"] is None
        assert all(r["trace"] is None and r["output_tokens"] == CONFIG.max_new_tokens for r in level["requests"])


def test_an_answer_that_is_not_vllms_is_refused_in_one_sentence():
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"hello": "world"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(VllmError) as caught:
            run_server(f"http://127.0.0.1:{server.server_address[1]}", PROMPTS, LEVELS, CONFIG)
    finally:
        server.shutdown()
    assert "not a vLLM server" in str(caught.value) and str(caught.value).count(". ") == 0


def test_the_cli_writes_a_document_the_reader_accepts(tiny_vllm, tiny_plain_vllm, tmp_path, capsys):
    out = tmp_path / "load.json"
    assert main(["load", "--server", tiny_vllm.url, "--nospec-server", tiny_plain_vllm.url, "--levels", "1,2",
                 "--max-tokens", "4", "--out", str(out)]) == 0
    document = read_load(out)
    assert [server["speculative"] for server in document["servers"]] == [True, False]
    assert [server["engine"] for server in document["servers"]] == ["vllm 0.32.0"] * 2    # no fix on these servers
    assert document["settings"]["levels"] == [1, 2] and document["pair"]["k"] == 3
    printed = capsys.readouterr().out
    assert "aggregate speedup N=1:" in printed and f"wrote {out}" in printed
    # the forward probe ran on the server without speculation, up to the largest verify: 2 requests × (3 + 1)
    probe = document["servers"][1]["forward_probe"]
    assert probe["sizes"] == [1, 2, 4, 8] and all(len(times) == 3 and min(times) > 0 for times in probe["seconds"])
    assert "forward probe  1 tok:" in printed and "batch cost model (calibrated at N=1): predicted N=1:" in printed
    # --summary prints the saved run again, exactly as it went, without running anything
    assert main(["load", "--summary", str(out)]) == 0
    again = capsys.readouterr().out
    assert [line for line in printed.splitlines() if not line.startswith("wrote")] == again.splitlines()
    # the servers swapped: refused in one line, nothing written
    swapped = tmp_path / "swapped.json"
    assert main(["load", "--server", tiny_plain_vllm.url, "--nospec-server", tiny_vllm.url, "--levels", "1",
                 "--max-tokens", "2", "--out", str(swapped)]) == 2
    assert not swapped.exists()
    assert "runs without speculation" in capsys.readouterr().err


@pytest.mark.parametrize("failing", ["with", "without"])
def test_a_server_failing_a_level_keeps_the_levels_before_it(tiny_vllm, tiny_plain_vllm, monkeypatch, tmp_path,
                                                             capsys, failing):
    """A level the server fails (isolated here: the level's requests raise the stream's own VllmError, as a cut
    stream does) ends the sweep: the levels both servers measured before it are saved and drawn, the stop is named
    in one sentence on the page and by the CLI, and the CLI exits 1."""
    import engine.load.runner as runner
    from engine.load.sweep import stopped
    from specviz.explore.load_view import about
    real = runner.run_level
    why = "The vLLM server at the test's address closed the stream before the request finished."

    def cut(info, prompts, concurrency, config):
        if concurrency == 2 and info.speculative == (failing == "with"):
            raise VllmError(why)
        return real(info, prompts, concurrency, config)

    monkeypatch.setattr(runner, "run_level", cut)
    out = tmp_path / "stopped.json"
    assert main(["load", "--server", tiny_vllm.url, "--nospec-server", tiny_plain_vllm.url, "--levels", "1,2,4",
                 "--max-tokens", "4", "--out", str(out)]) == 1
    document = read_load(out)
    assert [[level["concurrency"] for level in server["levels"]] for server in document["servers"]] == [[1], [1]]
    server = "the server with speculation" if failing == "with" else "the server without speculation"
    assert stopped(document) == (server, 2, why)
    assert f"**This run stopped at N = 2**, where {server} failed: {why}" in about(document, "a run")
    captured = capsys.readouterr()
    assert f"the run stopped at N=2 on {server}: the levels before it are kept" in captured.out
    assert f"error: the run stopped at N=2 on {server}; what it measured before (1 level) is saved in {out}" \
        in captured.err


def test_a_baseline_that_cannot_be_measured_keeps_the_first_servers_levels_for_resume(tiny_vllm, tiny_plain_vllm,
                                                                                      tmp_path, capsys, monkeypatch):
    """The second server does not answer (a server that could not start looks the same from here): the measured
    speculative levels are saved as an unfinished run, which the reader and the page refuse in one sentence, and
    `--resume` measures only the missing server, keeping the first server's record exactly as it was saved."""
    import socket

    import engine.cli.load as load_cli
    import engine.load.sweep as sweep
    from engine.formats.load_format import LoadFormatError
    from engine.formats.load_reader import read_unfinished
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{free.getsockname()[1]}"
    out = tmp_path / "unfinished.json"
    assert main(["load", "--server", tiny_vllm.url, "--nospec-server", dead, "--levels", "1,2", "--max-tokens", "4",
                 "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"the server without speculation could not be measured: No vLLM server answers at {dead}" in err
    assert f"levels are saved in {out}, unfinished: finish the run with `python -m engine load --resume {out}`" in err
    unfinished = read_unfinished(out)
    assert [level["concurrency"] for level in unfinished["servers"][0]["levels"]] == [1, 2]
    with pytest.raises(LoadFormatError, match=r"^format: this load run is unfinished \(its server without "
                                              r"speculation could not be measured: No vLLM server answers at "):
        read_load(out)
    with pytest.raises(gr.Error) as refused:                    # the Explore tab's upload: one sentence, nothing drawn
        LoadHandlers(None, "").upload(out.read_bytes(), False, None)
    message = refused.value.message
    assert "this load run is unfinished" in message and "\n" not in message and message.endswith("--resume FILE`")
    # Resuming takes only the missing server; anything that would change the first server's run is refused.
    assert main(["load", "--resume", str(out), "--server", tiny_vllm.url]) == 2
    assert "--resume takes the pair and settings from the file" in capsys.readouterr().err
    monkeypatch.setattr(load_cli, "machine_record", lambda: {**unfinished["machine"], "cpu_model": "Another CPU"})
    assert main(["load", "--resume", str(out), "--nospec-server", tiny_plain_vllm.url]) == 2
    assert "a load run compares its two servers on one machine" in capsys.readouterr().err
    monkeypatch.undo()
    # Started from the file's own pair when no URL is given (the server start itself isolated here).
    started = []

    def start_the_plain_one(served, method, measure):
        started.append((served, method))
        return {**measure(tiny_plain_vllm.url), "threads": 2}

    monkeypatch.setattr(sweep, "_started", start_the_plain_one)
    finished = tmp_path / "finished.json"
    assert main(["load", "--resume", str(out), "--out", str(finished)]) == 0
    pair = unfinished["pair"]
    assert started == [(sweep.Served(pair["target"], pair["draft"], pair["method"], pair["k"], pair["dtype"]), "none")]
    document = read_load(finished)
    assert document["servers"][0] == unfinished["servers"][0]           # not measured again
    assert [level["concurrency"] for level in document["servers"][1]["levels"]] == [1, 2]
    assert document["command"].startswith(unfinished["command"] + " ; resumed: ")
    assert document["machine"] == unfinished["machine"] and "aggregate speedup N=1:" in capsys.readouterr().out
    # A finished run is not resumed again.
    assert main(["load", "--resume", str(finished)]) == 2
    assert "this run is already finished" in capsys.readouterr().err



def test_started_servers_take_the_cpu_sampler_fix_when_asked_and_t_above_zero_says_why(tmp_path, capsys,
                                                                                      monkeypatch):
    """--fix-cpu-sampler reaches the server's spec (its start isolated here: it raises at once, nothing is measured);
    without it a T > 0 run first says that vLLM 0.32's speculation does not sample the target's law there."""
    import engine.vllm.server as server
    specs = []

    def refuse(spec, log, **kwargs):
        specs.append(spec)
        raise VllmError("The vLLM server exited with 1 before answering: (isolated).")

    monkeypatch.setattr(server, "start_server", refuse)
    out = tmp_path / "load.json"
    common = ["load", "--target", str(tmp_path), "--draft", str(tmp_path), "--levels", "1", "--out", str(out)]
    assert main([*common, "--temperature", "0.7", "--fix-cpu-sampler"]) == 2
    assert specs[-1].fix_cpu_sampler and "vLLM #55005" not in capsys.readouterr().err
    assert main([*common, "--temperature", "0.7"]) == 2
    assert not specs[-1].fix_cpu_sampler and "does not sample the target's distribution (vLLM #55005)" in \
        capsys.readouterr().err
    assert main(common) == 2 and "vLLM #55005" not in capsys.readouterr().err and not out.exists()
