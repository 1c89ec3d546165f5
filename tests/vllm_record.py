"""Record a vLLM server's answers for the unit tests' replay server (tests/vllm_replay.py):
`python tests/vllm_record.py http://127.0.0.1:PORT tests/data/vllm/tiny_draft_k3.json [ngram]`.

Run against the tiny random pair's target served as tests/vllm_session.py serves it (float32, k=3,
detailed per-request metrics): with the draft model, or with `ngram` the n-gram method at
prompt_lookup_min 1, prompt_lookup_max 3 (repetitive prompts, so the lookup finds matches).
Each stream is saved as the list of its server-sent events.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from engine.vllm.transport import get_json, get_text, parse_address, post_json, stream_post

PROMPTS = {"greedy": ("abc", 0.0, 24), "sampled": ("Hello, world", 0.8, 24), "long": ("abcabcabc", 0.0, 40)}
NGRAM_PROMPTS = {"greedy": ("abcabcabcabc", 0.0, 32), "sampled": ("Hello, Hello, Hello, Hello", 0.8, 32),
                 "long": ("0101010101", 0.0, 48)}


def record(address_text: str, prompts: dict = PROMPTS) -> dict:
    address = parse_address(address_text)
    models = get_json(address, "/v1/models")
    model = models["data"][0]["id"]
    document = {"version": get_json(address, "/version"), "models": models, "streams": {}, "tokenize": {},
                "metrics_before": get_text(address, "/metrics")}
    for name, (prompt, temperature, tokens) in prompts.items():
        ids = post_json(address, "/tokenize", {"model": model, "prompt": prompt})["tokens"]
        document["tokenize"][prompt] = ids
        body = {"model": model, "prompt": ids, "max_tokens": tokens, "temperature": temperature, "top_p": 1.0,
                "seed": 1, "n": 1, "stream": True, "stream_options": {"include_usage": True}, "return_token_ids": True}
        document["streams"][name] = {"body": body, "events": [a.data for a in stream_post(address, "/v1/completions", body)]}
    document["metrics_after"] = get_text(address, "/metrics")
    vocabulary = len(json.loads(Path(models["data"][0]["root"], "tokenizer.json").read_text())["model"]["vocab"])
    document["detokenize"] = [post_json(address, "/detokenize", {"model": model, "tokens": [i]})["prompt"]
                              for i in range(vocabulary)]
    return document


if __name__ == "__main__":
    chosen = NGRAM_PROMPTS if sys.argv[3:] == ["ngram"] else PROMPTS
    Path(sys.argv[2]).write_text(json.dumps(record(sys.argv[1], chosen), indent=1, ensure_ascii=False))
