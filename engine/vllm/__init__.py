"""vLLM as an engine source (docs/architecture.md §10): a running vLLM OpenAI server's stream
turned into SpecViz's own trace, step by step.

One folder, torch-free (httpx and the standard library): transport.py (addresses, JSON GET,
streamed POST, VllmError), server_info.py (probe a server), stream.py (a streamed completion's
chunks and its final speculative-decoding metrics), split.py (the stream's tokens in engine steps, by the server's
arrays), to_trace.py (steps as SpecViz's records), ngram.py
(vLLM's prompt-lookup rule, to reconstruct n-gram drafts), source.py (a Generation of
specviz/serving/runner.py's protocol), counters.py (/metrics speculative counters), server.py
(start and stop a real server). A preset's weights as folders a server loads: engine/loading/model_folders.py.
"""
