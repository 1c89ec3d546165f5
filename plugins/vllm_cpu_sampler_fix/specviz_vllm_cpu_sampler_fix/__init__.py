"""SpecViz's fix of vLLM 0.32's CPU rejection sampler, loaded by vLLM as a general plugin.

The bug (vLLM issue #55005; docs/benchmark.md, "vLLM beside SpecViz"; scripts/vllm_cpu_expand_repro.py):
on a CPU without Triton, vLLM replaces the rejection sampler's `expand_kernel` with
`vllm/utils/cpu_triton_utils.py` `_expand_kernel_impl`, which hands the int64-only C++ kernel
`_ensure_int64(output)`, a new int64 copy of the float32 (temperature, top-p) or int32 (top-k) buffer,
and never copies it back: the sampler then divides the target's logits by uninitialised memory, and
the floats were truncated to integers on the way in. `expand` below does what the Triton kernel does,
in the caller's dtype (as upstream PR #55006 proposes): each request's value, with `replace_from`
rewritten to `replace_to`, repeated over its draft positions.

A second fault killed the engine on the first request with `top_k` (EngineDeadError, then HTTP 500 for
every request): on a CPU the rejection sampler reaches `apply_top_k_only` (vllm/v1/sample/ops/
topk_topp_sampler.py) with no rows at all, a verify step that drafted nothing, and its `k.max()` of an
empty tensor raises. `apply_top_k_only` below keeps vLLM's own for every other input and returns the
logits as they are for no rows (there is nothing to mask). It is not part of PR #55006.

`register` runs in every vLLM process (vLLM's `vllm.general_plugins` entry point) and does nothing
unless SPECVIZ_VLLM_CPU_SAMPLER_FIX=1 and the platform is the CPU: installing the plugin changes no
server that was not started with the fix. Where it acts it points vLLM's CPU override at `expand`
(vLLM registers its CPU overrides after the general plugins load), logs one line, and sets the
/metrics gauge `specviz_vllm_cpu_sampler_fix` to 1 so a client (SpecViz's probe) can name the fix.
"""

from __future__ import annotations

import logging
import os
from typing import Any

ENV = "SPECVIZ_VLLM_CPU_SAMPLER_FIX"
GAUGE = "specviz_vllm_cpu_sampler_fix"
KERNEL = "vllm.v1.sample.rejection_sampler.expand_kernel"
LOG = logging.getLogger("vllm.specviz_cpu_sampler_fix")


def expand(output: Any, input_val: Any, cu_num_tokens: Any, replace_from: Any, replace_to: Any,
           MAX_NUM_TOKENS: Any = None) -> None:   # noqa: N803 (the Triton kernel's parameter name)
    """output[start_i:end_i] = input_val[i] (replace_from rewritten to replace_to), in output's dtype,
    where end_i = cu_num_tokens[i] and start_i the previous end (0 for the first request)."""
    import torch
    ends = cu_num_tokens.to(torch.int64)
    counts = torch.diff(ends, prepend=ends.new_zeros(1))
    values = torch.where(input_val == replace_from, torch.full_like(input_val, replace_to), input_val)
    expanded = torch.repeat_interleave(values, counts)
    output[:expanded.numel()].copy_(expanded.to(output.dtype))


def guard_top_k(module: Any) -> None:
    """Point `module.apply_top_k_only` (vLLM's topk_topp_sampler) at a version that passes no rows through."""
    original = module.apply_top_k_only
    if getattr(original, "specviz_guard", False):
        return

    def apply_top_k_only(logits: Any, k: Any) -> Any:
        return logits if k.numel() == 0 else original(logits, k)

    apply_top_k_only.specviz_guard = True
    module.apply_top_k_only = apply_top_k_only


def register() -> None:
    """vLLM's general-plugin hook: apply the fix in this process when it is asked for and applies."""
    if os.environ.get(ENV) != "1":
        return
    from vllm.platforms import current_platform
    if not current_platform.is_cpu():
        LOG.info("SpecViz CPU sampler fix: not a CPU platform, nothing to fix")
        return
    from vllm.triton_utils import dispatcher
    from vllm.utils import cpu_triton_utils
    from vllm.v1.sample.ops import topk_topp_sampler
    cpu_triton_utils._expand_kernel_impl = expand
    guard_top_k(topk_topp_sampler)
    if KERNEL in dispatcher._registry:      # the platform's overrides are in already: replace vLLM's with ours
        dispatcher.register_kernels({KERNEL: expand})
    LOG.warning("SpecViz CPU sampler fix on (vLLM issue #55005): the CPU expand_kernel keeps each value's dtype, "
                "and top-k passes a verify step with no rows (pid %d)", os.getpid())
    _publish()


def _publish() -> None:
    """The /metrics gauge (vLLM serves prometheus_client's registry; a second load in one process keeps the first)."""
    from prometheus_client import Gauge
    try:
        gauge = Gauge(GAUGE, "1: SpecViz's fix of vLLM 0.32's CPU expand_kernel (vLLM issue #55005) runs in this server")
    except ValueError:
        return
    gauge.set(1)
