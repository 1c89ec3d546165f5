"""What a vLLM server is: its model, version, speculation and whether it reports each step.

`probe` asks /version and /v1/models, then streams one two-token completion to read the
speculative-decoding metrics vLLM attaches to its final chunk. vLLM 0.32 does not publish its
speculative method over HTTP, so the method is the caller's (the page's or the server helper's).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER
from engine.vllm.transport import DEFAULT_TIMEOUT_S, ServerAddress, Session, VllmError, parse_address, stream_post

METHODS = ("draft_model", "ngram")


@dataclass(frozen=True)
class ServerInfo:
    address: ServerAddress
    model: str                      # the served model name (what a request's `model` names)
    root: str                       # what the server loaded: a folder or a hub id
    max_model_len: int | None
    version: str                    # "0.32.0"
    method: str                     # METHODS: given by the caller (vLLM does not publish it)
    k: int | None                   # num_spec_tokens the server reported; None: no speculation
    detailed_metrics: bool          # per_step_accepted / per_step_drafted come with each request
    dtype: str = ""                 # "" when not known (vLLM does not publish it)

    @property
    def engine(self) -> str:
        return f"vllm {self.version}"

    @property
    def drafter(self) -> str:
        return NGRAM_DRAFTER if self.method == "ngram" else MODEL_DRAFTER

    @property
    def speculative(self) -> bool:
        return self.k is not None

    def check_usable(self, expected_model: str = "") -> None:
        """Raise VllmError (one sentence) unless SpecViz can draw this server's runs step by step."""
        if expected_model and expected_model not in (self.model, self.root):
            raise VllmError(f"The vLLM server at {self.address} serves {self.model!r} ({self.root}), not "
                            f"{expected_model!r}.")
        if not self.speculative:
            raise VllmError(f"The vLLM server at {self.address} runs without speculative decoding: start it with "
                            "--speculative-config (scripts/vllm.sh does).")
        if not self.detailed_metrics:
            raise VllmError(f"The vLLM server at {self.address} does not report each step: start it with "
                            "--per-request-spec-decode-metrics detailed (scripts/vllm.sh does).")


def probe(address: str | ServerAddress, method: str = "draft_model", dtype: str = "",
          timeout_s: float = DEFAULT_TIMEOUT_S) -> ServerInfo:
    """Ask the server what it serves and how it speculates (raises VllmError when it cannot be asked)."""
    if method not in METHODS:
        raise VllmError(f"The speculative method must be one of {', '.join(METHODS)}, got {method!r}.")
    where = parse_address(address)
    with Session(where, timeout_s) as session:
        version, models = session.get_json("/version"), session.get_json("/v1/models")
    try:
        card = models["data"][0]
        name, root = str(card["id"]), str(card.get("root") or card["id"])
        max_len = card.get("max_model_len")
        release = str(version["version"])
    except (KeyError, IndexError, TypeError):
        raise VllmError(f"The server at {where} does not describe its model as vLLM does: it is not a vLLM "
                        "server.") from None
    metrics = None
    body = {"model": name, "prompt": [0, 1], "max_tokens": 3, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    for arrival in stream_post(where, "/v1/completions", body, timeout_s, timeout_s):
        metrics = (arrival.data.get("metrics") or {}).get("speculative_decoding") or metrics
    k = metrics.get("num_spec_tokens") if isinstance(metrics, dict) else None
    return ServerInfo(where, name, root, max_len if isinstance(max_len, int) else None, release, method,
                      k if isinstance(k, int) and k > 0 else None,
                      isinstance(metrics, dict) and "per_step_accepted" in metrics, dtype)
