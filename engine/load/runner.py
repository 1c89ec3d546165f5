"""Run the concurrency grid on one vLLM server: for each level N, N streamed completions sent at once
(one thread each, released together) after one warm-up request, the levels one after another so the /metrics counters' delta
around a level is exactly that level's requests. A server without speculation is the baseline (no
traces, no counters); an answer that is not vLLM's is refused in one sentence by the probe."""

from __future__ import annotations

import threading
from dataclasses import asdict
from typing import Any, Callable, Sequence

from engine.config import SpecConfig
from engine.load.batch_model import ForwardCurve
from engine.load.forward_probe import forward_probe, probe_sizes
from engine.load.requests import Finished, prepare, send, finish_trace
from engine.load.stats import RequestTimes, acceptance, level_summary
from engine.vllm.counters import SpecCounters, read_counters
from engine.vllm.server_info import ServerInfo, probe
from engine.vllm.transport import DEFAULT_READ_TIMEOUT_S, Session, VllmError

DEFAULT_LEVELS = (1, 2, 4, 8, 16)


def server_info(address: str, method: str = "draft_model", dtype: str = "") -> ServerInfo:
    """The probe's answer; a speculative server must report each step (the traces need the arrays)."""
    info = probe(address, method, dtype)
    if info.speculative:
        info.check_usable()
    return info


def _concurrently(jobs: Sequence[Callable[[], Finished]]) -> list[Finished]:
    """Run the jobs on one thread each, released together; the first failure is raised after all end."""
    results: list[Finished | None] = [None] * len(jobs)
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(jobs))

    def work(index: int) -> None:
        try:
            barrier.wait()
            results[index] = jobs[index]()
        except BaseException as error:      # noqa: BLE001 - carried to the caller's thread
            errors.append(error)

    threads = [threading.Thread(target=work, args=(index,), daemon=True) for index in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return [result for result in results if result is not None]


def _counters(info: ServerInfo) -> SpecCounters | None:
    return read_counters(info.address) if info.speculative else None


def run_level(info: ServerInfo, prompts: Sequence[str], concurrency: int, config: SpecConfig) -> dict[str, Any]:
    """One level's record (specviz.load/1 `levels[i]`)."""
    with Session(info.address) as session:
        prepared = [prepare(info, session, i % len(prompts), prompts[i % len(prompts)], config)
                    for i in range(concurrency)]
        before = _counters(info)
        finished = _concurrently([lambda p=p: send(info, p) for p in prepared])
        after = _counters(info)
        traces = [finish_trace(info, config, f, session).to_dict() if info.speculative else None for f in finished]
    start = min(f.sent_s for f in finished)
    times = [RequestTimes(f.prepared.prompt_index, f.sent_s - start, f.first_token_s - start, f.done_s - start,
                          f.output_tokens, len(f.chunks[0].token_ids)) for f in finished]
    record: dict[str, Any] = {"concurrency": concurrency, **level_summary(times)}
    record["acceptance"] = (acceptance([(f.metrics.per_step_accepted, f.metrics.per_step_drafted)
                                        for f in finished if f.metrics is not None]) if info.speculative else None)
    record["counters_before"] = asdict(before) if before is not None else None
    record["counters_after"] = asdict(after) if after is not None else None
    record["requests"] = [{"prompt_index": t.prompt_index, "sent_s": t.sent_s, "first_token_s": t.first_token_s,
                           "done_s": t.done_s, "output_tokens": t.output_tokens, "first_chunk_tokens": t.first_chunk_tokens, "trace": trace}
                          for t, trace in zip(times, traces)]
    return record


def run_server(address: str, prompts: Sequence[str], levels: Sequence[int], config: SpecConfig,
               method: str = "draft_model", report: Callable[[str], None] = lambda line: None,
               probe_tokens: int = 0) -> dict[str, Any]:
    """One server's record (specviz.load/1 `servers[i]`): every level in order; on the server without speculation
    and `probe_tokens` > 0, first the forward probe up to that many tokens (engine/load/forward_probe.py). A level
    the server fails ends the record there: `stopped` {concurrency, why} and the levels measured before it."""
    if not prompts:
        raise VllmError("The load run needs at least one prompt.")
    info = server_info(address, method)
    record: dict[str, Any] = {"speculative": info.speculative, "version": info.version, "engine": info.engine,
                              "model": info.model,
                              "address": str(info.address), "k": info.k, "levels": []}
    with Session(info.address, DEFAULT_READ_TIMEOUT_S) as session:     # one request first: it warms the caches
        send(info, prepare(info, session, 0, prompts[0], config))
        if probe_tokens and not info.speculative:
            ids = [i for index, prompt in enumerate(prompts) for i in prepare(info, session, index, prompt,
                                                                               config).prompt.token_ids]
            record["forward_probe"] = forward_probe(info, session, ids, probe_sizes(probe_tokens))
            report(probe_line(record["forward_probe"]))
    for concurrency in levels:
        try:
            level = run_level(info, prompts, concurrency, config)
        except VllmError as error:          # a stream cut, a request dropped: the levels before it are kept
            record["stopped"] = {"concurrency": concurrency, "why": str(error)}
            report(stop_line(info.speculative, record["stopped"]))
            break
        record["levels"].append(level)
        report(level_line(info.speculative, level))
    return record


def probe_line(probe: dict[str, Any]) -> str:
    """The probe's medians (the batch cost model's curve), printed."""
    curve = ForwardCurve.of(probe)
    return "forward probe  " + "  ".join(f"{size} tok: {seconds * 1000:.0f} ms"
                                         for size, seconds in zip(curve.sizes, curve.seconds))


def stop_line(speculative: bool, stop: dict[str, Any]) -> str:
    """The printed line of the level a server failed."""
    return f"{'spec' if speculative else 'none'} N={stop['concurrency']:<3d} stopped: {stop['why']}"


def level_line(speculative: bool, level: dict[str, Any]) -> str:
    """One printed line per level."""
    tau = level["acceptance"]["tau"] if level["acceptance"] else None
    speed = level["tokens_per_s_per_request"]
    return (f"{'spec' if speculative else 'none'} N={level['concurrency']:<3d} wall {level['wall_s']:.2f} s  "
            f"{level['output_tokens']} tokens  {level['aggregate_tokens_per_s']:.1f} tok/s  "
            f"latency p50 {level['latency_s']['p50']:.2f} s  first token p50 {level['first_token_s']['p50']:.2f} s  "
            f"per request p50 {speed['p50'] if speed else float('nan'):.1f} tok/s"
            + (f"  tau {tau:.2f}" if tau is not None else ""))
