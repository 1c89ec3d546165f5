"""Faults on real vLLM servers (issue #38, items 4 and 7), through the Run tab's handlers and app.py's real
EngineRunner, on the tiny random pair (tests/vllm_session.py): a server without speculation, top-k on a server
with SpecViz's CPU sampler fix (and refused on one without), and a server killed in the middle of a run. The
replayed server (tests/test_ui_vllm_faults.py) keeps the cases whose timing it must control (a silent server, a
stream cut at an exact event, a whole run whose texts are refused); these need no timing: the first is refused
before anything streams, and the second is killed at an exact point, the moment the run's first chunk reaches
SpecViz.

Each ends in one sentence (a gr.Error, no traceback), the trace the page showed before stays in the session, and
the killed run keeps exactly the tokens that arrived. What arrived depends on the kernel, not on SpecViz: usually
a cut stream (kept unsplit: no step the server did not report), and sometimes the whole run, already sent before
the kill (the CI at 37384db met it: a tiny server can outrun a busy client), kept split by the server's arrays
with the texts it never gave shown as ids. The test reads which from the stream and holds SpecViz to that case."""

from __future__ import annotations

import os
import re
import signal

import gradio as gr
import pytest

import engine.vllm.stream as stream_module
from app import EngineRunner
from control_values import controls, progress
from engine.vllm.server_info import FIX_NAME
from specviz.run.handlers import Handlers
from specviz.run.views import Views
from specviz.serving.runner import VLLM_SERVER
from vllm_session import tiny_server

pytestmark = pytest.mark.vllm
NAMES = Views.names()
BUDGET = 512        # the most the Run tab asks for (a kill at the first chunk usually cuts the run)


@pytest.fixture(scope="module")
def doomed(tmp_path_factory):
    """A speculative tiny server with the CPU sampler fix, killed by the last test (its own start: about 20 s)."""
    with tiny_server(tmp_path_factory.mktemp("vllm-doomed"), "draft_model", fix_cpu_sampler=True,
                     max_model_len=1024) as started:    # the tiny pair's positions
        yield started


def updates_until_error(handlers: Handlers, shown, url: str, max_new_tokens: int = 8) -> tuple[str, list[dict]]:
    updates: list[dict] = []
    with pytest.raises(gr.Error) as caught:
        for update in handlers.run(shown, False, None, *controls(preset=VLLM_SERVER, server=url, prompt="abc", k=3,
                                                                 max_new_tokens=max_new_tokens, seed=0),
                                   progress=progress):
            updates.append(dict(zip(NAMES, update)))
    message = caught.value.message
    assert "\n" not in message and "Traceback" not in message and message.endswith(".")
    return message, updates


def test_a_server_without_speculation_is_refused_in_one_sentence_and_the_shown_trace_stays(tiny_plain_vllm,
                                                                                              tiny_vllm):
    handlers = Handlers(EngineRunner(device="cpu"), min_interval=0.0)
    shown = [dict(zip(NAMES, u)) for u in handlers.run(None, False, None, *controls(
        preset=VLLM_SERVER, server=tiny_vllm.url, prompt="abc", k=3, max_new_tokens=6, seed=0),
        progress=progress)][-1]["trace"]
    message, updates = updates_until_error(Handlers(handlers.runner, min_interval=0.0), shown, tiny_plain_vllm.url)
    assert "runs without speculative decoding: start it with --speculative-config" in message
    assert all(update["trace"] is shown or isinstance(update["trace"], dict) for update in updates)


def test_top_k_runs_on_a_server_with_the_cpu_sampler_fix_and_is_refused_on_one_without(doomed, tiny_vllm):
    handlers = Handlers(EngineRunner(device="cpu"), min_interval=0.0)
    values = controls(preset=VLLM_SERVER, server=doomed.url, prompt="abc", k=3, max_new_tokens=16, seed=0,
                      temperature=0.8, top_k=5)
    last = [dict(zip(NAMES, u)) for u in handlers.run(None, False, None, *values, progress=progress)][-1]["trace"]
    assert last.complete and last.split is None and last.config.top_k == 5
    assert last.config.engine == f"vllm 0.32.0 + {FIX_NAME}" and len(last.output.token_ids) == 16
    shipped = controls(preset=VLLM_SERVER, server=tiny_vllm.url, prompt="abc", k=3, max_new_tokens=8, seed=0,
                       temperature=0.8, top_k=5)
    with pytest.raises(gr.Error, match=r"Top-k is off for this vLLM server: .*--fix-cpu-sampler"):
        list(Handlers(handlers.runner, min_interval=0.0).run(None, False, None, *shipped, progress=progress))


def test_a_server_killed_mid_run_ends_it_in_one_sentence_keeping_exactly_what_arrived(doomed, monkeypatch):
    group = doomed.server.process.pid
    arrived: list[int] = []
    finished: list[str] = []
    original = stream_module.stream_post

    def killed_after_the_first_chunk(address, path, body, *args, **kwargs):
        """The real stream; the server's whole process group is killed as the run's first token chunk arrives
        (the probe's pinned requests, which carry allowed_token_ids, pass untouched)."""
        for arrival in original(address, path, body, *args, **kwargs):
            choices = arrival.data.get("choices") or ()
            tokens = [t for choice in choices for t in choice.get("token_ids") or ()]
            if tokens and "allowed_token_ids" not in body:
                if not arrived:
                    os.killpg(group, signal.SIGKILL)
                arrived.extend(tokens)
                finished.extend(choice["finish_reason"] for choice in choices if choice.get("finish_reason"))
            yield arrival

    monkeypatch.setattr(stream_module, "stream_post", killed_after_the_first_chunk)
    handlers = Handlers(EngineRunner(device="cpu"), min_interval=0.0)
    message, updates = updates_until_error(handlers, None, doomed.url, max_new_tokens=BUDGET)
    last = updates[-1]
    assert arrived and list(last["trace"].output.token_ids) == arrived      # exactly the tokens that arrived
    emitted = [token for step in last["trace"].steps for token in step.emitted]
    assert [token.id for token in emitted] == arrived
    # A token whose text the dead server could not give reads ⟨id⟩ (none is dropped for want of its text).
    assert all(token.text == f"⟨{token.id}⟩" for token in emitted if token.text.startswith("⟨"))
    if finished:
        # The kernel had the whole run on its way before the kill (a tiny server can outrun a busy client): the
        # server said everything but the texts, and the run is kept whole, split by its arrays.
        assert message.startswith(f"The vLLM server at {doomed.url} sent the whole run, then did not answer "
                                   "/detokenize for "), message
        assert last["trace"].complete and last["trace"].split is None and len(arrived) == BUDGET
    else:
        # The kernel closes a killed server's sockets: the stream ends early (FIN) or breaks (RST), each its sentence.
        assert re.search(r"(ended its stream without finishing the run|connection to the vLLM server at \S+ broke "
                         r"mid-run)", message) and message.endswith("kept.") and message.count("kept") == 1, message
        assert last["status"].startswith("Stopped by an error after") and not last["trace"].complete
        assert last["trace"].split == "unsplit"                        # no verdict the server did not send
        assert len(arrived) < BUDGET

    monkeypatch.setattr(stream_module, "stream_post", original)
    message, _ = updates_until_error(Handlers(handlers.runner, min_interval=0.0), last["trace"], doomed.url)
    assert f"No vLLM server answers at {doomed.url}" in message
