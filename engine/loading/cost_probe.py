"""Measure what one forward costs on the loaded pair's device (engine/device_costs.py).

On the kernels the runs use (the same cache kind, so on CUDA the same captured graphs): a
one-token target forward, a one-token draft forward and a verify of k + 1 tokens for each k,
each repeated after a short synthetic context and rolled back, timed with the step clock
(device events on CUDA, no sync between repeats). A few hundred milliseconds on a GPU.
"""

from __future__ import annotations

import torch

from engine.config import resolve_cache
from engine.decode.kv import KVCache
from engine.decode.pair import ModelPair
from engine.runtime.step_clock import StepClock
from engine.device_costs import DeviceCosts

CONTEXT_TOKENS = 64          # the probe's context: a short prompt's worth
WARMUPS, REPEATS = 2, 6
PROBED_KS = tuple(range(1, 9))


def measure_costs(pair: ModelPair, cache: str = "auto", ks: tuple[int, ...] = PROBED_KS) -> DeviceCosts:
    """Time the pair's forwards on its device; `cache` as SpecConfig.cache."""
    kind = resolve_cache(cache, pair.device.type)
    context = [token % pair.vocab_size for token in range(100, 100 + CONTEXT_TOKENS)]
    clock = StepClock(pair.device)
    with torch.inference_mode():
        target = _cache(pair, "target", kind, max(ks) + 1)
        target.forward(context, num_logits=1)
        target_ms = _time(target, clock, 1)
        verify = tuple((k, _time(target, clock, k + 1)) for k in ks)
        target.release()
        draft_ms = None
        if pair.draft is not None:
            draft = _cache(pair, "draft", kind, 1)
            draft.forward(context, num_logits=1)
            draft_ms = _time(draft, clock, 1)
            draft.release()
    pools = pair.static_pools.values() if kind == "static" else ()
    return DeviceCosts(device=device_name(pair.device), cache=kind,
                       graphs=any(pool.settings.backend == "cuda" for pool in pools),
                       target_token_ms=target_ms, draft_token_ms=draft_ms, verify_ms=verify,
                       capture_s=sum(pool.capture_s for pool in pools))


def device_name(device: torch.device) -> str:
    """The GPU's name (e.g. "NVIDIA H200"), else the device type."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _cache(pair: ModelPair, role: str, kind: str, overhang: int) -> KVCache:
    model = pair.target if role == "target" else pair.draft
    pool = pair.runner_pool(role) if kind == "static" else None
    return KVCache(model, pair.vocab_size, pool, CONTEXT_TOKENS + overhang)


def _time(kv: KVCache, clock: StepClock, rows: int) -> float:
    """Milliseconds of one forward of `rows` tokens after the context, rolled back each time."""
    tokens = torch.arange(1, rows + 1, device=kv.device)          # on the device: no copy between repeats
    for _ in range(WARMUPS):
        kv.forward(tokens, num_logits=rows)
        kv.cutoff(rows)
    start = clock.mark()
    for _ in range(REPEATS):
        kv.forward(tokens, num_logits=rows)
        kv.cutoff(rows)
    return clock.between(start, clock.mark()) / REPEATS
