"""Each device's fast path, side by side (docs/architecture.md §7): cpu/ (oneDNN-prepacked and int8
linear layers, their probes and stores), the static KV cache with a write pointer, and cuda/ (graph
capture and replay, the attention backend pin). kernel_names.py, the table of what runs, is torch-free."""
