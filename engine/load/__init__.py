"""Load: speculation under concurrent requests (issue #39). For a vLLM server with speculation and
the same weights served without, N streamed completions at once for each N of a grid; per level the
wall time, aggregate and per-request tokens/s, latency and first-token percentiles, and on the
speculative server each request's trace and acceptance from its own per-step counts, with the
server's /metrics counters around the level (docs/architecture.md §11). Torch-free: httpx only."""
