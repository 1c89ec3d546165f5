"""One browser session watching a run of the queue (specviz/serving/): what its page shows, update by update.

While the run waits, its place and estimated wait, refreshed every second (over the trace the page showed);
the moment it leaves the queue, the page's old trace is cleared (issue 41: "Models ready" sat above the previous
run's timeline), the session keeping it until the run has steps of its own; while the models load, their
progress; then each new trace as the queue's worker publishes it, drawn once for every
session with the same screen size (`SharedRun.cached`), and the finished run. A request served by
another's identical run says so in one line under the status. Stop leaves the run: a run nobody
watches any more stops after the step in progress (the page then shows exactly what was recorded),
one that others still watch goes on for them, and this page keeps the steps it has; a run stopped or failed
before its first step shows the old trace again.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, Iterator

import gradio as gr

from engine.formats.trace import Trace
from specviz import updates
from specviz.run.views import HELD_WHILE_LIVE, Views, render
from specviz.serving.notices import queue_line, shared_notice, with_notice
from specviz.serving.run_queue import RunQueue, Seat
from specviz.serving.shared_run import BASELINE, DONE, FAILED, QUEUED, RUNNING, STARTING, Snapshot
from specviz.serving.stop import STOPPED_IN_QUEUE
from specviz.style import FigureStyle
from specviz.tokens import counted

Outputs = tuple[Any, ...]
ProgressBar = Callable[..., Any]
POLL_S = 0.2                # how soon a waiting page sees Stop, and its place move
QUEUE_REFRESH_S = 1.0       # the estimated wait is redrawn this often
VIEWER_SHARE_S = 0.1        # each viewer's cost of one update (serialised and sent), spread between redraws
MAX_INTERVAL_S = 3.0        # a crowded run still redraws at least this often
STOP_WAIT_S = 600.0         # a run stopped by its last viewer ends after its step: at most this long
LOADING = "Starting the run: loading the models…"
READY = "Models ready: reading the prompt (the first step includes the prefill)…"


def status_only(trace: Trace | None, status: str) -> Outputs:
    """Outputs that change the status line only (the session keeps `trace`)."""
    return updates.status_only(Views.names(), status, {"trace": trace})


def live_status(trace: Trace | None) -> str:
    """'Running… step 0 · 1 token': the status line while a run's steps arrive."""
    if trace is None or not trace.steps:
        return "Running…"
    return f"Running… step {trace.steps[-1].index} · {counted(trace.summary.new_tokens, 'token')}"


def finished_status(trace: Trace) -> str:
    summary = trace.summary
    why = "stopped at EOS" if trace.steps and trace.steps[-1].eos else f"reached {summary.new_tokens} new tokens"
    return f"Done: {summary.steps} steps, {why}. Scrub through the steps below."


def with_eager_reason(status: str, trace: Trace | None) -> str:
    """`status` and, for a run whose static cache lost its CUDA graphs to a capture that failed at Run
    time, the engine's sentence saying why (docs/architecture.md §7): the run goes on eagerly."""
    reason = trace.eager_reason if trace is not None else None
    return status if not reason else f"{status} {reason[0].upper()}{reason[1:]}."


class Watch:
    """The updates of one session's page for its `seat`; `kept` is the session's trace until the run has one."""

    def __init__(self, queue: RunQueue, seat: Seat, kept: Trace | None, style: FigureStyle, stop: threading.Event,
                 progress: ProgressBar, min_interval: float):
        self.queue, self.seat, self.run = queue, seat, seat.run
        self.kept, self.style, self.stop, self.progress = kept, style, stop, progress
        self.min_interval = min_interval
        self.notice = shared_notice(seat, self.run.snapshot().phase)
        self.left = False
        self._seen = self._drawn = -1           # the newest snapshot version seen, and the one last drawn
        self._due = 0.0                         # when the next redraw may come (monotonic seconds)
        self._line, self._line_at, self._place = "", 0.0, 0     # the queue line shown, when, and its place
        self._loading: tuple[float, str] | None = None
        self._said_ready = False
        self._held = False                      # the acceptance charts' stand-ins are on this page
        self._cleared = False                   # the old trace is off the page (the run has left the queue)

    def updates(self) -> Iterator[Outputs]:
        """Every update to the end of the run (or Stop); raises gr.Error for a run that failed."""
        while True:
            snapshot = self._next()
            if self.stop.is_set():
                yield from self._stopped()
                return
            if snapshot.ended:
                yield from self._ended(snapshot)
                return
            update = {QUEUED: self._queued, STARTING: self._starting}.get(snapshot.phase, self._running)(snapshot)
            if update is not None:
                yield update

    def _next(self) -> Snapshot:
        """The run's next change, or the same snapshot after a short while (for Stop, the queue's
        line, and a redraw that had to wait)."""
        now = time.monotonic()
        held = self._seen != self._drawn and self._due > now        # a change waits for its redraw
        snapshot = self.run.wait(self._seen, timeout=min(self._due - now, POLL_S) if held else POLL_S)
        self._seen = snapshot.version
        return snapshot

    def _queued(self, snapshot: Snapshot) -> Outputs | None:
        """The place and the estimated wait: on a new place at once, else refreshed every QUEUE_REFRESH_S."""
        self._drawn = snapshot.version
        place = self.queue.place(self.run)
        if place is None or not place.ahead:                          # none ahead: it starts now
            return None
        text = queue_line(place)
        stale = time.monotonic() - self._line_at >= QUEUE_REFRESH_S
        if text == self._line or not (place.place != self._place or stale):
            return None
        self._line, self._line_at, self._place = text, time.monotonic(), place.place
        return status_only(self.kept, with_notice(text, self.notice))

    def _starting(self, snapshot: Snapshot) -> Outputs | None:
        """The models load: the old trace leaves the page, and their progress goes to the page's progress bar."""
        self._drawn = snapshot.version
        if snapshot.progress is not None and snapshot.progress != self._loading:
            self._loading = snapshot.progress
            self.progress(self._loading[0], desc=self._loading[1])
        return None if self._cleared else self._clear(LOADING)

    def _clear(self, status: str) -> Outputs:
        """Every view empty but the status, the session keeping its trace (a run stopped before its first step
        shows it again); the scrubber off, so no step of the old trace can be picked."""
        self._cleared = True
        views = dataclasses.replace(render(None, "", style=self.style), trace=self.kept)
        return dataclasses.replace(views, status=with_notice(status, self.notice)).outputs()

    def _restored(self, status: str) -> Outputs:
        """The session's trace drawn again under `status` (after a run that recorded nothing), or only the status
        when the page never cleared it."""
        if not self._cleared:
            return status_only(self.kept, status)
        return render(self.kept, status, style=self.style).outputs()

    def _running(self, snapshot: Snapshot) -> Outputs | None:
        """'Models ready' until the first step, then each new trace when a redraw is due."""
        if snapshot.trace is None:
            self._drawn = snapshot.version
            if self._said_ready:
                return None
            self._said_ready = True
            if not self._cleared:
                return self._clear(READY)
            return status_only(self.kept, with_notice(READY, self.notice))
        if snapshot.version == self._drawn or time.monotonic() < self._due:
            return None
        started = time.monotonic()
        views = self._live(snapshot)
        self._drawn = snapshot.version
        self._due = time.monotonic() + self._interval(time.monotonic() - started)
        return views

    def _ended(self, snapshot: Snapshot) -> Iterator[Outputs]:
        """The finished run; a failed one's recorded steps, then its one sentence as a gr.Error."""
        if snapshot.phase == DONE:
            yield self._final(snapshot, finished_status(snapshot.trace))
            return
        if snapshot.phase == FAILED:
            if snapshot.trace is not None:
                yield self._final(snapshot, finished_status(snapshot.trace) if snapshot.trace.complete
                                  else f"Stopped by an error after {len(snapshot.trace.steps)} steps.")
            elif self._cleared:
                yield self._restored("The run failed before its first step: the page shows the trace it showed "
                                     "before.")
            raise gr.Error(snapshot.error or "The run failed.")
        yield from self._stopped()                  # STOPPED without this page's Stop: what was recorded

    def leave(self) -> int:
        """This page stops watching (once); the number of pages still watching the run."""
        if self.left:
            return self.run.viewers
        self.left = True
        return self.queue.leave(self.seat)

    def _interval(self, draw_s: float) -> float:
        """Redraw at most every min_interval, never spend more than a third of the time drawing, and
        slow down as more pages watch (each update is serialised and sent to every one of them)."""
        crowd = min(VIEWER_SHARE_S * self.run.viewers, MAX_INTERVAL_S)
        return max(self.min_interval, 2 * draw_s, crowd)

    def _live(self, snapshot: Snapshot) -> Outputs:
        trace = snapshot.trace
        if snapshot.phase == BASELINE:
            status = "Running target-only decoding for comparison…"
        else:
            status = live_status(trace)
        live = snapshot.phase == RUNNING
        views = self.run.cached(snapshot.version, ("live", self.style, live),
                                lambda: render(trace, "", live=live, style=self.style))
        unchanged = HELD_WHILE_LIVE if live and self._held else ()     # the stand-ins are sent once
        self._held = live
        return dataclasses.replace(views, status=with_notice(with_eager_reason(status, trace),
                                                              self.notice)).outputs(unchanged)

    def _final(self, snapshot: Snapshot, status: str) -> Outputs:
        views = self.run.cached(snapshot.version, ("final", self.style),
                                lambda: render(snapshot.trace, "", style=self.style))
        return dataclasses.replace(views, status=with_notice(with_eager_reason(status, snapshot.trace),
                                                              self.notice)).outputs()

    def _stopped(self) -> Iterator[Outputs]:
        """Stop: leave the run; the last page to leave waits for the step in progress and shows it all."""
        others = self.leave()
        snapshot = self.run.snapshot()
        if others == 0 and not snapshot.ended:
            snapshot = self.run.wait_until_ended(STOP_WAIT_S)
        if snapshot.trace is None:
            yield self._restored(STOPPED_IN_QUEUE if self.run.running_since is None else
                                 "Stopped before the first step: nothing was recorded.")
            return
        status = f"Stopped: the {len(snapshot.trace.steps)} steps recorded so far are kept."
        if others:
            status += f" The run goes on for the {others} other page{'s' if others != 1 else ''} watching it."
        yield render(snapshot.trace, with_eager_reason(status, snapshot.trace), style=self.style).outputs()
