"""Everything that turns a model name into weights: presets' sources, hub, embedded GGUF weights
and their converted cache, CPU kernels, tiny random models built in code. Imports torch."""
