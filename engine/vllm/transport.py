"""HTTP to a vLLM server: its address, JSON GETs and a streamed POST, every failure one sentence.

`VllmError` is the only exception this folder raises at a caller: its message is one sentence a
page can show as is (docs/architecture.md §10, faults).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import urlsplit

import httpx

DEFAULT_TIMEOUT_S = 10.0
_HOST = re.compile(r"[A-Za-z0-9._-]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*")     # a name, an IPv4 or an IPv6 address
DEFAULT_READ_TIMEOUT_S = 60.0


class VllmError(Exception):
    """A vLLM server could not be used; the message is one sentence for the page."""


@dataclass(frozen=True)
class ServerAddress:
    host: str
    port: int
    scheme: str = "http"

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"

    def __str__(self) -> str:
        return self.base_url


@dataclass(frozen=True)
class Arrival:
    """One server-sent event's JSON and when it arrived (time.perf_counter())."""

    time_s: float
    data: dict[str, Any]


def parse_address(text: str | ServerAddress) -> ServerAddress:
    """`host:port` or `http(s)://host:port`, optionally ending in `/` or `/v1`."""
    if isinstance(text, ServerAddress):
        return text
    raw = (text or "").strip()
    hint = "write it as http://host:port, for example http://127.0.0.1:8000"
    if not raw:
        raise VllmError(f"No vLLM server address was given: {hint}.")
    parts = urlsplit(raw if "://" in raw else f"http://{raw}")
    try:
        port = parts.port
    except ValueError:
        port = None
    if (parts.scheme not in ("http", "https") or not _HOST.fullmatch(parts.hostname or "") or port is None
            or parts.path.rstrip("/") not in ("", "/v1") or parts.query or parts.fragment or parts.username):
        raise VllmError(f"{raw!r} is not a vLLM server address: {hint}.")
    return ServerAddress(parts.hostname, port, parts.scheme)


def _message(response: httpx.Response) -> str:
    """The server's own complaint, from vLLM's JSON error body when there is one."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:300] or response.reason_phrase
    error = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(error, dict):
        return str(error.get("message") or error.get("detail") or error)[:300]
    return str(error)[:300]


def _refused(address: ServerAddress, path: str, error: Exception) -> VllmError:
    if isinstance(error, httpx.TimeoutException):
        return VllmError(f"The vLLM server at {address} did not answer {path} in time: it is busy, slow or not a "
                         "vLLM server.")
    return VllmError(f"No vLLM server answers at {address} ({type(error).__name__}): check the address and that "
                     "the server is running.")


def _checked(address: ServerAddress, path: str, response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        raise VllmError(f"The vLLM server at {address} refused {path} (HTTP {response.status_code}): "
                        f"{_message(response).rstrip('.')}.")
    return response


class Session:
    """Requests to one server over reused connections: a new httpx client per request costs tens of
    milliseconds, hundreds on a busy machine (measured: 360 ms against 24 ms reused, 2 loaded cores),
    which a live run would pay for every token's text."""

    def __init__(self, address: ServerAddress, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.address = address
        self._client = httpx.Client(timeout=timeout_s)

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
        try:
            response = self._client.request(method, self.address.base_url + path, json=body)
        except httpx.HTTPError as error:
            raise _refused(self.address, path, error) from None
        return _checked(self.address, path, response)

    def get_text(self, path: str) -> str:
        return self._send("GET", path).text

    def get_json(self, path: str) -> Any:
        return _json(self.address, path, self.get_text(path))

    def post_json(self, path: str, body: dict[str, Any]) -> Any:
        return _json(self.address, path, self._send("POST", path, body).text)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _json(address: ServerAddress, path: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        raise VllmError(f"The server at {address} answered {path} with something other than JSON: it is not a "
                        "vLLM server.") from None


def get_text(address: ServerAddress, path: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> str:
    with Session(address, timeout_s) as session:
        return session.get_text(path)


def get_json(address: ServerAddress, path: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    with Session(address, timeout_s) as session:
        return session.get_json(path)


def post_json(address: ServerAddress, path: str, body: dict[str, Any], timeout_s: float = DEFAULT_TIMEOUT_S) -> Any:
    with Session(address, timeout_s) as session:
        return session.post_json(path, body)


def stream_post(address: ServerAddress, path: str, body: dict[str, Any],
                connect_timeout_s: float = DEFAULT_TIMEOUT_S,
                read_timeout_s: float = DEFAULT_READ_TIMEOUT_S) -> Iterator[Arrival]:
    """POST `body` and yield each server-sent event's JSON as it arrives, until `[DONE]`.

    A stream that ends without `[DONE]`, a gap longer than `read_timeout_s` and an HTTP error
    each raise VllmError. Closing the iterator closes the connection (the server then aborts the
    request)."""
    timeout = httpx.Timeout(connect_timeout_s, read=read_timeout_s)
    try:
        with httpx.Client(timeout=timeout) as client, \
                client.stream("POST", address.base_url + path, json=body) as response:
            if response.status_code >= 400:
                response.read()
                _checked(address, path, response)
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[len("data:"):].strip()
                if payload == "[DONE]":
                    return
                try:
                    data = json.loads(payload)
                except ValueError:
                    raise VllmError(f"The server at {address} sent a stream line that is not JSON: it is not a "
                                    "vLLM server.") from None
                if isinstance(data, dict) and "error" in data and "choices" not in data:
                    error = data["error"]
                    message = error.get("message", error) if isinstance(error, dict) else error
                    raise VllmError(f"The vLLM server failed during the run: {str(message).rstrip('.')}.")
                yield Arrival(time.perf_counter(), data)
    except httpx.TimeoutException:
        raise VllmError(f"The vLLM server at {address} sent nothing for {read_timeout_s:g} s: it is overloaded or "
                        "stuck.") from None
    except httpx.HTTPError as error:
        raise VllmError(f"The connection to the vLLM server at {address} broke mid-run "
                        f"({type(error).__name__}).") from None
    raise VllmError(f"The vLLM server at {address} ended its stream without finishing the run.")
