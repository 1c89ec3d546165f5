"""Everything that turns a model name into a ready pair: presets' sources, the hub, embedded GGUF
weights and their converted cache, tiny random models built in code, then each device's fast path
(engine/runtime/) put on by speed_up.py. Imports torch."""
