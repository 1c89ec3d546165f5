"""A model pair loading in the background, and the people waiting for it. Torch-free.

app.py's EngineRunner starts loading the default pair as soon as the server starts. The load
reports its progress here (`report`, load_pair's progress callback) and ends with `finish`;
anyone who needs that pair meanwhile (a Run pressed early) `wait`s on it, seeing the same
progress, so the pair is never loaded twice. The page's status line reads `status()`.

On a ZeroGPU Space nothing loads at start-up (a GPU exists only inside each run's spaces.GPU call,
specviz/serving/device_call.py); the start-up work there is `start_conversion`: the default pair's
embedded GGUF weights converted into the cache on the CPU, in a process of its own, so that no run's
GPU time goes on it.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from multiprocessing.process import BaseProcess
from dataclasses import dataclass
from typing import Callable, Iterable

from engine.device_costs import DeviceCosts
from engine.machine_facts import MachineFacts

LOADING, READY, FAILED = "loading", "ready", "failed"
CONVERTING = "converting"          # load_pair's progress says this while it converts GGUF weights (first load only)


@dataclass(frozen=True)
class LoadStatus:
    """A background load as the page shows it."""

    label: str                      # the pair, e.g. "qwen-coder"
    state: str                      # loading | ready | failed
    fraction: float = 0.0           # 0..1, load_pair's own estimate
    message: str = ""               # load_pair's latest progress message, or the failure
    elapsed_s: float = 0.0          # since the load began (until it ended)
    converted: bool = False         # the load converted weights into the cache (a first start)
    device_costs: DeviceCosts | None = None   # measured at the end of the load (engine/loading/machine_probe.py)
    machine: MachineFacts | None = None       # the pair and this machine, as the load found them

    @property
    def loading(self) -> bool:
        return self.state == LOADING


class BackgroundLoad:
    """One load in progress or finished: its progress, its outcome, and a condition to wait on."""

    def __init__(self, label: str):
        self.label = label
        self._condition = threading.Condition()
        self._state, self._fraction, self._message = LOADING, 0.0, "starting (importing torch and transformers)"
        self._converted = False
        self._device_costs: DeviceCosts | None = None
        self._machine: MachineFacts | None = None
        self._started = time.monotonic()
        self._ended: float | None = None

    def report(self, fraction: float, message: str) -> None:
        """load_pair's progress callback."""
        with self._condition:
            self._fraction, self._message = max(self._fraction, float(fraction)), message
            self._converted = self._converted or CONVERTING in message
            self._condition.notify_all()

    def finish(self, error: str = "", device_costs: DeviceCosts | None = None,
               machine: MachineFacts | None = None) -> None:
        """The load ended: ready (with the device's costs and the machine's facts, when measured), or failed with
        `error` (one sentence)."""
        with self._condition:
            self._device_costs, self._machine = device_costs, machine
            self._state = FAILED if error else READY
            self._fraction = self._fraction if error else 1.0
            self._message = error or "models ready"
            self._ended = time.monotonic()
            self._condition.notify_all()

    def status(self) -> LoadStatus:
        with self._condition:
            return self._status()

    def wait(self, progress: Callable[[float, str], None], prefix: str = "") -> LoadStatus:
        """Block until the load ends, passing each progress report on (`prefix` + message); its final status."""
        with self._condition:
            shown = None
            while True:
                status = self._status()
                if (status.fraction, status.message) != shown:
                    shown = (status.fraction, status.message)
                    progress(status.fraction, f"{prefix}{status.message}")
                if not status.loading:
                    return status
                self._condition.wait()

    def _status(self) -> LoadStatus:
        ended = self._ended if self._ended is not None else time.monotonic()
        return LoadStatus(self.label, self._state, self._fraction, self._message, ended - self._started,
                          self._converted, self._device_costs, self._machine)


def convert_weights(references: Iterable[str], report: Callable[[str], None]) -> list[str]:
    """Convert the embedded GGUF weights among `references` (model references, as presets name them)
    into the converted-weight cache, loading no model: files only, on the CPU. The references
    converted or found converted; any other kind of reference (a Hub id, the tiny pair) is skipped."""
    from engine.loading.gguf_cache import cache_root, converted_embedded   # imports torch: only when called
    from engine.loading.weights import EMBEDDED_PREFIX, embedded_spec
    root, done = cache_root(), []
    for reference in references:
        if reference.startswith(EMBEDDED_PREFIX):
            converted_embedded(embedded_spec(reference), root, report)
            done.append(reference)
    return done


def start_conversion(references: list[str]) -> BaseProcess:
    """`convert_weights` in a fresh process of its own (spawned, not forked), its progress and any failure
    in the log. A ZeroGPU server's own process must run no torch computation: spaces forks it for every
    GPU call, and a child forked after its parent's OpenMP threads started hangs at its first parallel
    region (a 512 x 512 matmul in a forked child did, here, after the parent had run one)."""
    process = multiprocessing.get_context("spawn").Process(target=_convert_logged, args=(references,),
                                                           name="specviz-convert", daemon=True)
    process.start()
    return process


def _convert_logged(references: list[str]) -> None:
    log = logging.getLogger("specviz.convert")
    try:
        convert_weights(references, log.info)
    except Exception as error:  # the first run's own load converts again and says why it fails
        log.warning("converting %s at start-up failed: %s", ", ".join(references), error)
