"""Record one whole run for the tabs that show finished traces (Compare, Lab): step the
generation to its end or to Stop, and turn every failure into one clear gr.Error."""

from __future__ import annotations

import logging
import threading

import gradio as gr

from engine.formats.trace import Trace
from specviz.serving.runner import ProgressFn, RunRequest, Runner, RunnerError

LOG = logging.getLogger(__name__)


def record_run(runner: Runner, request: RunRequest, stop: threading.Event, progress: ProgressFn,
               cannot_start: str, failed: str) -> Trace:
    """The trace of `request`, complete or as far as Stop let it go.

    `cannot_start` prefixes a problem the user can fix (a bad model, a bad prompt);
    `failed` prefixes an unexpected engine failure, which is also logged with its traceback.
    """
    try:
        generation = runner.start(request, progress=progress)
        while not generation.is_done and not stop.is_set():
            generation.step()
        return generation.trace()
    except (RunnerError, ValueError) as error:
        raise gr.Error(f"{cannot_start}: {error}") from None
    except Exception as error:  # an unexpected engine failure: log it, tell the user in one line
        LOG.exception(failed)
        raise gr.Error(f"{failed}: {type(error).__name__}: {error}") from None
