"""A temperature sweep on a vLLM server: one streamed run per (temperature, prompt, seed) at the
server's own k (a request cannot change it), as specviz.sweep/1 runs (docs/architecture.md §10).

What a server does not report stays unmeasured: no target-only baseline (a speculative server
cannot decode without its drafts), so `baseline_tokens_per_s` is 0 and `identical` False; no draft
or verify times, so no cost ratio. Acceptance, tokens per step and tokens per second are the
server's, from each run's trace.
"""

from __future__ import annotations

from typing import Iterator, Sequence

from engine.config import SpecConfig
from engine.formats.sweep_format import RunResult
from engine.vllm.ngram import DEFAULT_LOOKUP
from engine.vllm.server_info import ServerInfo
from engine.vllm.source import VllmGeneration


def server_runs(info: ServerInfo, prompts: Sequence[str], temperatures: Sequence[float], seeds: Sequence[int],
                base: SpecConfig, ngram_lookup: tuple[int, int] = DEFAULT_LOOKUP) -> Iterator[RunResult]:
    """Run every (temperature, prompt, seed) on the server, one at a time; yield each run's result."""
    info.check_usable()
    for temperature in temperatures:
        for prompt_index, prompt in enumerate(prompts):
            for seed in seeds:
                generation = VllmGeneration(info, prompt, base.replace(temperature=temperature, seed=seed),
                                            ngram_lookup=ngram_lookup)
                while not generation.is_done:
                    generation.step()
                summary = generation.trace().summary
                yield RunResult(
                    k=generation.config.k, temperature=temperature, prompt_index=prompt_index, seed=seed,
                    acceptance_rate=summary.acceptance_rate, mean_accepted_length=summary.mean_accepted_length,
                    per_position_acceptance=summary.per_position_acceptance,
                    tokens_per_s=summary.tokens_per_s or 0.0, baseline_tokens_per_s=0.0,
                    target_forwards_per_token=summary.target_forwards / max(summary.new_tokens, 1),
                    wall_s=summary.wall_s, estimated_alpha=None, cost_ratio=None, identical=False)
