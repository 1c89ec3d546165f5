"""bench.py's vLLM rows (benchmarks/vllm_peer.py) against a real vLLM server on the tiny random pair
(float32, draft model k = 3; tests/vllm_session.py): the row's structure, vLLM's reported counts
against the tokens it streamed, and the identity field against SpecViz's own target-only decoding on
the same weights (the oracle: vLLM's float32 greedy output equals it token for token); a run with the CPU
sampler fix on its own real fixed server (one start), its row fixed by the server's /metrics gauge. Without a
server: the table's peer columns and the ratio to vLLM's best speculative row."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks.configurations import CONFIGURATIONS, REFERENCE_STOCK, SUITES
from benchmarks.rows import Row
from benchmarks.table import PEER_COLUMNS, closing_note, markdown, table_row
from benchmarks.vllm_peer import (PeerConfiguration, PeerRow, add_vs_best_peer, measure_peer, peer_configurations,
                                  peer_table_row)
from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.vllm.server import FIX_ENV

K = 3


@pytest.mark.vllm
def test_a_vllm_row_counts_what_the_server_streamed_and_matches_specviz_greedy(tiny_vllm):
    from engine.vllm.server_info import probe
    from vllm_session import tiny_pair
    pair = tiny_pair()
    info = probe(tiny_vllm.url, method="draft_model", dtype="float32")
    prompts = {"abc": pair.encode_prompt("abc"), "hello": pair.encode_prompt("Hello, world"),
               "digits": pair.encode_prompt("1 2 3 4 5 6")}
    config = SpecConfig(k=K, max_new_tokens=24, seed=0)
    engine = SpeculativeEngine(pair)
    reference = {name: engine.target_only_ids(ids, config) for name, ids in prompts.items()}
    configuration = PeerConfiguration("draft_model", "float32", 2)
    peer, emitted = PeerRow(Row(configuration.label(K), 0.0), configuration, info.engine), []
    measure_peer(peer, info, prompts, config, 1, reference, emitted)

    row = peer.row
    assert row.identical is True, [(run.token_ids, reference[run.name.rsplit(", ", 1)[1]]) for run in emitted]
    assert row.tokens == sum(len(ids) for ids in reference.values()) and row.wall_s > 0
    assert 0 < row.steps and 0 <= row.accepted <= row.drafted <= K * row.steps
    for run in emitted:                    # vLLM's per-step counts account for every streamed token
        assert run.step_sizes[0] == 1 and sum(run.step_sizes) == len(run.token_ids)
        assert all(1 <= size <= K + 1 for size in run.step_sizes)
        assert run.engine == info.engine and run.temperature == 0.0
    assert sum(sum(run.step_sizes[1:]) - (len(run.step_sizes) - 1) for run in emitted) <= row.accepted

    stock = Row(REFERENCE_STOCK, 0.0)
    stock.add("abc", 10, 1.0)
    stock.add("code", 10, 1.0)
    table = peer_table_row(peer, [stock], K)
    reference_keys = set(table_row(stock, CONFIGURATIONS[0], [stock], K))
    assert reference_keys <= set(table)
    assert table["identical"] is True and table["exact_expected"] is True and table["engine"] == "vllm 0.32.0"
    assert table["acceptance_rate"] == round(row.accepted / row.drafted, 3)
    assert table["mean_accepted_length"] == round(1 + row.accepted / row.steps, 3)
    assert table["speedup"] == round(row.tokens_per_s / 10.0, 3)

    changed = dict(reference, abc=reference["abc"][:-1] + ((reference["abc"][-1] + 1) % pair.vocab_size,))
    planted = PeerRow(Row(configuration.label(K), 0.0), configuration, info.engine)
    measure_peer(planted, info, {"abc": prompts["abc"]}, config, 1, changed, [])
    assert planted.row.identical is False


def results_with(rows: list[dict]) -> dict:
    return {"preset": "p", "k": 5, "max_new_tokens": 8, "prompts": {"a": "b"}, "repeats": 1, "machine": "m",
            "rows": rows, "vllm": {"servers": []}}


def test_every_row_is_divided_by_vllms_best_speculative_row_of_its_temperature():
    def row(name, temperature, tokens_per_s, peer=None, method=None):
        return {"name": name, "temperature": temperature, "tokens_per_s": tokens_per_s,
                **({"peer": peer, "method": method} if peer else {})}
    table = [row(SUITES["cpu"].best.format(k=5), 0.0, 8.0), row("vLLM target-only", 0.0, 16.0, "vllm", "none"),
             row("vLLM draft", 0.0, 4.0, "vllm", "draft_model"), row("vLLM n-gram", 0.0, 5.0, "vllm", "ngram"),
             row("vLLM draft", 0.7, 2.0, "vllm", "draft_model"), row(SUITES["cpu"].best.format(k=5), 0.7, 6.0)]
    add_vs_best_peer(table)
    assert [r["vs_vllm_best"] for r in table] == [1.6, 3.2, 0.8, 1.0, 1.0, 3.0]     # target-only is no speculation
    assert table[0]["vllm_best"] == "vLLM n-gram" and table[5]["vllm_best"] == "vLLM draft"


def test_the_table_shows_the_peer_columns_only_when_vllm_ran():
    cells = {"speedup": 1.0, "vs_same_kernels": 1.0, "code_speedup": 1.0, "vs_assisted": None, "acceptance_rate": 0.5,
             "mean_accepted_length": 2.0, "theoretical_speedup": None, "measured_over_theory": None,
             "draft_cost": None, "verify_cost": None, "measured_over_theory_at_verify_cost": None, "identical": True}
    best = {"name": SUITES["cpu"].best.format(k=5), "temperature": 0.0, "tokens_per_s": 8.0, **cells,
            "vs_vllm_best": 1.6, "vllm_best": "vLLM n-gram", "marked": None}
    peer = {"name": "vLLM n-gram", "temperature": 0.7, "tokens_per_s": 5.0, **cells, "vs_vllm_best": 1.0,
            "marked": 7, "peer": "vllm"}
    text = markdown(results_with([best, peer]))
    assert all(column in text for column in PEER_COLUMNS)
    assert "| 1.60x | - |" in text and "| 1.00x | 7 |" in text
    assert "1.60x vs vLLM's best speculative row (vLLM n-gram)" in closing_note(results_with([best]))
    without = results_with([best])
    del without["vllm"]
    assert PEER_COLUMNS[0] not in markdown(without)


def test_the_configurations_hold_one_float32_identity_row_and_each_method_per_thread_count():
    chosen = peer_configurations([1, 2], probabilistic=True)
    assert [(c.method, c.dtype) for c in chosen if c.dtype == "float32"] == [("none", "float32")]
    for threads in (1, 2):
        assert sorted((c.method, c.draft_sample_method) for c in chosen if c.threads == threads
                      and c.dtype == "bfloat16") == [("draft_model", "greedy"), ("draft_model", "probabilistic"),
                                                      ("ngram", "greedy"), ("none", "greedy")]
    spec = chosen[-1].spec("t", "d", 5, 512)
    assert spec.speculative_config() == {"method": "draft_model", "num_speculative_tokens": 5, "model": "d",
                                         "draft_sample_method": "probabilistic"}
    assert chosen[0].spec("t", "d", 5, 512).speculative_config() is None
    assert chosen[0].label(5) == "vLLM target-only (fp32, 1 thread)"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in chosen[0].spec("t", "d", 5, 512).environment()
    bound = peer_configurations([2], bindings=("all",))
    assert {c.bind_cores for c in bound} == {"0-1"} and bound[1].label(5).endswith("2 threads on cores 0-1)")
    assert bound[1].spec("t", "d", 5, 512).environment()["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    both = peer_configurations([2], bindings=("auto", "all"))        # each binding gets every method's row
    assert [(c.method, c.dtype, c.bind_cores) for c in both] == [
        ("none", "float32", ""), ("none", "bfloat16", ""), ("draft_model", "bfloat16", ""), ("ngram", "bfloat16", ""),
        ("none", "bfloat16", "0-1"), ("draft_model", "bfloat16", "0-1"), ("ngram", "bfloat16", "0-1")]
    fixed = peer_configurations([2], probabilistic=True, fix_cpu_sampler=True)    # every server of the run
    assert [dataclasses.replace(c, fix_cpu_sampler=False) for c in fixed] == peer_configurations([2], True)
    assert all(c.spec("t", "d", 5, 512).environment()[FIX_ENV] == "1" and c.label(5).endswith(", CPU sampler fixed)")
               for c in fixed)
    assert FIX_ENV not in chosen[0].spec("t", "d", 5, 512).environment()


def test_a_configuration_that_cannot_serve_costs_its_rows_not_the_run(monkeypatch, tmp_path):
    """A server that exits before answering (here a stand-in for `serve`, isolating the loop) is
    reported with vLLM's sentence beside the start-ups, and the next configuration still runs."""
    import benchmarks.vllm_peer as vllm_peer
    from engine.vllm.transport import VllmError
    tried = []

    def refuse(configuration, *args, **kwargs):
        tried.append(configuration)
        raise VllmError("The vLLM server exited with 1 before answering: no such folder.")
    monkeypatch.setattr(vllm_peer, "serve", refuse)
    configurations = peer_configurations([2])
    measured = vllm_peer.run_peer(configurations, "t", "d", {"p": [1, 2]}, [0.0], SpecConfig(k=5), 1, None, tmp_path)
    assert tried == configurations and measured.peers == []
    assert [server["error"] for server in measured.servers] == ["The vLLM server exited with 1 before answering: "
                                                                "no such folder."] * len(configurations)
    line = vllm_peer.peer_line({"vllm": {"engine": "", "servers": measured.servers, "specviz_threads": 2}})
    assert line.count("did not serve: The vLLM server exited with 1") == len(configurations)


def test_a_server_that_ran_out_of_time_starting_is_started_once_more_and_the_run_says_so(monkeypatch, tmp_path):
    """A start that times out (a first torch.compile on a slow CPU) gets a second start, whose log is kept apart;
    the run's server entry keeps the first start's sentence. Any other refusal is not retried, and a second time-out
    costs the configuration's rows as before. `serve` is a stand-in here, isolating the loop."""
    import benchmarks.vllm_peer as vllm_peer
    from engine.vllm.server import START_TIMED_OUT
    from engine.vllm.transport import VllmError
    logs = []
    timed_out = f"{START_TIMED_OUT} 600 s (log: x)."

    def slow_then_ready(configuration, target, draft, k, log):
        logs.append(log.name)
        if len(logs) == 1:
            raise VllmError(timed_out)
        raise VllmError("The vLLM server exited with 1 before answering: out of memory.")
    monkeypatch.setattr(vllm_peer, "serve", slow_then_ready)
    configuration = peer_configurations([2])[:1]
    measured = vllm_peer.run_peer(configuration, "t", "d", {"p": [1, 2]}, [0.0], SpecConfig(k=5), 1, None, tmp_path)
    assert logs == ["vllm-server-0.log", "vllm-server-0-again.log"]          # started twice, the second not retried
    assert measured.servers[0]["error"].endswith("out of memory.")
    ready = object()
    answers = iter([VllmError(timed_out), (ready, "info")])

    def once(*args):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer
    assert vllm_peer.serve_retrying(configuration[0], "t", "d", 5, tmp_path / "s.log", once) == (ready, "info", timed_out)
    refusals = iter([VllmError("The vLLM server exited with 1 before answering: no such folder.")])

    def refuse(*args):
        raise next(refusals)
    with pytest.raises(VllmError, match="no such folder"):
        vllm_peer.serve_retrying(configuration[0], "t", "d", 5, tmp_path / "s.log", refuse)


def test_vllms_speed_rows_run_in_bfloat16_only_where_the_cpu_computes_it_natively():
    """`--vllm-dtype auto`: vLLM's fastest dtype on each CPU class (an AVX2 CPU emulates bfloat16); a float32 speed
    row is the identity row itself, so the run holds no duplicate."""
    from benchmarks.vllm_peer import speed_dtype
    assert speed_dtype("auto", {"avx2": True, "avx512f": True, "avx512_bf16": True}) == "bfloat16"
    assert speed_dtype("auto", {"avx2": True, "amx_bf16": True}) == "bfloat16"
    assert speed_dtype("auto", {"avx2": True, "avx512f": True}) == "float32"
    assert speed_dtype("float16", {"avx2": True}) == "float16"
    avx2 = peer_configurations([2], dtype=speed_dtype("auto", {"avx2": True}), bindings=("all",))
    assert [(c.method, c.dtype) for c in avx2] == [("none", "float32"), ("draft_model", "float32"),
                                                    ("ngram", "float32")]


@pytest.mark.vllm
def test_a_fixed_run_samples_on_a_server_whose_metrics_say_fixed_and_every_saved_row_says_so(tmp_path, monkeypatch,
                                                                                             tiny_vllm):
    """bench.py --vllm-fix-cpu-sampler: run_peer starts the configuration's real server with SpecViz's CPU sampler
    fix (tiny pair, eager as the test servers run: tests/vllm_session.py), its T = 0.7 row is measured there, and
    the row, its name and the server entry say fixed from the server's own /metrics gauge. A server asked for the
    fix that does not report it (the session's shipped server) is refused in one sentence."""
    import benchmarks.vllm_peer as vllm_peer
    from engine.vllm.server import start_server
    from engine.vllm.server_info import FIX_NAME, probe
    from engine.vllm.transport import VllmError
    from vllm_session import EAGER, STARTUP_TIMEOUT_S, save_tiny_pair, tiny_pair
    save_tiny_pair(tmp_path)
    started = []

    def eager(spec, log):
        started.append(spec)
        return start_server(dataclasses.replace(spec, extra_args=spec.extra_args + EAGER), log,
                            timeout_s=STARTUP_TIMEOUT_S)
    monkeypatch.setattr(vllm_peer, "start_server", eager)
    (configuration,) = [c for c in peer_configurations([2], dtype="float32", fix_cpu_sampler=True)
                        if c.method == "draft_model"]
    measured = vllm_peer.run_peer([configuration], str(tmp_path / "target"), str(tmp_path / "draft"),
                                  {"abc": tiny_pair().encode_prompt("abc")}, [0.7],
                                  SpecConfig(k=K, max_new_tokens=16, seed=0), 1, None, tmp_path)
    assert [spec.fix_cpu_sampler for spec in started] == [True]
    (server,) = measured.servers
    assert "error" not in server, server["error"]
    assert server["cpu_sampler_fix"] is True and server["engine"] == f"vllm 0.32.0 + {FIX_NAME}"
    (peer,) = measured.peers
    row = peer_table_row(peer, [], K)
    assert row["temperature"] == 0.7 and row["cpu_sampler_fix"] is True and row["engine"] == server["engine"]
    assert row["name"] == "vLLM draft model, k=3 (fp32, 2 threads, CPU sampler fixed)"
    assert 0 < peer.row.tokens <= 16 and peer.row.drafted > 0

    shipped = probe(tiny_vllm.url, method="draft_model", dtype="float32")
    with pytest.raises(VllmError, match=r"^The vLLM server at .* does not report it running: see its log\.$"):
        vllm_peer.check_fix(configuration, shipped)
    vllm_peer.check_fix(dataclasses.replace(configuration, fix_cpu_sampler=False), shipped)
