"""A stand-in vLLM server that replays answers recorded from a real one (tests/vllm_record.py), over
real HTTP, to isolate engine/vllm/ from vLLM in the unit tests; each fault is one switch.

Real-server tests (tests/test_vllm_server.py) check the same code against vLLM itself.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

RECORDINGS = Path(__file__).parent / "data" / "vllm"


def load_recording(name: str = "tiny_draft_k3") -> dict[str, Any]:
    """tiny_draft_k3: the draft-model server; tiny_ngram_k3: the n-gram server (lookup 1..3)."""
    return json.loads((RECORDINGS / f"{name}.json").read_text(encoding="utf-8"))


@dataclass
class Faults:
    cut_after: int | None = None        # close the stream after this many events, without [DONE]
    delay_s: float = 0.0                # wait this long before each event
    speculative: bool = True            # False: no metrics.speculative_decoding (a server without speculation)
    detailed: bool = True               # False: no per_step arrays (--per-request-spec-decode-metrics summary)
    model: str | None = None            # serve under another name
    two_sequences: bool = False         # every event's choice says index 1 (what n = 2 streams look like)
    merge: bool = False                 # send all token chunks as one (a client that lagged behind)
    status: int = 200                   # answer /v1/completions with this HTTP status
    detokenize_status: int = 200        # answer /detokenize with this HTTP status (a server that gives no texts)
    main_branch: bool = False           # the statistics as vLLM's main branch sends them (`main_branch_form`)


@dataclass
class ReplayServer:
    recording: dict[str, Any] = field(default_factory=load_recording)
    faults: Faults = field(default_factory=Faults)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def models(self) -> dict[str, Any]:
        models = copy.deepcopy(self.recording["models"])
        if self.faults.model:
            models["data"][0]["id"] = models["data"][0]["root"] = self.faults.model
        return models

    def events(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        stream = next((s for s in self.recording["streams"].values() if s["body"]["prompt"] == body["prompt"]
                       and s["body"]["temperature"] == body["temperature"]), None)
        if stream is None:      # the probe's two tokens (or anything else): the greedy run, cut to its length
            stream = self.recording["streams"]["greedy"]
        events = copy.deepcopy(stream["events"])
        tokens, final = [e for e in events if e.get("choices")], [e for e in events if not e.get("choices")]
        if self.faults.merge:
            first = tokens[0]["choices"][0]
            for event in tokens[1:]:
                choice = event["choices"][0]
                first["token_ids"] += choice["token_ids"]
                first["text"] += choice["text"]
                first["finish_reason"] = choice["finish_reason"]
            tokens = tokens[:1]
        for event in final:
            metrics = event.get("metrics", {}).get("speculative_decoding")
            if not self.faults.speculative:
                event.get("metrics", {}).pop("speculative_decoding", None)
            elif metrics and not self.faults.detailed:
                metrics.pop("per_step_accepted", None)
                metrics.pop("per_step_drafted", None)
        if self.faults.main_branch:
            main_branch_form(tokens, final)
        if self.faults.two_sequences:
            for event in tokens:
                event["choices"][0]["index"] = 1
        return tokens + final


def main_branch_form(tokens: list[dict[str, Any]], final: list[dict[str, Any]]) -> None:
    """Rewrite a recorded 0.32 stream as vLLM's main branch sends it (`--per-request-spec-decode-stats`,
    docs/features/speculative_decoding/acceptance_metrics.md at vllm-project/vllm
    cd199986df1171c3255ce2e07e2c63be4385ef9f): the statistics leave the usage chunk's `metrics` and ride
    the terminal chunk's choice (the one with the finish reason) as `speculative_decoding_stats`, whose
    `acceptance_histogram` is a sparse map from the accepted count (as text) to its steps, zeros left out."""
    stats = None
    for event in final:
        stats = (event.get("metrics") or {}).pop("speculative_decoding", None) or stats
        if not event.get("metrics"):
            event.pop("metrics", None)
    if stats is None:
        return
    stats["acceptance_histogram"] = {str(j): n for j, n in enumerate(stats.get("acceptance_histogram") or ()) if n}
    for event in tokens:
        for choice in event["choices"]:
            choice["speculative_decoding_stats"] = stats if choice.get("finish_reason") else None


def _handler(replay: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, value: Any, status: int = 200) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/version":
                self._json(replay.recording["version"])
            elif self.path == "/v1/models":
                self._json(replay.models())
            else:
                self._json({"error": {"message": "Not Found"}}, 404)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            replay.requests.append({"path": self.path, **body})
            if self.path == "/tokenize":
                if "messages" in body:
                    self._json({"error": {"message": "no chat template"}}, 400)
                else:
                    self._json({"tokens": replay.recording["tokenize"][body["prompt"]]})
            elif self.path == "/detokenize" and replay.faults.detokenize_status != 200:
                self._json({"error": {"message": "Service Unavailable"}}, replay.faults.detokenize_status)
            elif self.path == "/detokenize":
                self._json({"prompt": "".join(replay.recording["detokenize"][t] for t in body["tokens"])})
            elif self.path == "/v1/completions":
                self._stream(body)
            else:
                self._json({"error": {"message": "Not Found"}}, 404)

        def _stream(self, body: dict[str, Any]) -> None:
            if replay.faults.status != 200:
                self._json({"error": {"message": "The model `x` does not exist."}}, replay.faults.status)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for number, event in enumerate(replay.events(body)):
                    if replay.faults.cut_after is not None and number >= replay.faults.cut_after:
                        return
                    time.sleep(replay.faults.delay_s)
                    self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
            except (BrokenPipeError, ConnectionResetError):
                pass        # the client gave up (a timeout test): nothing to send it

    return Handler
