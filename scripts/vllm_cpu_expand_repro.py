"""The smallest reproduction of vLLM 0.32's broken speculative sampling on a CPU (docs/benchmark.md,
"vLLM beside SpecViz"); no server, no model: run it with the vLLM environment's python,

    .venv-vllm/bin/python scripts/vllm_cpu_expand_repro.py

The rejection sampler spreads each request's temperature (and top-p, top-k) over its draft
positions with `expand_batch_to_tokens` into `x.new_empty(num_tokens)`; on a CPU the kernel override
(vllm/utils/cpu_triton_utils.py `_expand_kernel_impl`) writes into `_ensure_int64(output)`, an int64
copy of a float32 tensor, and never copies back, so the sampler divides the target's logits by
uninitialised memory. Every line below should read [0.7, 0.7, 0.7] (then [40, 40, 40] for top-k).

vLLM's general plugins load first, as in a server: with SpecViz's fix installed and on
(`SPECVIZ_VLLM_CPU_SAMPLER_FIX=1`, plugins/vllm_cpu_sampler_fix; `scripts/vllm.sh start --fix-cpu-sampler`
installs it) the lines read as they should.
"""
import torch
from vllm.plugins import load_general_plugins
load_general_plugins()
from vllm.platforms import current_platform
current_platform.import_kernels()
current_platform.register_triton_kernel_overrides()
from vllm.v1.sample.rejection_sampler import expand_batch_to_tokens
torch.manual_seed(0)
temperature, cu_num_draft_tokens = torch.tensor([0.7]), torch.tensor([3], dtype=torch.int32)
for attempt in range(3):
    garbage = torch.full((3,), 12345.0)       # memory the result may land in
    del garbage
    print(expand_batch_to_tokens(temperature, cu_num_draft_tokens, 3, replace_from=-1, replace_to=1).tolist())
print(expand_batch_to_tokens(torch.tensor([40], dtype=torch.int32), cu_num_draft_tokens, 3).tolist(), "(top_k 40)")
