"""Stop requests, one per browser session: Stop sets a flag that the running generator reads
between steps, so the generator itself yields the final, stopped view and no late update
can overwrite it (Gradio's `cancels` would drop the generator mid-step and race its last yield)."""

from __future__ import annotations

import threading


class StopSignals:
    """Session id -> the threading.Event of that session's current run."""

    def __init__(self) -> None:
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def open(self, session: str) -> threading.Event:
        """A fresh signal for a run starting in `session` (replacing an older one)."""
        event = threading.Event()
        with self._lock:
            self._events[session] = event
        return event

    def close(self, session: str, event: threading.Event) -> None:
        with self._lock:
            if self._events.get(session) is event:
                del self._events[session]

    def request_stop(self, session: str) -> bool:
        """Ask the session's run to stop after its current step; False when nothing is running."""
        with self._lock:
            event = self._events.get(session)
        if event is None:
            return False
        event.set()
        return True

    @property
    def num_running(self) -> int:
        with self._lock:
            return len(self._events)


def session_key(request: object | None) -> str:
    """The browser session a request belongs to (API calls without one share a key)."""
    return getattr(request, "session_hash", None) or "no-session"
