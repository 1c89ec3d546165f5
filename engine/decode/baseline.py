"""Target-only decoding: the oracle for identical output and the yardstick for speedup."""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from engine.config import SpecConfig
from engine.decode.kv import KVCache
from engine.decode.pair import ModelPair
from engine.decode.sampling import SamplingParams, choose, to_probs


@dataclass(frozen=True)
class BaselineResult:
    token_ids: tuple[int, ...]        # generated tokens only, EOS included when reached
    wall_s: float

    @property
    def tokens_per_s(self) -> float:
        return len(self.token_ids) / self.wall_s if self.wall_s > 0 else 0.0


def target_only(pair: ModelPair, prompt_ids: list[int], config: SpecConfig) -> BaselineResult:
    """Decode with the target alone, one token per forward, reusing its KV cache."""
    params = SamplingParams(config.temperature, config.top_k, config.top_p)
    generator = torch.Generator(device=pair.device).manual_seed(config.seed)
    cache = KVCache(pair.target, pair.vocab_size)
    started = time.perf_counter()
    generated: list[int] = []
    feed = list(prompt_ids)
    with torch.inference_mode():
        while len(generated) < config.max_new_tokens:
            logits = cache.forward(feed, num_logits=1).logits[0]                     # (V,)
            token = choose(logits, to_probs(logits, params), params, generator)
            generated.append(token)
            if token in pair.eos_token_ids:
                break
            feed = [token]
    return BaselineResult(tuple(generated), time.perf_counter() - started)
