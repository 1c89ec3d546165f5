"""The GPU's fast path: model forwards captured as CUDA graphs on a static cache (graphs.py) and the
attention backend pinned to one that does not rebuild a plan per sequence length (attention.py), each
on the runner's own GPU (device.py)."""
