"""bench.py's vLLM rows (`--peer vllm`; in the default run when a vLLM environment is installed).

A real vLLM OpenAI server per configuration (engine/vllm/server.py), on the same weights as
SpecViz's rows (the preset's converted folders), started, warmed up with one request, then sent
the same prompts (as token ids: SpecViz's chat formatting, exactly), token budget, temperature and
seed as SpecViz's rows, one request at a time, timed from the client (request sent to its last
token; the prefill included, as in SpecViz's rows). Start-up (torch.compile on a first start,
cached after) is reported apart. Each row carries what vLLM reports per request: acceptance
(accepted / drafted) and tokens per step (vLLM's mean acceptance length: 1 + accepted / steps).

Configurations: target-only, draft-model speculation at the run's k and n-gram speculation
(vLLM's own lookup, min = max = 5) in the speed dtype (`speed_dtype`: bfloat16 where the CPU computes
it natively, else float32, vLLM's fastest on each; named in the row), one float32 target-only row for the identity check (greedy output
token for token against SpecViz's stock float32 target-only; every greedy row is compared, only
float32 rows are expected identical), optionally draft-model speculation with vLLM's
`draft_sample_method` "probabilistic". `--vllm-threads 1,2` repeats the rows per thread count
(OMP_NUM_THREADS; on 2 cores vLLM's engine and its API process share them). Every run's emitted
tokens go to an emitted-tokens document (engine/audit/runs.py) and, at T > 0, through the audit
(engine/audit/): the row's "marked" count is how many tokens the target would sample less than
once in a million.

`--vllm-fix-cpu-sampler` starts every server with SpecViz's fix of vLLM 0.32's CPU sampler
(plugins/vllm_cpu_sampler_fix, vLLM #55005: as shipped, its speculative sampling at T > 0 does not
follow the target's law): each row's name says "CPU sampler fixed", and its `cpu_sampler_fix` and
`engine` say what the server's own /metrics gauge reported; a server asked for the fix that does not
report it serves no rows.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.configurations import SUITES, Suite
from benchmarks.rows import Row
from benchmarks.table import tokens_per_step
from engine.audit.runs import EmittedRun
from engine.config import SpecConfig
from engine.vllm.server import START_TIMED_OUT, RunningServer, ServerSpec, start_server
from engine.vllm.server_info import FIX_NAME, ServerInfo, probe
from engine.vllm.transport import VllmError
from engine.vllm.stream import CompletionStream, SpecMetrics, completion_body
from engine.vllm.ngram import DEFAULT_LOOKUP
from engine.vllm.to_trace import engine_steps, external_config

if TYPE_CHECKING:
    from engine.decode.pair import ModelPair

SPEED_DTYPE = "bfloat16"          # the speed rows' dtype where the CPU computes bfloat16 natively
IDENTITY_DTYPE = "float32"
METHOD_WORDS = {"none": "target-only", "draft_model": "draft model", "ngram": "n-gram"}
DTYPE_WORDS = {"bfloat16": "bf16", "float32": "fp32", "float16": "fp16"}


@dataclass(frozen=True)
class PeerServerSpec(ServerSpec):
    """ServerSpec with vLLM's CPU binding (an adapter here; engine/vllm/server.py has no field).
    vLLM 0.32 binds its OpenMP threads itself and keeps a core for its API process whatever
    OMP_NUM_THREADS says (on 2 cores: compute on core 0 only); `bind_cores` (e.g. "0-1") names
    the cores its engine computes on instead."""

    bind_cores: str = ""

    def environment(self) -> dict[str, str]:
        environment = super().environment()
        if self.bind_cores:
            environment["VLLM_CPU_OMP_THREADS_BIND"] = self.bind_cores
        return environment


@dataclass(frozen=True)
class PeerConfiguration:
    method: str                      # "none" (target-only) | "draft_model" | "ngram"
    dtype: str
    threads: int
    draft_sample_method: str = "greedy"
    bind_cores: str = ""             # "" = vLLM's own binding (one core kept for its API process)
    fix_cpu_sampler: bool = False    # the server runs SpecViz's CPU sampler fix (plugins/vllm_cpu_sampler_fix)

    def label(self, k: int) -> str:
        what = METHOD_WORDS[self.method] + ("" if self.method == "none" else f", k={k}")
        sampling = ", probabilistic drafts" if self.draft_sample_method != "greedy" else ""
        cores = f" on cores {self.bind_cores}" if self.bind_cores else ""
        fixed = ", CPU sampler fixed" if self.fix_cpu_sampler else ""
        return (f"vLLM {what}{sampling} ({DTYPE_WORDS.get(self.dtype, self.dtype)}, "
                f"{self.threads} thread{'s' * (self.threads != 1)}{cores}{fixed})")

    @property
    def speculative(self) -> bool:
        return self.method != "none"

    def spec(self, target: str, draft: str | None, k: int, max_model_len: int) -> PeerServerSpec:
        return PeerServerSpec(target=target, draft=draft if self.method == "draft_model" else None, method=self.method,
                              k=k, dtype=self.dtype, max_model_len=max_model_len, threads=self.threads,
                              draft_sample_method=self.draft_sample_method, bind_cores=self.bind_cores,
                              fix_cpu_sampler=self.fix_cpu_sampler)


def speed_dtype(choice: str, flags: dict[str, bool] | None = None) -> str:
    """The vLLM speed rows' dtype: `choice`, or for "auto" bfloat16 where the CPU computes it natively (its flags
    name AVX-512 BF16 or AMX, engine/runtime/cpu/native_bf16.py) and float32 where it would emulate it (on an AVX2
    EPYC, 2026-11-28, vLLM's bfloat16 target-only ran 2.2 tok/s, its float32 one 3.2)."""
    if choice != "auto":
        return choice
    from engine.cli.machine import machine_record
    from engine.runtime.cpu.native_bf16 import NATIVE_FLAGS
    flags = machine_record()["flags"] if flags is None else flags
    return SPEED_DTYPE if any(flags.get(flag) for flag in NATIVE_FLAGS) else IDENTITY_DTYPE


BINDINGS = ("auto", "all")        # vLLM's own core binding (one core kept for its API process), or every core


def bound_cores(count: int, binding: str) -> str:
    """PeerServerSpec.bind_cores for `count` threads: "" under vLLM's own binding ("auto"), else cores 0..count-1."""
    if binding == "auto":
        return ""
    return f"0-{count - 1}" if count > 1 else "0"


def peer_configurations(threads: list[int], probabilistic: bool = False, dtype: str = SPEED_DTYPE,
                        bindings: tuple[str, ...] = ("auto",), fix_cpu_sampler: bool = False) -> list[PeerConfiguration]:
    """The identity row (float32 target-only, at the first thread count and binding), then per thread
    count and binding target-only, draft model and n-gram in `dtype` (and probabilistic drafts when
    asked). Binding "all": a count of n threads computes on cores 0..n-1 (vLLM's own binding, "auto",
    keeps one free). `fix_cpu_sampler`: every server runs SpecViz's CPU sampler fix."""
    first = PeerConfiguration("none", IDENTITY_DTYPE, threads[0], bind_cores=bound_cores(threads[0], bindings[0]),
                              fix_cpu_sampler=fix_cpu_sampler)
    chosen = [first]
    for count in threads:
        for binding in bindings:
            cores = bound_cores(count, binding)
            chosen += [configuration for configuration in (PeerConfiguration(method, dtype, count, bind_cores=cores,
                                                                             fix_cpu_sampler=fix_cpu_sampler)
                                                           for method in ("none", "draft_model", "ngram"))
                       if configuration != first]
            if probabilistic:
                chosen.append(PeerConfiguration("draft_model", dtype, count, "probabilistic", cores, fix_cpu_sampler))
    return chosen


@dataclass
class PeerRow:
    """A measured vLLM row: bench's Row plus what only a peer has."""

    row: Row
    configuration: PeerConfiguration
    engine: str = ""                 # "vllm 0.32.0" (+ the fix's name when the server reported it ran)
    cpu_sampler_fix: bool = False    # the server's /metrics gauge says SpecViz's CPU sampler fix ran in it
    marked: int | None = None        # audit: tokens the target gives under 1e-6 (T > 0 rows)
    expected_marked: float | None = None


@dataclass(frozen=True)
class Request:
    token_ids: tuple[int, ...]
    metrics: SpecMetrics | None
    step_sizes: tuple[int, ...] | None
    step_drafted: tuple[int, ...] | None


def request(info: ServerInfo, prompt_ids: list[int], config: SpecConfig, read_timeout_s: float = 600.0) -> Request:
    """One streamed completion, read to its end: the emitted ids and vLLM's per-request metrics. The
    read timeout is long: on a loaded machine vLLM's engine can pause for over a minute."""
    body = completion_body(info.model, list(prompt_ids), config, info.cpu_sampler_fix)
    stream = CompletionStream(info, body, read_timeout_s)
    chunks = list(stream)
    ids = tuple(token for chunk in chunks for token in chunk.token_ids)
    sizes = drafted = None
    if stream.metrics is not None:
        try:
            _, steps = engine_steps(info, external_config(info, config, DEFAULT_LOOKUP), chunks, stream.metrics,
                                    prompt_ids)
        except VllmError as error:        # the counts are still the row's; only the audit's step kinds go
            print(f"  the steps of one request could not be placed ({error}); its audit marks no step kinds",
                  file=sys.stderr)
        else:
            sizes, drafted = tuple(len(step.token_ids) for step in steps), tuple(step.drafted for step in steps)
    return Request(ids, stream.metrics, sizes, drafted)


def measure_peer(peer: PeerRow, info: ServerInfo, prompts: dict[str, list[int]], config: SpecConfig, repeats: int,
                 reference: dict[str, tuple[int, ...]] | None, emitted: list[EmittedRun]) -> None:
    """Fill the peer's row from `repeats` requests per prompt (the median wall time kept, the last
    request's tokens and metrics). `reference` (greedy): SpecViz's stock float32 target-only ids by
    prompt name; the row is identical when every prompt's ids equal them."""
    row, outputs = peer.row, {}
    for name, prompt_ids in prompts.items():
        times, result = [], None
        for _ in range(repeats):
            started = time.perf_counter()
            result = request(info, prompt_ids, config)
            times.append(time.perf_counter() - started)
        times.sort()
        row.add(name, len(result.token_ids), times[len(times) // 2])
        if result.metrics is not None:
            row.drafted += result.metrics.num_draft_tokens
            row.accepted += result.metrics.num_accepted_draft_tokens
            row.steps += len(result.metrics.per_step_accepted)
            row.verify_steps += sum(drafted > 0 for drafted in result.metrics.per_step_drafted)
        outputs[name] = result.token_ids
        emitted.append(EmittedRun(f"{row.name}, T={config.temperature:g}, {name}", info.engine, tuple(prompt_ids),
                                  result.token_ids, config.temperature, config.top_k, config.top_p, result.step_sizes,
                                  result.step_drafted))
    if reference is not None:
        row.identical = all(outputs[name] == reference[name] for name in prompts)


def serve(configuration: PeerConfiguration, target: str, draft: str | None, k: int, log: Path,
          max_model_len: int = 1024) -> tuple[RunningServer, ServerInfo]:
    """Start the configuration's server and probe it (the probe's request is the warm-up's first); a server
    asked for the CPU sampler fix that does not report it running is stopped and refused."""
    server = start_server(configuration.spec(target, draft, k, max_model_len), log)
    try:
        info = probe(server.address, method=configuration.method if configuration.speculative else "draft_model",
                     dtype=configuration.dtype, timeout_s=600)      # a loaded machine's first request is slow
        check_fix(configuration, info)
    except Exception:
        server.stop()
        raise
    return server, info


def serve_retrying(configuration: PeerConfiguration, target: str, draft: str | None, k: int, log: Path,
                   serve_once=None) -> tuple[RunningServer, ServerInfo, str]:
    """`serve`, started once more when the first start timed out: a first start compiles with torch.compile, on a
    slow CPU for longer than the start's time-out (an AVX2 EPYC's draft-model server, 2026-11-28), and the second
    start reads what the first compiled from vLLM's compile cache. Returns the server, its info, and the first
    start's error ("" when it served at once); any other refusal is final."""
    serve_once = serve_once or serve
    try:
        return (*serve_once(configuration, target, draft, k, log), "")
    except VllmError as error:
        if not str(error).startswith(START_TIMED_OUT):
            raise
        print(f"  vLLM server {configuration.label(k)!r}: {error} Starting it once more, on its compile cache.",
              file=sys.stderr)
        return (*serve_once(configuration, target, draft, k, log.with_name(log.stem + "-again.log")), str(error))


def check_fix(configuration: PeerConfiguration, info: ServerInfo) -> None:
    """Refuse, in one sentence, a server whose /metrics does not say the CPU sampler fix ran when the
    configuration asked for it (its rows would be labelled fixed and measure vLLM as shipped)."""
    if configuration.fix_cpu_sampler and not info.cpu_sampler_fix:
        raise VllmError(f"The vLLM server at {info.address} was started for the {FIX_NAME} but its /metrics does "
                        f"not report it running: see its log.")


def warm_up(info: ServerInfo, prompt_ids: list[int], k: int) -> None:
    """One request of the benchmark's kind, unmeasured: the first pays for lazy compilation."""
    request(info, prompt_ids, SpecConfig(k=k, max_new_tokens=8))
    request(info, prompt_ids, SpecConfig(k=k, temperature=0.7, max_new_tokens=8))


def peer_table_row(peer: PeerRow, rows: list[Row], k: int, suite: Suite = SUITES["cpu"]) -> dict:
    """The row in bench's table layout (the keys of benchmarks/table.py `table_row`): its ratios
    against SpecViz's references of the same temperature; the theory and cost cells are SpecViz's
    own measurements (None here: vLLM reports no per-step timing)."""
    row = peer.row
    same = {r.name: r for r in rows if r.temperature == row.temperature}

    def ratio(name: str, code: bool = False) -> float | None:
        other = same.get(name)
        theirs = (other.prompt_tokens_per_s("code") if code else other.tokens_per_s) if other else 0.0
        mine = row.prompt_tokens_per_s("code") if code else row.tokens_per_s
        return round(mine / theirs, 3) if theirs else None
    return {"name": row.name, "temperature": row.temperature, "headline": False, "peer": "vllm",
            "engine": peer.engine, "method": peer.configuration.method, "dtype": peer.configuration.dtype,
            "threads": peer.configuration.threads, "bind_cores": peer.configuration.bind_cores,
            "draft_sample_method": peer.configuration.draft_sample_method, "cpu_sampler_fix": peer.cpu_sampler_fix,
            "tokens_per_s": round(row.tokens_per_s, 2), "speedup": ratio(suite.reference_stock),
            "vs_same_kernels": ratio(suite.reference_same_kernels),
            "code_speedup": ratio(suite.reference_stock, code=True), "vs_assisted": ratio(suite.assisted_same_k.format(k=k)),
            "acceptance_rate": round(row.accepted / row.drafted, 3) if row.drafted else None,
            "mean_accepted_length": tokens_per_step(row) if row.verify_steps else None,
            "theoretical_speedup": None, "measured_over_theory": None, "draft_cost": None, "verify_cost": None,
            "theory_at_verify_cost": None, "measured_over_theory_at_verify_cost": None, "theory_note": None,
            "identical": row.identical, "exact_expected": peer.configuration.dtype == IDENTITY_DTYPE,
            "marked": peer.marked, "expected_marked": peer.expected_marked,
            "tokens": row.tokens, "wall_s": round(row.wall_s, 2),
            "phases_ms_per_token": None}                  # timed from the client only: no phase inside the server


def add_vs_best_peer(table: list[dict]) -> None:
    """Each row's `vs_vllm_best`: its tok/s over vLLM's fastest speculative row of the same temperature."""
    for row in table:
        peers = [r for r in table if r.get("peer") == "vllm" and r.get("method") != "none"
                 and r["temperature"] == row["temperature"] and r["tokens_per_s"]]
        best = max(peers, key=lambda r: r["tokens_per_s"], default=None)
        row["vs_vllm_best"] = round(row["tokens_per_s"] / best["tokens_per_s"], 3) if best else None
        row["vllm_best"] = best["name"] if best else None


@dataclass
class PeerRun:
    """What the vLLM part of a benchmark run measured."""

    peers: list[PeerRow]
    servers: list[dict]              # one per configuration: its start-up seconds, engine, threads, log
    emitted: list[EmittedRun]


def local_folders(preset: str) -> tuple[str, str | None]:
    """The preset's target and draft as model folders a vLLM server can load (converted on first use)."""
    from engine.loading.model_folders import preset_folders as folders
    target, draft = folders(preset)
    draft = draft or None
    if not Path(target).is_dir():
        raise ValueError(f"the vLLM rows need the {preset} preset's weights as folders on disk, but its target is "
                         f"{target!r}: choose a preset with GGUF or local weights")
    return target, draft


def run_peer(configurations: list[PeerConfiguration], target: str, draft: str | None, prompts: dict[str, list[int]],
             temperatures: list[float], base: SpecConfig, repeats: int, reference: dict[str, tuple[int, ...]] | None,
             log_dir: Path, audit_pair: "ModelPair | None" = None) -> PeerRun:
    """Each configuration on its own server, one at a time (started, probed, warmed up, measured at
    every temperature, stopped); at T > 0 each run's tokens are audited under `audit_pair`'s target."""
    from engine.audit.score import score_tokens
    measured = PeerRun([], [], [])
    for index, configuration in enumerate(configurations):
        label = configuration.label(base.k)
        print(f"  vLLM server: {label}", file=sys.stderr)
        log = log_dir / f"vllm-server-{index}.log"
        server_entry = {"name": label, "method": configuration.method, "dtype": configuration.dtype,
                        "threads": configuration.threads, "bind_cores": configuration.bind_cores, "log": str(log)}
        try:
            server, info, retried = serve_retrying(configuration, target, draft, base.k, log)
        except VllmError as error:         # one configuration that cannot serve costs its rows, not the run
            print(f"  vLLM server {label!r} did not serve: {error}", file=sys.stderr)
            measured.servers.append(server_entry | {"error": str(error)})
            continue
        if retried:
            server_entry["first_start"] = retried
        try:
            warm_up(info, next(iter(prompts.values())), base.k)
            for temperature in temperatures:
                print(f"  T={temperature:g} {label}", file=sys.stderr)
                peer, runs = PeerRow(Row(label, temperature), configuration, info.engine, info.cpu_sampler_fix), []
                measure_peer(peer, info, prompts, base.replace(temperature=temperature), repeats,
                             reference if temperature == 0 else None, runs)
                if audit_pair is not None and temperature > 0:
                    audits = [score_tokens(audit_pair, run.prompt_ids, run.token_ids, run.temperature, run.top_k,
                                           run.top_p) for run in runs]
                    peer.marked = sum(len(audit.marked) for audit in audits)
                    peer.expected_marked = round(sum(audit.expected_marked for audit in audits), 6)
                measured.peers.append(peer)
                measured.emitted += runs
        finally:
            server.stop()
        measured.servers.append(server_entry | {"engine": info.engine, "cpu_sampler_fix": info.cpu_sampler_fix,
                                                "startup_s": round(server.startup_s, 1)})
    return measured


def peer_line(results: dict) -> str:
    """Start-ups and threads, reported apart from the decoding rows."""
    peer = results.get("vllm")
    if not peer:
        return ""
    starts = ", ".join(f"{server['name']} {server['startup_s']:.0f} s" for server in peer["servers"]
                       if "error" not in server)
    failed = "".join(f" {server['name']} did not serve: {server['error']}" for server in peer["servers"]
                     if "error" in server)
    return (f"vLLM ({peer['engine']}) server start-ups, not in any row (a first start compiles; cached after): "
            f"{starts}. Threads: SpecViz {peer['specviz_threads']}, vLLM as named in each row (OMP_NUM_THREADS)."
            + failed)
