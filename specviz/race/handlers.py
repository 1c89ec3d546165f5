"""The Race tab's events: record a race (target-only, then speculative, on the same models),
upload a race JSON, download one. Replaying needs no handler: it runs in the browser
(specviz/race/player.py). Every problem a user can cause is a gr.Error with one sentence.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator

import gradio as gr

from engine.config import SpecConfig
from engine.formats.race import MAX_RACE_BYTES, Race, RaceFormatError
from specviz.controls import Controls
from specviz.model_picker import picker_changed
from specviz.serving.policy import Policy
from specviz.race.views import race_html
from specviz.run.export import fresh_export_dir
from specviz.serving.runner import RaceProgress, RunRequest, Runner, RunnerError
from specviz.serving.stop import STOPPED_IN_QUEUE, Stoppable
from specviz.serving.uploads import parse_upload
from specviz.tokens import counted

LOG = logging.getLogger(__name__)
Outputs = tuple[Any, Any, str]           # the session's race, the race view, the status line
LANES = {"warm-up": "Warming up both lanes (a few untimed tokens, so one-time costs count in neither)…",
         "target-only": "Lane 1 of 2: target-only decoding, one target forward per token…",
         "speculative": "Lane 2 of 2: speculative decoding"}


class RaceHandlers(Stoppable):
    """The Race tab's behaviour. `shown_first` is the race a page shows before its session has one (the
    session's state starts as None, as the Run tab's does: specviz/run/tab.py)."""

    def __init__(self, runner: Runner, policy: Policy = Policy(), shown_first: Race | None = None):
        self.runner = runner
        self.policy = policy
        self.shown_first = shown_first
        super().__init__()

    def race(self, race: Race | None, preset: str, draft: str, target: str, drafter: str, prompt: str, k: float,
             temperature: float, max_new_tokens: float, request: gr.Request = None,
             progress: gr.Progress = gr.Progress()) -> Iterator[Outputs]:
        """Decode `prompt` target-only, then speculatively, yielding the status as it goes; then the race,
        which the browser replays at once."""
        with self.stop_signal(request) as stop:
            if stop.is_set():
                yield race, gr.update(), STOPPED_IN_QUEUE
                return
            run_request = self._request(preset, draft, target, drafter, prompt, k, temperature, max_new_tokens)
            progress(0.0, desc=f"Loading {run_request.models.label}…")
            finished = None
            updates = self.runner.race(run_request, progress=lambda fraction, message: progress(fraction, desc=message),
                                       should_stop=stop.is_set)
            try:
                for update in updates:
                    if update.race is not None:
                        finished = update.race
                    elif not stop.is_set():
                        yield race, gr.update(), status_line(update)
            except (RunnerError, ValueError) as error:
                raise gr.Error(f"Could not race: {error}") from None
            except Exception as error:  # an unexpected engine failure: log it, tell the user in one line
                LOG.exception("a race failed")
                raise gr.Error(f"The race failed: {type(error).__name__}: {error}") from None
            finally:
                updates.close()
            if finished is None:
                yield race, gr.update(), "Stopped: a race needs both lanes, so nothing was kept. The last race stays."
                return
            yield finished, race_html(finished, "Just recorded on this server."), finished_status(finished)

    def upload(self, data: bytes | None) -> Outputs:
        """Show an uploaded race; a bad file is a gr.Error naming the field, and the current race stays."""
        race = parse_upload(data, MAX_RACE_BYTES, "race", Race.from_json, RaceFormatError)
        return race, race_html(race, "Loaded from a race file: replayed from its recorded times, no model needed."), \
            finished_status(race)

    def export(self, race: Race | None) -> list[str]:
        """The race as specviz-race.json in a fresh folder (it uploads back)."""
        race = race if race is not None else self.shown_first
        if race is None:
            raise gr.Error("There is no race to download yet: press Race first.")
        directory = fresh_export_dir()
        path = directory / "specviz-race.json"
        race.save(path)
        return [str(path)]

    def preset_changed(self, preset: str) -> tuple[Any, ...]:
        return picker_changed(self.runner, self.policy, preset, with_drafter=True)

    def _request(self, preset: str, draft: str, target: str, drafter: str, prompt: str, k: float, temperature: float,
                 max_new_tokens: float) -> RunRequest:
        """The run controls' own checks (one clear sentence each), with SpecConfig's defaults for the rest."""
        values = dict(preset=preset, draft=draft, target=target, drafter=drafter, prompt=prompt, k=k,
                      temperature=temperature, max_new_tokens=max_new_tokens, adaptive_k=False, draft_dtype="auto",
                      target_dtype="auto", with_baseline=False)
        defaults = SpecConfig()
        try:
            controls = Controls(**{name: values.get(name, getattr(defaults, name, None)) for name in Controls.names()})
            return controls.to_request(self.policy)
        except ValueError as error:
            raise gr.Error(str(error)) from None


def status_line(update: RaceProgress) -> str:
    line = LANES.get(update.lane, "Racing…")
    return f"{line}: {counted(update.tokens, 'token')} so far…" if update.lane == "speculative" else line


def finished_status(race: Race) -> str:
    return (f"Race of {len(race.speculative.token_ids)} and {len(race.target_only.tokens)} tokens: replaying both "
            "lanes at their recorded pace. **Replay** plays it again.")
