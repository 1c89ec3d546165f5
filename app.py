"""SpecViz web app: `python app.py [--host 127.0.0.1] [--port 7860] [--share] [--preset NAME]`.

`--share` (a public link) turns hosted mode on unless `--no-hosted` is given; a server reachable from
other machines without hosted mode prints one warning line.

hysts' pattern: this file builds the model side (`EngineRunner`, which loads model
pairs and shares them read-only between sessions) and hands it to the UI
(`specviz.layout.build_demo`). The default pair starts loading in the background as the
server starts (`--no-preload` waits for the first Run instead); torch is imported by that
load, so the page, with its recorded trace, never waits for torch (docs/benchmark.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import ipaddress
import logging
import os
import sys
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping, Sequence

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
from specviz.serving.space import on_zero_gpu, use_persistent_storage  # noqa: E402

use_persistent_storage(os.environ)    # before gradio imports huggingface_hub, which reads HF_HOME once

from engine.background_load import BackgroundLoad, LoadStatus  # noqa: E402
from engine.config import CACHE_CHOICES, DEVICES, NGRAM_DRAFTER, ConfigError  # noqa: E402
from engine.runtime.compute_thread import ComputeThread, StepsOnComputeThread  # noqa: E402
from engine.formats.sweep_format import sweep_document  # noqa: E402
from engine.formats.trace import Trace  # noqa: E402
from specviz.layout import build_demo  # noqa: E402
from specviz.serving.device_call import GpuDecorator  # noqa: E402
from specviz.serving.policy import HOSTED_ENV, SERVERS_ENV, Policy, allowed_servers, hosted_from_env  # noqa: E402
from specviz.serving.runner import (Generation, ModelChoice, PresetInfo, ProgressFn, RaceProgress, RunRequest,  # noqa: E402
                            RunnerError, SweepRequest, SweepUpdate)
from specviz.serving.run_queue import SERVER_RUNS, VIEWERS  # noqa: E402
from specviz.theme import css, theme  # noqa: E402

MAX_UPLOAD = "20mb"        # engine.formats.trace.MAX_TRACE_BYTES
MAX_LOADED_PAIRS = 2       # pairs kept in memory; the least recently used is dropped first
QUEUE_SIZE = 32            # runs waiting at once; one more gets "busy, please try again"
# Gradio's worker threads: its default 40 for every other event, plus one per page watching a run
# (specviz/serving/run_queue.py VIEWERS: a page waiting in the Run tab's queue holds one).
MAX_THREADS = 40 + VIEWERS
MAX_SESSIONS = 500         # browser sessions whose state (one trace each) is kept; the oldest go first
LOG = logging.getLogger("specviz.app")


def _refuse_server(models: ModelChoice, what: str) -> None:
    if models.server:
        raise RunnerError(f"{what} runs in SpecViz's own engine: it is not offered on a vLLM server yet.")


class EngineRunner:
    """specviz.serving.runner.Runner around the engine: a small LRU cache of loaded pairs, guarded by a lock.
    Every model computation (loading, each step, baselines, sweeps) runs on one compute thread
    (engine/runtime/compute_thread.py): spread over Gradio's worker threads, each step was slower
    (docs/benchmark.md, "Measurements quoted in code")."""

    def __init__(self, device: str = "auto", default_preset: str | None = None, policy: Policy | None = None,
                 cache: str = "auto"):
        self.device = device
        self.cache = cache        # SpecConfig.cache for every run a request leaves on "auto"
        self._default = default_preset
        self.policy = policy      # a hosted server's limits, checked again here: every run, baseline and sweep
        self._pairs: OrderedDict[tuple[str, ...], Any] = OrderedDict()
        self._lock = threading.Lock()
        self.compute = ComputeThread()
        self._background: tuple[tuple[str, ...], BackgroundLoad] | None = None   # the pair loading since start-up

    def preload(self, models: ModelChoice) -> threading.Thread:
        """Start loading `models` now, on the compute thread, without blocking the caller (the server
        serves the page meanwhile). Whoever needs the pair before it is ready waits on this same load;
        a failed load is reported in `load_status()` and the next request for the pair tries again."""
        load = BackgroundLoad(models.label)
        self._background = (models.key, load)

        def run() -> None:
            try:
                pair = self.compute.run(self._pair, models, load.report)
            except Exception as error:  # any failure: the status line says it, a later Run retries
                LOG.warning("loading %s in the background failed: %s", models.label, error)
                load.finish(str(error) if isinstance(error, (RunnerError, ValueError))
                            else f"{type(error).__name__}: {error}")
                return
            try:                        # the costs and facts the status line says before any Run
                from engine.loading.machine_probe import probe_machine
                costs, facts = self.compute.run(probe_machine, pair, load.report)
            except Exception as error:  # the pair is loaded and runs; only the status line's costs are missing
                LOG.warning("measuring this machine's costs failed: %s", error)
                costs, facts = pair.device_costs, None
            load.finish(device_costs=costs, machine=facts)

        thread = threading.Thread(target=run, name="specviz-preload", daemon=True)
        thread.start()
        return thread

    def convert_at_start(self, preset: str) -> Any:
        """A ZeroGPU Space's start-up instead of `preload`: convert the preset's embedded weights into the
        cache in a process of its own (files on the CPU, no model loaded; engine/background_load.py
        `start_conversion`), so the first run's GPU call, which loads them, finds them converted; the
        conversion takes longer than a run's GPU time. A run that starts meanwhile waits on the cache's
        lock; a failure is logged and the run's own load meets it. Returns the process."""
        from engine.background_load import start_conversion
        from engine.presets import get_preset
        chosen = get_preset(preset)
        return start_conversion([chosen.target, *([chosen.draft] if chosen.draft else [])])

    def load_status(self) -> LoadStatus | None:
        return None if self._background is None else self._background[1].status()

    def presets(self) -> Sequence[PresetInfo]:
        from engine.presets import PRESETS
        return [PresetInfo(p.name, p.description, p.default_drafter) for p in PRESETS.values()]

    @property
    def default_preset(self) -> str:
        from engine.presets import DEFAULT_PRESET
        return self._default or DEFAULT_PRESET

    def start(self, request: RunRequest, progress: ProgressFn) -> Generation:
        if request.models.server:
            return self._server_generation(request, progress)
        self._await_background(request.models, progress)
        return StepsOnComputeThread(self.compute.run(self._start, request, progress), self.compute)

    def _server_generation(self, request: RunRequest, progress: ProgressFn) -> Generation:
        """A run streamed from a vLLM server (docs/architecture.md §10): no model loads here and nothing runs
        on the compute thread; the same Generation protocol, so the Run tab, export and replay work as ever.
        A hosted server's policy decides which addresses it may reach (check_models)."""
        from engine.vllm.source import start_generation
        from engine.vllm.transport import VllmError
        if self.policy is not None:
            self.policy.check_config(request.config)
            self.policy.check_models(request.models)
        progress(0.0, f"asking the vLLM server at {request.models.server}")
        try:
            generation = start_generation(request.models.server, request.prompt, request.config,
                                          method=request.models.server_method, expected_model=request.models.target)
        except VllmError as error:
            raise RunnerError(str(error)) from None
        progress(1.0, "the vLLM server is streaming")
        return generation

    def with_baseline(self, request: RunRequest, trace: Trace) -> Trace:
        if request.models.server:
            raise RunnerError("The target-only comparison runs SpecViz's own engine: it is not offered for a run on "
                              "a vLLM server.")
        return self.compute.run(self._with_baseline, request, trace)

    def sweep(self, request: SweepRequest, progress: ProgressFn) -> Iterator[SweepUpdate]:
        _refuse_server(request.models, "This sweep")   # Explore sweeps a server itself: specviz/explore/server_sweep.py
        self._await_background(request.models, progress)
        yield from self._on_compute_thread(self._sweep(request, progress))

    def race(self, request: RunRequest, progress: ProgressFn,
             should_stop: Callable[[], bool]) -> Iterator[RaceProgress]:
        _refuse_server(request.models, "A race")
        if self.policy is not None:
            self.policy.check(request)
        self._await_background(request.models, progress)
        yield from self._on_compute_thread(self._race(request, progress, should_stop))

    def _on_compute_thread(self, updates: Iterator[Any]) -> Iterator[Any]:
        """Each `next()` of `updates` on the compute thread; closing this closes it there too."""
        try:
            while (update := self.compute.run(next, updates, None)) is not None:
                yield update
        finally:
            self.compute.run(updates.close)

    def _await_background(self, models: ModelChoice, progress: ProgressFn) -> None:
        """While the start-up load runs, wait for it, showing its progress: it is this pair's load
        (never loaded twice), or it holds the compute thread that this request needs next."""
        if self._background is None:
            return
        key, load = self._background
        if load.status().loading:
            load.wait(progress, "" if key == models.key else f"waiting for {load.label} to finish loading: ")

    def _start(self, request: RunRequest, progress: ProgressFn) -> Generation:
        from engine import SpeculativeEngine
        if self.policy is not None:
            self.policy.check_config(request.config)
        engine = SpeculativeEngine(self._pair(request.models, progress))
        return engine.start(request.prompt, self._with_cache(request.config))

    def _with_baseline(self, request: RunRequest, trace: Trace) -> Trace:
        from engine import SpeculativeEngine
        return SpeculativeEngine(self._pair(request.models, lambda fraction, message: None)).with_baseline(trace)

    def _race(self, request: RunRequest, progress: ProgressFn,
              should_stop: Callable[[], bool]) -> Iterator[RaceProgress]:
        from engine.decode.race_run import run_race
        yield from run_race(self._pair(request.models, progress), request.prompt, self._with_cache(request.config),
                            should_stop)

    def _sweep(self, request: SweepRequest, progress: ProgressFn) -> Iterator[SweepUpdate]:
        from engine import SpeculativeEngine
        from engine.decode.run_sweep import run_sweep
        pair = self._pair(request.models, progress)
        meta = {"preset": request.models.preset or None, "draft": pair.draft_name, "target": pair.target_name,
                "prompts": list(request.prompts), "ks": list(request.ks), "temperatures": list(request.temperatures),
                "seeds": list(request.seeds), "max_new_tokens": request.config.max_new_tokens,
                "drafter": request.config.drafter, "draft_dtype": pair.draft_dtype, "target_dtype": pair.target_dtype}
        for done in run_sweep(SpeculativeEngine(pair), request.prompts, request.ks, request.temperatures,
                              request.seeds, self._with_cache(request.config)):
            yield SweepUpdate(done.done, done.total, done.elapsed_s, done.eta_s,
                              sweep_document(done.results, meta))

    def _with_cache(self, config: Any) -> Any:
        """The request's config with this server's cache kind where the request left it to the server."""
        return config.replace(cache=self.cache) if config.cache == "auto" else config

    def _pair(self, models: ModelChoice, progress: ProgressFn) -> Any:
        """The loaded pair for `models`, loading it on a miss.

        A full cache drops its least recently used pair only once the new pair has passed every
        check that needs no weights (`load_pair`'s `before_weights`: preset, paths, Hub id, dtypes,
        tokenizers), so a mistyped path or an unknown model leaves the cache as it was. Dropping
        it then, not after the new weights have loaded, keeps the peak at MAX_LOADED_PAIRS pairs
        (a pair's memory is in docs/benchmark.md); the price is that a load failing once its weights are
        being read (a damaged file, too little memory) has already dropped one pair."""
        if self.policy is not None:
            self.policy.check_models(models)
        progress(0.0, "starting the engine (the first run imports torch and transformers)")
        from engine import load_pair
        from engine.presets import ModelLoadError
        key = self._resolved(models).key
        with self._lock:
            if key in self._pairs:
                self._pairs.move_to_end(key)
                progress(1.0, "models ready")
                return self._pairs[key]
            # A custom pair without a draft model uses the n-gram drafter (it loads no draft model).
            which = ({"preset": models.preset} if models.preset
                     else {"draft": models.draft or NGRAM_DRAFTER, "target": models.target})
            try:
                pair = load_pair(**which, device=self.device, draft_dtype=models.draft_dtype,
                                 target_dtype=models.target_dtype, progress=progress, before_weights=self._make_room)
            except ModelLoadError as error:
                raise RunnerError(str(error)) from None
            self._pairs[key] = pair
            return pair

    def _resolved(self, models: ModelChoice) -> ModelChoice:
        """`models` with its "auto" dtypes spelled out for this server's device, so a request that
        names the dtype "auto" would pick (the page names float32 for a CPU's target) gets the pair
        loaded for "auto" (the start-up load) instead of a second copy of the same weights."""
        draft, target = self._auto_dtypes
        return dataclasses.replace(models, draft_dtype=draft if models.draft_dtype == "auto" else models.draft_dtype,
                                   target_dtype=target if models.target_dtype == "auto" else models.target_dtype)

    @functools.cached_property
    def _auto_dtypes(self) -> tuple[str, str]:
        """What "auto" picks for the draft and the target on this server's device: found once (the int8
        probe runs a small layer), since neither changes while the process runs."""
        from engine.config import resolve_target_dtype
        from engine.loading.models import resolve_device, resolve_draft_dtype
        from engine.presets import ModelLoadError
        try:
            device = resolve_device(self.device)
        except ModelLoadError as error:
            raise RunnerError(str(error)) from None
        return resolve_draft_dtype("auto", device), resolve_target_dtype("auto", device.type)

    def _make_room(self) -> None:
        """Drop least recently used pairs until one more fits (called with the lock held)."""
        while len(self._pairs) >= MAX_LOADED_PAIRS:
            self._pairs.popitem(last=False)


def is_loopback(host: str) -> bool:
    """True when `host` is reachable from this machine only: localhost or a loopback address."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def hosted_mode(flag: bool | None, share: bool, default: bool) -> bool:
    """Hosted mode for the command line: `--hosted` / `--no-hosted` when given, else on with `--share` (a
    public link's visitors must not reach local paths or any address through the vLLM URL box), else
    `default` (hosted_from_env)."""
    if flag is not None:
        return flag
    return share or default


def exposure_warning(host: str, share: bool, hosted: bool) -> str | None:
    """The one line a server reachable from other machines without hosted mode prints, else None."""
    if hosted or (is_loopback(host) and not share):
        return None
    where = "through a public share link" if share else f"on {host}"
    return (f"warning: SpecViz is reachable {where} without hosted mode: anyone who opens it can load models "
            "from this machine's disk and make it send requests to any address (the vLLM URL box); add --hosted "
            "(and --vllm-server URL for each vLLM server it may reach) unless everyone who can reach it is trusted.")


def gpu_decorator(environ: Mapping[str, str] = os.environ) -> GpuDecorator | None:
    """spaces.GPU on a Hugging Face ZeroGPU Space (specviz/serving/space.py `on_zero_gpu`), else None:
    elsewhere nothing is wrapped (spaces' own decorator would be effect-free there)."""
    if not on_zero_gpu(environ):
        return None
    import spaces       # before torch is imported: on ZeroGPU spaces patches torch's CUDA entry points
    return spaces.GPU


def boot(argv: Sequence[str] | None = None) -> tuple[argparse.Namespace, Any, EngineRunner]:
    """Parse the command line, build the runner and the page: everything `main` does before it launches.
    On a ZeroGPU Space nothing here touches a device: the default pair is not loaded at start-up (the
    GPU exists only inside a decorated call, and each run's call loads what it needs); its embedded
    weights are converted into the cache instead (`convert_at_start`)."""
    parser = argparse.ArgumentParser(description="SpecViz: speculative decoding, step by step.")
    # Hugging Face Spaces set GRADIO_SERVER_NAME=0.0.0.0; anywhere else the default stays on loopback.
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="address to serve on (default 127.0.0.1, or $GRADIO_SERVER_NAME)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
                        help="port (default 7860, or $GRADIO_SERVER_PORT)")
    parser.add_argument("--share", action="store_true", help="create a public Gradio share link")
    parser.add_argument("--preset", default=None, help="model preset selected when the page opens")
    parser.add_argument("--device", default="auto", choices=DEVICES, help="where the models run (default auto)")
    parser.add_argument("--cache", default="auto", choices=CACHE_CHOICES,
                        help="the KV cache: static (CUDA graphs on a GPU) or dynamic; auto (default): static on CUDA")
    try:
        hosted = hosted_from_env()
    except ConfigError as error:
        parser.error(str(error))
    parser.add_argument("--hosted", action=argparse.BooleanOptionalAction, default=None,
                        help=f"public server: presets' models only, no local paths, short runs (default: on with "
                             f"--share, when ${HOSTED_ENV}=1, or on a Hugging Face Space unless ${HOSTED_ENV}=0)")
    parser.add_argument("--no-preload", dest="preload", action="store_false",
                        help="do not load the default pair at start-up (the first Run loads it; never loaded "
                             "at start-up on a ZeroGPU Space)")
    parser.add_argument("--vllm-server", action="append", default=[], metavar="URL",
                        help=f"a vLLM server a hosted page may stream from (repeatable; also ${SERVERS_ENV}); "
                             "a classroom server streams from any address typed on the page")
    parser.add_argument("--vllm-runs", type=int, default=SERVER_RUNS, metavar="N",
                        help=f"runs streaming at once from one vLLM server, which batches them (default {SERVER_RUNS}); "
                             "more wait their turn in the Run tab's queue (docs/architecture.md §9)")
    args = parser.parse_args(argv)
    args.hosted = hosted_mode(args.hosted, args.share, hosted)
    warning = exposure_warning(args.host, args.share, args.hosted)
    if warning:
        print(warning, file=sys.stderr)
    if args.vllm_runs < 1:
        parser.error("--vllm-runs must be at least 1")
    try:
        servers = allowed_servers(args.vllm_server)
    except ConfigError as error:
        parser.error(str(error))
    policy = Policy.hosted_default(servers) if args.hosted else Policy(allowed_servers=servers)
    gpu = gpu_decorator()
    runner = EngineRunner(device=args.device, default_preset=args.preset, policy=policy if args.hosted else None,
                          cache=args.cache)
    names = [preset.name for preset in runner.presets()]
    if args.preset is not None and args.preset not in names:
        parser.error(f"unknown preset {args.preset!r}; choose one of {', '.join(names)}")
    if args.preload and gpu is None:
        runner.preload(ModelChoice(preset=runner.default_preset))
    elif args.preload:
        runner.convert_at_start(runner.default_preset)
    demo = build_demo(runner, gpu=gpu, policy=policy, queue_size=QUEUE_SIZE, server_runs=args.vllm_runs)
    demo.queue(default_concurrency_limit=1, max_size=QUEUE_SIZE)
    return args, demo, runner


def main(argv: Sequence[str] | None = None) -> None:
    args, demo, _ = boot(argv)
    # Uploads are parsed, never served back, so no allowed_paths; max_file_size caps them.
    demo.launch(server_name=args.host, server_port=args.port, share=args.share, max_file_size=MAX_UPLOAD,
                state_session_capacity=MAX_SESSIONS, max_threads=MAX_THREADS, theme=theme(), css=css())


if __name__ == "__main__":
    main()
