"""The runner protocol: how the UI drives a speculative decoding engine without importing it.

app.py implements `Runner` around the engine (torch lives there); tests implement it
with a fake. The UI only ever sees plain values: preset descriptions, `RunRequest`,
and Traces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

from engine.background_load import LoadStatus
from engine.config import MODEL_DRAFTER, SpecConfig
from engine.formats.race import RaceProgress
from engine.records import StepRecord
from engine.formats.trace import Trace

ProgressFn = Callable[[float, str], None]   # (fraction 0..1, message)
CUSTOM = "custom"                           # preset choice meaning "use the draft/target boxes"
VLLM_SERVER = "vllm-server"                 # preset choice meaning "stream from the vLLM server in the URL box"


class RunnerError(Exception):
    """A problem a user can fix (bad model id, unloadable file): the message is one clear sentence."""


@dataclass(frozen=True)
class PresetInfo:
    name: str
    description: str
    default_drafter: str = MODEL_DRAFTER    # one of engine.config.DRAFTERS


@dataclass(frozen=True)
class ModelChoice:
    """Which pair to load: a preset name, or custom draft/target (hub id, local dir or .gguf path), or a
    running vLLM server (`server`, its address; docs/architecture.md §10) whose models the run streams from."""

    preset: str = ""
    draft: str = ""
    target: str = ""
    draft_dtype: str = "auto"               # engine.config.DRAFT_DTYPES; auto: int8 on a CPU, bfloat16 on CUDA
    target_dtype: str = "auto"              # engine.config.TARGET_DTYPES; auto: bfloat16 on CUDA, else float32
    server: str = ""                        # a vLLM server's address (http://host:port); set: the rest is ignored,
                                            # but for `target`: the model it must serve ("" = any)
    server_method: str = "draft_model"      # its speculative method (engine/vllm/server_info.py METHODS): vLLM
                                            # does not publish it, so the page says which

    @property
    def key(self) -> tuple[str, ...]:
        """Identifies a loaded pair in a cache."""
        if self.server:
            return ("vllm", self.server, self.server_method, self.target)
        models = ("preset", self.preset) if self.preset else ("custom", self.draft, self.target)
        return (*models, self.draft_dtype, self.target_dtype)

    @property
    def label(self) -> str:
        if self.server:
            return f"vLLM server {self.server}"
        return self.preset or f"{self.draft} → {self.target}"


@dataclass(frozen=True)
class RunRequest:
    models: ModelChoice
    prompt: str
    config: SpecConfig
    with_baseline: bool = False


@dataclass(frozen=True)
class SweepRequest:
    """A k x temperature grid over prompts and seeds; `config` holds everything else (max new tokens, drafter)."""

    models: ModelChoice
    prompts: tuple[str, ...]
    ks: tuple[int, ...]
    temperatures: tuple[float, ...]
    seeds: tuple[int, ...]
    config: SpecConfig

    @property
    def num_runs(self) -> int:
        return len(self.prompts) * len(self.ks) * len(self.temperatures) * len(self.seeds)


@dataclass(frozen=True)
class SweepUpdate:
    """Progress after one finished run; `document` is the `specviz.sweep/1` JSON of every run so far."""

    done: int
    total: int
    elapsed_s: float
    eta_s: float | None
    document: dict[str, Any]


class Generation(Protocol):
    """A run in progress: step it until done; `trace()` is a valid Trace at any point."""

    @property
    def is_done(self) -> bool: ...

    def step(self) -> StepRecord: ...

    def trace(self) -> Trace: ...


class Runner(Protocol):
    """Loads model pairs (cached, shared read-only) and starts generations."""

    def presets(self) -> Sequence[PresetInfo]: ...

    @property
    def default_preset(self) -> str: ...

    def start(self, request: RunRequest, progress: ProgressFn) -> Generation:
        """Load the pair if needed (reporting progress) and begin; raises RunnerError or ValueError."""
        ...

    def with_baseline(self, request: RunRequest, trace: Trace) -> Trace:
        """Run target-only decoding of the same prompt and config; the trace with summary.baseline set."""
        ...

    def sweep(self, request: SweepRequest, progress: ProgressFn) -> Iterator[SweepUpdate]:
        """Load the pair on the first `next()`, then yield after every run; closing the iterator cancels."""
        ...

    def race(self, request: RunRequest, progress: ProgressFn,
             should_stop: Callable[[], bool]) -> Iterator[RaceProgress]:
        """Load the pair on the first `next()`, decode the prompt target-only, then speculatively, yielding
        progress; the last update holds the race (engine/formats/race.py). Nothing more once `should_stop()`."""
        ...

    def load_status(self) -> LoadStatus | None:
        """The background load of the default pair started with the server (None when there is none)."""
        ...
