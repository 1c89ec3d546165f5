"""The Race tab: one prompt decoded target-only and then speculatively on the same models,
replayed side by side at the recorded pace (specviz/race/player.py, in the browser), so a
class sees which lane finishes first and why. Opens on a recorded race of the default pair.
"""

from __future__ import annotations

from typing import Callable

import gradio as gr

from engine.formats.race import Race
from specviz.assets import ASSETS_DIR, load_examples
from specviz.model_picker import model_picker
from specviz.serving.policy import Policy
from specviz.race.handlers import RaceHandlers
from specviz.race.player import PLAYER_JS, REPLAY_JS, player_css
from specviz.race.views import race_html
from specviz.serving.runner import Runner

DEFAULT_PROMPT = "Write a Python function that checks whether a string is a palindrome."
MAX_RACE_TOKENS = 256        # a race is watched in real time: two lanes of this many tokens is long enough
SPEEDS = [("real time", 1.0), ("2× faster", 2.0), ("4× faster", 4.0)]
STATE_TTL_S = 3 * 3600
INTRO = ("<div class='sv-tab-intro'><p>The same prompt, decoded twice on the same models: first by the "
         "<b>target alone</b>, one forward per token, then <b>speculatively</b>, where the draft guesses "
         "<i>k</i> tokens and one target forward checks them all. The lanes replay side by side at the pace they "
         "were recorded: who finishes first, and why?</p></div>")


def race_tab(runner: Runner, policy: Policy, recorded: Race | None, recorded_name: str,
             gpu: Callable[[Callable], Callable] = lambda fn: fn) -> None:
    """Build the tab inside the current gr.Tab and wire its events; `recorded` is shown first."""
    handlers = RaceHandlers(runner, policy=policy, shown_first=recorded)
    note = (f"Recorded earlier ({recorded_name}) and replayed from its recorded times: no model needed."
            if recorded is not None else "")
    state = gr.State(None, time_to_live=STATE_TTL_S)     # None: the recorded race (why: specviz/run/tab.py)
    gr.HTML(INTRO)
    with gr.Row(elem_id="sv-race-main", equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="sv-race-controls"):
            c = dict(model_picker(runner, "sv-race", policy, with_drafter=True))
            examples = load_examples(ASSETS_DIR)
            c["prompt"] = gr.Textbox(recorded.prompt if recorded else DEFAULT_PROMPT, label="Prompt", lines=3,
                                     max_lines=10, elem_id="sv-race-prompt")
            if examples:
                gr.Examples([[e.prompt] for e in examples], inputs=[c["prompt"]],
                            example_labels=[e.name for e in examples], cache_examples=False, label="Example prompts")
            start = recorded.config if recorded else None
            c["k"] = gr.Slider(1, policy.max_k, value=min(start.k if start else 5, policy.max_k), step=1,
                               label="k (draft tokens per step)", elem_id="sv-race-k")
            c["temperature"] = gr.Slider(0.0, policy.max_temperature, value=start.temperature if start else 0.0,
                                         step=0.05, label="temperature (0 = greedy)", elem_id="sv-race-temperature")
            most = min(MAX_RACE_TOKENS, policy.max_new_tokens)
            c["max_new_tokens"] = gr.Slider(8, most, value=min(start.max_new_tokens if start else 64, most), step=1,
                                            label="max new tokens", elem_id="sv-race-max-new")
            with gr.Row():
                go = gr.Button("Race", variant="primary", elem_id="sv-race-go")
                stop = gr.Button("Stop", variant="stop", elem_id="sv-race-stop")
        with gr.Column(scale=3, min_width=320):
            status = gr.Markdown("Press **Race** to record a race of your own on this server; **Replay** plays the "
                                 "one shown again.", elem_id="sv-race-status")
            with gr.Row(equal_height=True):
                replay = gr.Button("▶ Replay", elem_id="sv-race-replay", scale=0, min_width=120)
                speed = gr.Radio(SPEEDS, value=1.0, label="Replay speed (the clocks always show recorded time)",
                                 elem_id="sv-race-speed", scale=2)
            view = gr.HTML(race_html(recorded, note), css_template=player_css(), js_on_load=PLAYER_JS,
                           elem_id="sv-race-view")
            with gr.Accordion("Download / upload a race (JSON)", open=False, elem_id="sv-race-io"):
                with gr.Row():
                    download = gr.Button("Download this race (JSON)", elem_id="sv-race-download")
                    upload = gr.UploadButton("Load a race (JSON)", file_types=[".json"], type="binary",
                                             elem_id="sv-race-upload")
                files = gr.File(label="Downloads", file_count="multiple", interactive=False, elem_id="sv-race-files")

    inputs = [c["preset"], c["draft"], c["target"], c["drafter"], c["prompt"], c["k"], c["temperature"],
              c["max_new_tokens"]]
    go.click(gpu(handlers.race), inputs=[state, *inputs], outputs=[state, view, status], show_progress_on=[status],
             api_name="race", validator=handlers.queued)
    stop.click(handlers.stop, inputs=None, outputs=None, show_progress="hidden", concurrency_limit=None,
               api_visibility="private")
    replay.click(None, inputs=[speed], outputs=None, js=REPLAY_JS)
    c["preset"].change(handlers.preset_changed, inputs=[c["preset"]],
                       outputs=[c["draft"], c["target"], c["preset_info"], c["drafter"]], api_visibility="private")
    upload.upload(handlers.upload, inputs=[upload], outputs=[state, view, status], concurrency_limit=2,
                  api_visibility="private")
    download.click(handlers.export, inputs=[state], outputs=[files], concurrency_limit=2, api_name="race_export")
