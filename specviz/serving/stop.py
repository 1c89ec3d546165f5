"""Stop requests, per browser session: Stop sets a flag that the running generator reads
between steps, so the generator itself yields the final, stopped view and no late update
can overwrite it (Gradio's `cancels` would drop the generator mid-step and race its last yield).

A run that waits in Gradio's queue behind other sessions' runs gets its flag when it joins
the queue (`queued`, called from the event's validator, which Gradio runs before the request
waits), so a Stop pressed while it waits is already set when it starts, and it never begins.
`Stoppable` is that pattern once, for every tab's long-running handler (run, compare, sweep, lab).
"""

from __future__ import annotations

import threading
from collections import deque
from contextlib import contextmanager
from typing import Any, Iterator

import gradio as gr


class StopSignals:
    """Session id -> the threading.Events of that session's runs: waiting in the queue, and running."""

    def __init__(self) -> None:
        self._waiting: dict[str, deque[threading.Event]] = {}
        self._running: dict[str, list[threading.Event]] = {}
        self._lock = threading.Lock()

    def queued(self, session: str) -> None:
        """A run of `session` joined the queue: its signal exists from now on, for Stop to reach."""
        with self._lock:
            self._waiting.setdefault(session, deque()).append(threading.Event())

    def open(self, session: str, was_queued: bool = False) -> threading.Event:
        """The signal of a run starting in `session`: with `was_queued`, the one its session's
        oldest waiting run got in `queued` (already set if Stop came while it waited), else fresh."""
        with self._lock:
            waiting = self._waiting.get(session) if was_queued else None
            event = waiting.popleft() if waiting else threading.Event()
            if waiting is not None and not waiting:
                del self._waiting[session]
            self._running.setdefault(session, []).append(event)
        return event

    def close(self, session: str, event: threading.Event) -> None:
        with self._lock:
            running = self._running.get(session, [])
            if event in running:
                running.remove(event)
            if not running:
                self._running.pop(session, None)

    def request_stop(self, session: str) -> bool:
        """Stop the session's runs: running ones after their current step, waiting ones before they
        start. False when it has none."""
        with self._lock:
            events = [*self._waiting.get(session, ()), *self._running.get(session, ())]
        for event in events:
            event.set()
        return bool(events)

    @property
    def num_running(self) -> int:
        with self._lock:
            return sum(len(events) for events in self._running.values())


def session_key(request: object | None) -> str:
    """The browser session a request belongs to (API calls without one share a key)."""
    return getattr(request, "session_hash", None) or "no-session"


class Stoppable:
    """Base of a tab's handlers whose event runs long: wire the event with `validator=self.queued`
    and the Stop button to `self.stop`, and run the body inside `with self.stop_signal(request)`."""

    def __init__(self) -> None:
        self.stops = StopSignals()

    async def queued(self, request: gr.Request, *values: Any) -> list[dict[str, Any]]:
        """The long event's validator, which Gradio calls as the request joins the queue: the run gets
        its stop signal before it waits. It accepts every value (the handler checks them, one clear
        sentence each). A coroutine, so Gradio calls it on its event loop with no hop to a worker
        thread: during such a hop other requests would pass the queue's size check before this one counts."""
        self.stops.queued(session_key(request))
        return [gr.validate(True, "") for _ in values]

    def stop(self, request: gr.Request = None) -> None:
        """Ask this session's runs to stop: a running one after the step in progress, a queued one
        before it starts."""
        self.stops.request_stop(session_key(request))

    @contextmanager
    def stop_signal(self, request: gr.Request | None) -> Iterator[threading.Event]:
        """The signal of the run starting now (set already if Stop came while it waited in the queue)."""
        session = session_key(request)
        signal = self.stops.open(session, was_queued=True)
        try:
            yield signal
        finally:
            self.stops.close(session, signal)


STOPPED_IN_QUEUE = "Stopped while waiting in the queue: the run never started."
