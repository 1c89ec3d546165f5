"""Where and how the model computations run (docs/architecture.md §7): each device's fast path side by
side, cpu/ (oneDNN-prepacked and int8 linear layers, their probes and stores) and cuda/ (graph capture
and replay, the attention backend pin), the static KV cache with a write pointer and its runners, the
step clock (phases timed without a sync) and the one compute thread. kernel_names.py, the table of what
runs, is torch-free."""
