"""Measure what one forward costs on the loaded pair's device (engine/device_costs.py).

On the kernels the runs use (the same cache kind, so on CUDA the same captured graphs), each
phase timed as a run does it, after a short synthetic context and rolled back each time:

- a target token as target-only decoding makes it: a one-token forward, its probabilities and
  the argmax, back to back;
- a step of k drafts then a verify, for each k: k chained one-token draft forwards (each with
  its probabilities and argmax, the chosen token fed next), then one target forward over k + 1
  tokens and their probabilities. The draft and the target take turns as in a step, so each
  phase starts with the other model's weights in the caches: on a 2-core CPU a verify timed back
  to back ran 0.4 ms (about 18 %) faster than the same verify inside a run
  (scripts/gpu_check.py's acceptance levels measure the difference).

Timed with the step clock (device events on CUDA, no sync between repeats). A few hundred
milliseconds on a GPU; it runs when a pair loads there (engine/loading/speed_up.py), and with fewer repeats
when the default pair loads on a CPU (engine/loading/machine_probe.py). Each phase is the mean of its repeats,
or with `fastest` the fastest repeat: a CPU shared with other programs (the page's own browser rendering as the
app loads) slows some repeats and never speeds one up, so the fastest is what this machine does when it is left
to the run (the mean of three read c = 0.20-0.23 and v = 1.19-1.40 beside a browser opening the page, against
0.15 and 1.07 without one).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from engine.config import resolve_cache
from engine.decode.kv import KVCache
from engine.decode.pair import ModelPair
from engine.decode.sampling import SamplingParams, choose, to_probs
from engine.runtime.step_clock import StepClock
from engine.device_costs import DeviceCosts

CONTEXT_TOKENS = 64          # the probe's context: a short prompt's worth
WARMUPS, REPEATS = 2, 6
PROBED_KS = tuple(range(1, 9))
GREEDY = SamplingParams()    # the phases' own work on the logits, as a greedy run does it


def measure_costs(pair: ModelPair, cache: str = "auto", ks: tuple[int, ...] = PROBED_KS, warmups: int = WARMUPS,
                  repeats: int = REPEATS, fastest: bool = False) -> DeviceCosts:
    """Time the pair's phases on its device, each the mean of `repeats` after `warmups` (with `fastest`, the
    fastest of them); `cache` as SpecConfig.cache."""
    keep = min if fastest else _mean
    kind = resolve_cache(cache, pair.device.type)
    context = [token % pair.vocab_size for token in range(100, 100 + CONTEXT_TOKENS)]
    clock = StepClock(pair.device)
    with torch.inference_mode():
        target = _cache(pair, "target", kind, max(ks) + 1)
        target.forward(context, num_logits=1)
        draft = None
        if pair.draft is not None:
            draft = _cache(pair, "draft", kind, max(ks) + 1)
            draft.forward(context, num_logits=1)
        steps = {k: _time_step(target, draft, clock, k, warmups, repeats, keep) for k in ks}
        # the target token last, on warm kernels: timed first, right after a CPU load, one warm-up left it at 225 ms
        # against 128-152 ms in other loads, and a verify of 6 tokens came out cheaper than one token (v = 0.90)
        target_ms = _time_target_tokens(target, clock, warmups, repeats, keep)
        target.release()
        if draft is not None:
            draft.release()
    draft_ms = None if draft is None else sum(drafting for drafting, _ in steps.values()) / sum(ks)
    pools = pair.static_pools.values() if kind == "static" else ()
    return DeviceCosts(device=device_name(pair.device), cache=kind,
                       graphs=any(pool.settings.backend == "cuda" for pool in pools),
                       target_token_ms=target_ms, draft_token_ms=draft_ms,
                       verify_ms=tuple((k, verifying) for k, (_, verifying) in steps.items()),
                       capture_s=sum(pool.capture_s for pool in pools))


def device_name(device: torch.device) -> str:
    """The GPU's name (e.g. "NVIDIA H200"), else the device type."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else device.type


def _cache(pair: ModelPair, role: str, kind: str, overhang: int) -> KVCache:
    model = pair.target if role == "target" else pair.draft
    pool = pair.runner_pool(role) if kind == "static" else None
    return KVCache(model, pair.vocab_size, pool, CONTEXT_TOKENS + overhang)


def _next_token(kv: KVCache, token: torch.Tensor) -> torch.Tensor:
    """One decoding token as a run makes it: the forward, its probabilities, the argmax (on the device)."""
    logits = kv.forward(token, num_logits=1).logits[0]                              # (V,)
    return choose(logits, to_probs(logits, GREEDY), GREEDY, None)                  # (1,)


def _mean(times: list[float]) -> float:
    return sum(times) / len(times)


def _time_target_tokens(target: KVCache, clock: StepClock, warmups: int, repeats: int,
                        keep: Callable[[list[float]], float] = _mean) -> float:
    """Milliseconds of one target-only decoding token, back to back, each rolled back: `keep` of the repeats
    (the mean is read from one interval over all of them, with no mark between)."""
    token = torch.ones(1, dtype=torch.long, device=target.device)                  # on the device: no copy between repeats
    for _ in range(warmups):
        _next_token(target, token)
        target.cutoff(1)
    if keep is _mean:
        start = clock.mark()
        for _ in range(repeats):
            _next_token(target, token)
            target.cutoff(1)
        return clock.between(start, clock.mark()) / repeats
    times = []
    for _ in range(repeats):
        start = clock.mark()
        _next_token(target, token)
        target.cutoff(1)
        times.append(clock.between(start, clock.mark()))
    return keep(times)


def _time_step(target: KVCache, draft: KVCache | None, clock: StepClock, k: int, warmups: int,
               repeats: int, keep: Callable[[list[float]], float] = _mean) -> tuple[float, float]:
    """(milliseconds of k chained draft tokens, of a verify of k + 1 tokens), the two taking turns as
    in a step, each `keep` of `repeats` after `warmups`; without a draft model, verifies alone."""
    rows = torch.arange(1, k + 2, device=target.device)                            # (k + 1,)
    drafting, verifying = [], []
    for repeat in range(warmups + repeats):
        start = clock.mark()
        if draft is not None:
            token = rows[:1]
            for _ in range(k):
                token = _next_token(draft, token)
            draft.cutoff(k)
        drafted = clock.mark()
        to_probs(target.forward(rows, num_logits=k + 1).logits, GREEDY)            # (k + 1, V)
        target.cutoff(k + 1)
        verified = clock.mark()
        if repeat >= warmups:
            drafting.append(clock.between(start, drafted))
            verifying.append(clock.between(drafted, verified))
    return keep(drafting), keep(verifying)
