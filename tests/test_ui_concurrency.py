"""Many users on one server: app.py's EngineRunner with the tiny-random pair, served on a free
loopback port and driven through gradio_client, one client (browser session) per user.

Each user's trace is fetched the way a script would (the /export endpoint) and compared with
the engine run directly in this process for the same prompt and config: same token ids and
verdicts, nothing of one user's run in another's. Also: a full queue says busy, the pair
loads once, Stop keeps a valid partial trace, session state expires, the UI gives the
CLI's tokens for the same seed, and uploads are capped and never served back inline.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import torch
from gradio_client import Client
from gradio_client.exceptions import AppError
from gradio_client.utils import QueueError

import engine
from app import EngineRunner
from engine.cli.main import main as cli_main
from engine.config import SpecConfig
from engine.decode.speculative import SpeculativeEngine
from engine.loading.models import load_pair
from engine.formats.race import Race
from engine.formats.trace import Trace
from fakes import FakeRunner
from slow_runner import SlowRunner
from specviz.run.views import Views
from ui_server import serve

NAMES = [name for name in Views.names() if name != "trace"]     # gr.State is not part of the API
NEW_TOKENS = 24


def run_args(**changes) -> dict:
    values = dict(large=False, width=1280, preset="tiny-random", draft="", target="", drafter="model",
                  prompt="def fib(n):", k=4, adaptive_k=False, tree_nodes=0, tree_branch=3, temperature=0.0, top_p=1.0, top_k=0,
                  max_new_tokens=NEW_TOKENS, seed=0, draft_dtype="float32", target_dtype="float32",
                  with_baseline=False)
    values.update(changes)
    return values


def config_of(args: dict) -> SpecConfig:
    return SpecConfig(k=args["k"], temperature=args["temperature"], top_p=args["top_p"], top_k=args["top_k"],
                      max_new_tokens=args["max_new_tokens"], seed=args["seed"], drafter=args["drafter"])


def fetch_trace(client: Client) -> Trace:
    """The session's trace, as the Export button gives it."""
    paths = client.predict(api_name="/export")
    return Trace.load(next(path for path in paths if Path(path).name == "specviz-trace.json"))


def tokens_and_verdicts(trace: Trace) -> tuple:
    """What must match between two runs of one config and seed (timings aside)."""
    return (trace.prompt.token_ids, trace.output.token_ids,
            [(tuple(t.id for t in step.draft), step.verdicts, tuple((t.id, t.kind) for t in step.emitted),
              step.num_accepted) for step in trace.steps])


@pytest.fixture(scope="module")
def reference():
    """The engine run directly in this process, on its own tiny-random pair."""
    return SpeculativeEngine(load_pair("tiny-random", device="cpu"))


@pytest.fixture(scope="module")
def server():
    """The app on a free loopback port; `loads` lists every real model load."""
    loads, real = [], engine.load_pair
    patch = pytest.MonkeyPatch()
    patch.setattr(engine, "load_pair", lambda *args, **kwargs: loads.append(kwargs) or real(*args, **kwargs))
    runner = SlowRunner()
    demo, url = serve(runner)
    yield url, runner, loads
    demo.close()
    patch.undo()


def final(job) -> dict:
    return dict(zip(NAMES, job.result(timeout=120)))


def test_eight_users_at_once_each_get_the_trace_of_their_own_prompt_and_seed(server, reference):
    url, runner, loads = server
    users = [run_args(prompt=f"user {i}: def f{i}(x): return x * {i}", seed=100 + i, k=2 + i % 4,
                      temperature=0.0 if i % 2 else 0.9, drafter="ngram" if i == 5 else "model")
             for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        clients = list(pool.map(lambda _: Client(url, verbose=False), users))
    jobs = [client.submit(**args, api_name="/run") for client, args in zip(clients, users)]
    outcomes = [final(job) for job in jobs]
    assert all(out["status"].startswith("Done") for out in outcomes), [out["status"] for out in outcomes]
    for client, args in zip(clients, users):
        trace = fetch_trace(client)
        expected = reference.generate(args["prompt"], config_of(args))
        assert trace.prompt.text == args["prompt"] and trace.config.seed == args["seed"] and trace.complete
        assert trace.config.k == args["k"] and trace.config.drafter == args["drafter"]
        assert tokens_and_verdicts(trace) == tokens_and_verdicts(expected)
    assert len(loads) == 1                        # one pair, loaded once, shared by all eight


def test_users_racing_at_once_each_get_the_race_of_their_own_prompt(server, reference):
    """The Race tab through the server: each session's race (downloaded as a script would) holds its own
    prompt's tokens in both lanes, each lane equal to its decoder run directly (the speculative lane
    token for token when greedy: the page's race drafts with the int8 default, the reference in float32,
    and sampled drafts of another dtype draw differently, lossless in law only)."""
    url, _, loads = server
    loads_before = len(loads)        # the Race tab's pair has the default draft dtype: another pair than the Run tests'
    users = [dict(preset="tiny-random", draft="", target="", drafter="model", prompt=f"race {i}: def r{i}(x):",
                  k=2 + i, temperature=0.0 if i else 0.8, max_new_tokens=16) for i in range(3)]
    with ThreadPoolExecutor(3) as pool:
        clients = list(pool.map(lambda _: Client(url, verbose=False), users))
    jobs = [client.submit(**args, api_name="/race") for client, args in zip(clients, users)]
    for job in jobs:
        assert job.result(timeout=300)[-1].startswith("Race of")
    for client, args in zip(clients, users):
        race = Race.load(client.predict(api_name="/race_export")[0])
        config = SpecConfig(k=args["k"], temperature=args["temperature"], max_new_tokens=16)
        trace = reference.generate(args["prompt"], config)
        assert race.prompt == args["prompt"] and race.config.k == args["k"]
        assert race.speculative.token_ids == trace.output.token_ids or args["temperature"] > 0
        assert race.target_only.token_ids == reference.target_only_ids(list(trace.prompt.token_ids), config)
    assert len(loads) - loads_before <= 1          # three racing users, at most one load between them


def test_the_pair_loads_once_under_the_lock_and_stays_read_only(monkeypatch):
    real, loads = engine.load_pair, []

    def slow_load(*args, **kwargs):
        loads.append(kwargs)
        time.sleep(0.3)                           # widen the window for a second load
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "load_pair", slow_load)
    runner, barrier = EngineRunner(device="cpu"), threading.Barrier(8)
    from specviz.serving.runner import ModelChoice, RunRequest

    def start(seed: int):
        barrier.wait()
        return runner.start(RunRequest(ModelChoice(preset="tiny-random"), f"thread {seed}",
                                       SpecConfig(max_new_tokens=12, temperature=0.7, seed=seed)),
                            lambda fraction, message: None)

    with ThreadPoolExecutor(8) as pool:
        generations = list(pool.map(start, range(8)))
    assert len(loads) == 1 and len({id(g.pair) for g in generations}) == 1
    pair = generations[0].pair
    before = [p.detach().clone() for p in (*pair.target.parameters(), *pair.draft.parameters())]
    assert not any(p.requires_grad for p in (*pair.target.parameters(), *pair.draft.parameters()))
    with ThreadPoolExecutor(4) as pool:           # step them concurrently on the shared models
        list(pool.map(lambda g: [g.step() for _ in iter(lambda: g.is_done, True)], generations))
    after = [p.detach() for p in (*pair.target.parameters(), *pair.draft.parameters())]
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    traces = [g.trace() for g in generations]
    alone = SpeculativeEngine(pair).generate("thread 3", SpecConfig(max_new_tokens=12, temperature=0.7, seed=3))
    assert tokens_and_verdicts(traces[3]) == tokens_and_verdicts(alone)


def test_a_full_queue_says_busy_try_again_and_the_app_recovers():
    """Six distinct runs at once on a server whose queues hold two: the Run tab's queue (or Gradio's,
    for requests arriving faster than it hands them on) tells the rest the server is busy."""
    demo, url = serve(FakeRunner(accepted=(4, 2, 0, 4, 3, 1), delay=0.15), max_size=2)
    try:
        with ThreadPoolExecutor(6) as pool:
            clients = list(pool.map(lambda _: Client(url, verbose=False), range(6)))
        jobs = [client.submit(**run_args(seed=seed), api_name="/run") for seed, client in enumerate(clients)]
        busy, done = [], []
        for job in jobs:
            try:
                done.append(final(job))
            except (QueueError, AppError) as error:
                busy.append(str(error))
        assert busy and len(done) >= 2 and len(busy) + len(done) == 6
        assert all("Queue is full! Please try again." in message or "The server is busy: 2 runs are waiting already"
                   in message for message in busy), busy
        assert all(out["status"].startswith("Done") for out in done)
        assert final(clients[0].submit(**run_args(seed=99), api_name="/run"))["status"].startswith("Done")
    finally:
        demo.close()


def test_stop_mid_run_ends_after_the_step_in_progress_with_a_valid_partial_trace(server, reference):
    url, runner, _ = server
    args = run_args(prompt="Stop me halfway", max_new_tokens=120, temperature=0.8, seed=5)
    client = Client(url, verbose=False)
    runner.delay = 0.1
    try:
        job = client.submit(**args, api_name="/run")
        while len(job.outputs()) < 3:                  # a few live views: the run is under way
            assert not job.done(), "the run ended before it could be stopped"
            time.sleep(0.02)
        client.predict(api_name="/stop")
        started_at_stop = runner.slowed[-1].started
        out = final(job)
    finally:
        runner.delay = 0.0
    assert out["status"].startswith("Stopped: the ") and "incomplete" in out["output"]
    partial = fetch_trace(client)
    # Stop ends the run after the step in progress: at most one more step than had begun when
    # the server took the request, never the rest of the run.
    assert len(partial.steps) <= started_at_stop + 1 and runner.slowed[-1].started == len(partial.steps)
    full = reference.generate(args["prompt"], config_of(args))
    assert not partial.complete and 0 < len(partial.steps) < len(full.steps)
    assert Trace.from_json(partial.to_json()) == partial
    assert tokens_and_verdicts(partial)[2] == tokens_and_verdicts(full)[2][:len(partial.steps)]
    assert final(client.submit(**args, api_name="/run"))["status"].startswith("Done")
    assert tokens_and_verdicts(fetch_trace(client)) == tokens_and_verdicts(full)


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_the_same_config_and_seed_give_the_same_tokens_in_the_cli_and_the_ui(server, temperature, tmp_path, capsys):
    url, _, _ = server
    args = run_args(prompt="Same seed, same tokens", k=3, temperature=temperature, seed=11, top_k=20, top_p=0.9)
    out = tmp_path / "cli.json"
    assert cli_main(["run", "--preset", "tiny-random", "--device", "cpu", "--draft-dtype", args["draft_dtype"],
                     "--prompt", args["prompt"], "--k", "3",
                     "--temperature", str(temperature), "--top-k", "20", "--top-p", "0.9", "--seed", "11",
                     "--max-new-tokens", str(NEW_TOKENS), "--out", str(out)]) == 0
    capsys.readouterr()
    cli = Trace.load(out)
    ui = []
    for _ in range(2):                                  # two sessions, one after the other
        client = Client(url, verbose=False)
        assert final(client.submit(**args, api_name="/run"))["status"].startswith("Done")
        ui.append(fetch_trace(client))
    assert tokens_and_verdicts(cli) == tokens_and_verdicts(ui[0]) == tokens_and_verdicts(ui[1])
    assert cli.config.to_dict() == ui[0].config.to_dict()


def test_session_state_expires_after_its_time_to_live():
    demo, url = serve(FakeRunner(accepted=(4, 1)))
    try:
        state = next(block for block in demo.blocks.values() if type(block).__name__ == "State")
        assert 3600 <= state.time_to_live < float("inf")
        state.time_to_live = 1.0                        # seconds, for this test
        client = Client(url, verbose=False)
        assert final(client.submit(**run_args(prompt="kept for a while"), api_name="/run"))["status"].startswith("Done")
        assert fetch_trace(client).prompt.text == "kept for a while"
        deadline = time.monotonic() + 15
        while fetch_trace(client).prompt.text == "kept for a while" and time.monotonic() < deadline:
            time.sleep(0.5)
        assert fetch_trace(client).prompt.text != "kept for a while"     # back to the page's recorded trace
    finally:
        demo.close()


def test_uploads_are_capped_and_never_served_back_inline():
    demo, url = serve(FakeRunner())
    try:
        too_big = httpx.post(f"{url}gradio_api/upload", timeout=60,
                             files={"files": ("trace.json", b" " * (20 * 1024 * 1024 + 1), "application/json")})
        assert too_big.status_code == 413
        page = httpx.post(f"{url}gradio_api/upload", files={"files": ("x.html", b"<script>1</script>", "text/html")})
        back = httpx.get(f"{url}gradio_api/file={page.json()[0]}")
        assert back.headers["content-disposition"].startswith("attachment") and "html" not in back.headers["content-type"]
        for path in ("/etc/passwd", str(Path(__file__).resolve()), "app.py"):
            assert httpx.get(f"{url}gradio_api/file={path}").status_code == 403
    finally:
        demo.close()
