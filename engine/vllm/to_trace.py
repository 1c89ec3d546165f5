"""A vLLM stream as SpecViz's trace: one StepRecord per engine step (docs/architecture.md §12).

Step 0 is the prefill's token (k = 0, a bonus); step i takes per_step_accepted[i-1] + 1 tokens:
the accepted drafts, then the target's own token (bonus when every draft was accepted, else
recovered). Drafted-but-rejected tokens are not returned by vLLM: they stay unknown
(`origin="unknown"`, id None) unless n-gram reconstruction fills them (`origin="reconstructed"`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from engine.config import SpecConfig
from engine.formats.trace import TextTokens, Trace
from engine.records import StepRecord
from engine.vllm.server_info import ServerInfo
from engine.vllm.stream import SpecMetrics, StreamChunk

Decode = Callable[[Sequence[int]], Sequence[str]]     # token ids -> each token's text


@dataclass(frozen=True)
class StepTokens:
    """One engine step's slice of the output: its token ids, drafted count and arrival time."""

    token_ids: tuple[int, ...]
    drafted: int
    accepted: int
    time_s: float


def split_steps(chunks: Sequence[StreamChunk], metrics: SpecMetrics | None, k: int) -> list[StepTokens]: ...


def build_trace(info: ServerInfo, config: SpecConfig, prompt: TextTokens, chunks: Sequence[StreamChunk],
                metrics: SpecMetrics | None, started_s: float, decode: Decode, complete: bool,
                ngram_lookup: tuple[int, int] | None = None) -> Trace: ...


def step_record(index: int, context: Sequence[int], tokens: StepTokens, previous_kv: int, gap_ms: float,
                decode: Decode, reconstructed: Sequence[int] = ()) -> StepRecord: ...
