"""SpeculativeEngine: the public entry point (docs/architecture.md §2).

    eng = SpeculativeEngine(load_pair(preset="qwen-coder"))
    trace = eng.generate("prompt", SpecConfig(k=4))
    for step in eng.stream("prompt", cfg): ...
    gen = eng.start("prompt", cfg); gen.step(); gen.trace()   # caller-driven, for the UI
"""

from __future__ import annotations

from typing import Iterator

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER, SpecConfig
from engine.decode.baseline import BaselineResult, first_difference, target_only
from engine.decode.generation import Generation
from engine.decode.pair import ModelPair
from engine.metrics import BaselineStats
from engine.records import StepRecord
from engine.formats.trace import Trace


class SpeculativeEngine:
    """Runs speculative decoding on a loaded pair. Holds no per-run state, so one
    engine (and its models, read-only) can serve many runs one after another."""

    def __init__(self, pair: ModelPair, detailed_trace: bool = True):
        self.pair = pair
        self.detailed_trace = detailed_trace

    def start(self, prompt: str, config: SpecConfig) -> Generation:
        """Validate the prompt against the config and return a generation ready to step."""
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the prompt is empty: type some text to continue")
        if config.drafter == MODEL_DRAFTER and self.pair.draft is None:
            raise ValueError(f"this pair has no draft model ({self.pair.target_name} only): choose the n-gram drafter")
        prompt_ids = self.pair.encode_prompt(prompt, raw=config.raw)
        self.pair.check_fits(prompt_ids, config.max_new_tokens, with_draft=config.drafter == MODEL_DRAFTER)
        return Generation(self.pair, prompt, prompt_ids, self._described(config), self.detailed_trace)

    def stream(self, prompt: str, config: SpecConfig) -> Iterator[StepRecord]:
        """Yield each step's record as soon as it is recorded."""
        generation = self.start(prompt, config)
        while not generation.is_done:
            yield generation.step()

    def generate(self, prompt: str, config: SpecConfig) -> Trace:
        generation = self.start(prompt, config)
        while not generation.is_done:
            generation.step()
        return generation.trace()

    def target_only(self, trace: Trace) -> BaselineResult:
        return target_only(self.pair, list(trace.prompt.token_ids), trace.config)

    def target_only_ids(self, prompt_ids: list[int], config: SpecConfig) -> tuple[int, ...]:
        """Target-only decoding of already tokenized input; the generated ids."""
        return target_only(self.pair, prompt_ids, config).token_ids

    def with_baseline(self, trace: Trace) -> Trace:
        """Run target-only decoding of the same prompt and config; attach speed and identity, and for a
        greedy run that differs, where it first does and the target's top-2 margin there."""
        result = self.target_only(trace)
        identical = result.token_ids == trace.output.token_ids
        return trace.with_baseline(BaselineStats(
            tokens_per_s=result.tokens_per_s,
            identical=identical,
            wall_s=result.wall_s,
            exact_expected=trace.config.exactness.token_for_token,
            first_difference=None if identical or not trace.config.is_greedy else first_difference(
                self.pair, trace, result.token_ids),
        ))

    def _described(self, config: SpecConfig) -> SpecConfig:
        """The config with the models, device and dtypes that really run."""
        pair = self.pair
        return config.replace(
            draft=pair.draft_name if config.drafter == MODEL_DRAFTER else NGRAM_DRAFTER,
            target=pair.target_name, device=str(pair.device),
            draft_dtype=pair.draft_dtype if config.drafter == MODEL_DRAFTER else "",
            target_dtype=pair.target_dtype,
            draft_kernel=pair.draft_kernel if config.drafter == MODEL_DRAFTER else "",
            target_kernel=pair.target_kernel)

