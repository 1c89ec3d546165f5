"""Target-only decoding: the oracle for identical output and the yardstick for speedup.

It runs on the same kernels as the speculative run it is compared with: the run's cache kind
(`SpecConfig.cache`), so on a GPU its one-token forwards replay the same captured graph the
draft's do on theirs, and "speedup" compares speculation with the fastest target-only decoding
this engine has. Each token is read back as it is chosen (its EOS check and its time need it).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch

from engine.config import SpecConfig, resolve_cache
from engine.metrics import FirstDifference
from engine.decode.kv import KVCache
from engine.decode.pair import ModelPair
from engine.decode.sampling import SamplingParams, choose, to_probs
from engine.formats.trace import Trace
from engine.lab import first_divergence


@dataclass(frozen=True)
class BaselineResult:
    token_ids: tuple[int, ...]        # generated tokens only, EOS included when reached
    wall_s: float
    token_times_s: tuple[float, ...] = ()   # when each token was chosen, seconds after decoding began (the race)
    stopped: bool = False             # `should_stop` ended it before max_new_tokens or EOS

    @property
    def prefill_s(self) -> float:
        """The first forward (prompt + first token): no part of a decode step."""
        return self.token_times_s[0] if self.token_times_s else 0.0

    @property
    def token_ms(self) -> float | None:
        """Mean time of one decoding forward (one token in, the prompt's prefill left out)."""
        steps = len(self.token_ids) - 1
        return (self.wall_s - self.prefill_s) * 1000 / steps if steps > 0 and self.wall_s > self.prefill_s else None

    @property
    def tokens_per_s(self) -> float:
        return len(self.token_ids) / self.wall_s if self.wall_s > 0 else 0.0


def target_only(pair: ModelPair, prompt_ids: list[int], config: SpecConfig,
                should_stop: Callable[[], bool] | None = None) -> BaselineResult:
    """Decode with the target alone, one token per forward, reusing its KV cache; `should_stop`
    (asked between tokens) ends it early, e.g. on the UI's Stop."""
    params = SamplingParams(config.temperature, config.top_k, config.top_p)
    generator = torch.Generator(device=pair.device).manual_seed(config.seed)
    static = resolve_cache(config.cache, pair.device.type) == "static"
    cache = KVCache(pair.target, pair.vocab_size, pair.runner_pool("target") if static else None,
                    len(prompt_ids) + config.max_new_tokens + 1)
    started = time.perf_counter()
    generated: list[int] = []
    times: list[float] = []
    feed = list(prompt_ids)
    stopped = False
    with torch.inference_mode():
        while len(generated) < config.max_new_tokens:
            if should_stop is not None and should_stop():
                stopped = True
                break
            logits = cache.forward(feed, num_logits=1).logits[0]                     # (V,)
            chosen = choose(logits, to_probs(logits, params), params, generator)    # (1,) on the device
            token = int(chosen)                                                     # read back: EOS? when?
            generated.append(token)
            times.append(time.perf_counter() - started)
            if token in pair.eos_token_ids:
                break
            feed = chosen
    cache.release()
    return BaselineResult(tuple(generated), time.perf_counter() - started, token_times_s=tuple(times),
                          stopped=stopped)


def first_difference(pair: ModelPair, trace: Trace, reference: tuple[int, ...]) -> FirstDifference:
    """Where `trace`'s output first leaves `reference` (target-only output of the same prompt), the
    step that emitted that token, and the target's top-2 logit margin there in target-only decoding
    (one plain forward over the prompt and the reference up to it)."""
    output = trace.output.token_ids
    token = next((i for i, (ours, theirs) in enumerate(zip(output, reference)) if ours != theirs),
                 min(len(output), len(reference)))
    step = first_divergence(trace, reference)
    if step is None:                    # the output is a prefix of the reference: its last step stopped short
        step = len(trace.steps) - 1
    return FirstDifference(token=token, step=step,
                           margin=top2_margin(pair, list(trace.prompt.token_ids) + list(reference[:token])))


def top2_margin(pair: ModelPair, context: list[int]) -> float:
    """The target's top-2 logit difference for the token after `context` (one plain forward)."""
    with torch.inference_mode():
        logits = pair.target(input_ids=torch.tensor([context], device=pair.device)).logits[0, -1, :pair.vocab_size]
    top = torch.topk(logits.float(), 2).values.tolist()
    return top[0] - top[1]
