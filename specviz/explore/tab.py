"""The Explore tab: a k x temperature sweep (heatmaps, theory overlay) and two runs side by side.

`explore_tab(...)` is called inside the page's gr.Tabs; it builds the components and
wires them to ExploreHandlers and CompareHandlers.
"""

from __future__ import annotations

from typing import Any, Callable

import gradio as gr

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER
from engine.load.class_point import ClassLog
from specviz.assets import ASSETS_DIR, RecordedSweep, load_examples, load_tree_sweep
from specviz.explore.compare import PRESETS as COMPARE_PRESETS
from specviz.explore.compare import CompareHandlers, CompareViews, compare_views
from specviz.explore.load_view import load_section
from specviz.explore.handlers import KS, MAX_NEW_TOKENS, TEMPERATURES, ExploreHandlers, SweepControls
from specviz.explore.settings import SETTING_NAMES, settings_note, settings_values, shown_settings
from specviz.explore.trees import trees_section
from specviz.explore.views import ExploreViews, render_sweep
from specviz.model_picker import model_picker, picker_changed
from specviz.serving.policy import Policy
from specviz.quantities import ACCEPTANCE_RATE, ALPHA, TOKENS_PER_STEP
from specviz.serving.runner import Runner

SWEEP_NOTE = ("Each (temperature, prompt, seed) is also decoded once by the target alone, for the speedup. "
              "Stop keeps the finished runs.")
INTRO = ("<div class='sv-tab-intro'><p>How do the draft length <i>k</i> and the temperature change acceptance "
         f"and speed? Each heatmap cell is the mean over prompts and seeds at one (k, T) of the {ACCEPTANCE_RATE.html()}, "
         f"the {TOKENS_PER_STEP.html()} and the speedup; in the speedup's heatmap the outlined, starred cell is the "
         f"fastest k at that temperature. Below, every run meets the i.i.d. model at the {ALPHA.html()} = Σ min(p, q): ideal, when "
         "verifying k + 1 tokens costs one forward, and, when the sweep recorded them, at the draft and verify costs "
         "measured on its machine, with the gap to it split into its causes. "
         "Then token trees against a chain, and two runs side by side.</p></div>")
COMPARE_PROMPT = 4          # examples.json: "Repetition: edit a list", where prompt lookup shines


def explore_tab(runner: Runner, large: gr.Checkbox, width: gr.Number, recorded: RecordedSweep,
                policy: Policy = Policy(), gpu: Callable[[Callable], Callable] = lambda fn: fn,
                class_log: ClassLog | None = None) -> None:
    """The tab's components and events; `gpu` wraps the entries that run models (spaces.GPU on ZeroGPU);
    `class_log` holds the Run tab's vLLM runs, which the load section draws as the class's load point."""
    sweeps = ExploreHandlers(runner, policy=policy, shown_first=recorded.table)
    compares = CompareHandlers(runner, policy=policy)
    examples = load_examples(ASSETS_DIR)
    initial = render_sweep(recorded.table, _recorded_status(recorded))
    gr.HTML(INTRO)
    with gr.Row(elem_id="sv-explore-main", equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="sv-sweep-controls"):
            picker = model_picker(runner, "sv-explore", policy, with_drafter=True, with_server=True)
            c: dict[str, Any] = dict(picker)
            ks = [k for k in KS if k <= policy.max_k]
            example_prompts = [e.prompt for e in examples]
            shown = shown_settings(recorded.table, ks, example_prompts, policy)
            note = gr.Markdown(settings_note(recorded.table, "the recorded sweep's", ks, example_prompts, policy),
                               elem_classes=["sv-note"], elem_id="sv-sweep-settings-note")
            c["ks"] = gr.CheckboxGroup(ks, value=shown["ks"], label="k values", elem_id="sv-sweep-ks")
            c["temperatures"] = gr.CheckboxGroup([(f"{t:g}", t) for t in TEMPERATURES],
                                                 value=shown["temperatures"], label="temperatures",
                                                 elem_id="sv-sweep-temperatures")
            c["prompts"] = gr.CheckboxGroup([(e.name, e.prompt) for e in examples],
                                            value=shown["prompts"], label="prompts",
                                            elem_id="sv-sweep-prompts")
            with gr.Row():
                c["seeds"] = gr.Textbox(shown["seeds"], label="seeds", placeholder="0, 1, 2", elem_id="sv-sweep-seeds",
                                        min_width=90)
                c["max_new_tokens"] = gr.Slider(8, min(MAX_NEW_TOKENS, policy.max_new_tokens),
                                                value=shown["max_new_tokens"], step=8, label="max new tokens",
                                                elem_id="sv-sweep-max-new", min_width=150)
            size = gr.Markdown(_size(c["ks"].value, c["temperatures"].value, c["prompts"].value, shown["seeds"]),
                               elem_classes=["sv-note"])
            with gr.Row():
                run = gr.Button("Run sweep", variant="primary", elem_id="sv-sweep-run")
                stop = gr.Button("Stop", variant="stop", elem_id="sv-sweep-stop")
            with gr.Accordion("Download / upload a sweep", open=False, elem_id="sv-sweep-io"):
                download = gr.Button("Download CSV and JSON", elem_id="sv-sweep-download")
                upload = gr.UploadButton("Load a sweep (JSON)", file_types=[".json"], type="binary",
                                         elem_id="sv-sweep-upload")
                files = gr.File(label="Downloads", file_count="multiple", interactive=False,
                                elem_id="sv-sweep-files")
        with gr.Column(scale=3, min_width=320, elem_id="sv-sweep-views"):
            v = _sweep_views(initial)
    views_out = [v[name] for name in ExploreViews.names()]
    sweep_in = [c[name] for name in SweepControls.__dataclass_fields__]
    styled = [v["table"], v["temperature"], large, width]

    run.click(gpu(sweeps.sweep), inputs=[*styled, *sweep_in], outputs=views_out, show_progress_on=[v["status"]],
              api_name="explore_sweep", api_visibility="private", validator=sweeps.queued).success(
        lambda table: settings_note(table, "your sweep's", ks, example_prompts, policy), inputs=[v["table"]],
        outputs=[note], show_progress="hidden", concurrency_limit=None, api_name="explore_sweep_settings",
        api_visibility="private")
    stop.click(sweeps.stop, inputs=None, outputs=None, show_progress="hidden", concurrency_limit=None,
               api_name="explore_stop", api_visibility="private")
    v["temperature"].input(sweeps.select_temperature, inputs=styled,
                           outputs=[v["theory"], v["gap"], v["gap_words"], v["positions"]],
                           show_progress="hidden", concurrency_limit=None, api_name="explore_temperature",
                           api_visibility="private")
    upload.upload(sweeps.upload, inputs=[upload, large, width], outputs=views_out, concurrency_limit=2,
                  api_name="explore_upload", api_visibility="private").success(
        lambda table: [*settings_values(table, ks, example_prompts, policy),
                       settings_note(table, "the uploaded sweep's", ks, example_prompts, policy)],
        inputs=[v["table"]], outputs=[*(c[name] for name in SETTING_NAMES), note], show_progress="hidden",
        concurrency_limit=None, api_name="explore_upload_settings", api_visibility="private")
    download.click(sweeps.download, inputs=[v["table"]], outputs=[files], concurrency_limit=2,
                   api_name="explore_download", api_visibility="private")
    picker["preset"].change(lambda preset: picker_changed(runner, policy, preset, with_drafter=True, with_server=True),
                            inputs=[picker["preset"]], outputs=[picker["draft"], picker["target"],
                                                                picker["preset_info"], picker["server"],
                                                                picker["drafter"]],
                            api_name="explore_preset", api_visibility="private")
    size_in = [c["ks"], c["temperatures"], c["prompts"], c["seeds"]]
    for source in size_in:
        source.change(_size, inputs=size_in, outputs=[size], show_progress="hidden", concurrency_limit=None,
                      api_name="explore_size", api_visibility="private")

    trees_section(load_tree_sweep(ASSETS_DIR), large, width)
    load_section(large, width, class_log)          # speculation under load (specviz/explore/load_view.py)
    comparison = _compare_section(compares, picker, examples, large, width, policy, gpu)
    for source in (large, width):
        source.change(sweeps.restyle, inputs=[*styled, v["status"]], outputs=views_out, show_progress="hidden",
                      concurrency_limit=None, api_name="explore_restyle", api_visibility="private")
        source.change(compares.restyle, inputs=[comparison["state"], comparison["status"], large, width],
                      outputs=comparison["outputs"], show_progress="hidden", concurrency_limit=None,
                      api_name="compare_restyle", api_visibility="private")


def _sweep_views(initial: ExploreViews) -> dict[str, Any]:
    v: dict[str, Any] = {"table": gr.State(None)}     # None: the recorded sweep (why: specviz/run/tab.py)
    v["status"] = gr.Markdown(initial.status, elem_id="sv-sweep-status")
    v["about"] = gr.HTML(initial.about, elem_id="sv-sweep-about")
    with gr.Row(equal_height=False, elem_id="sv-heatmaps"):
        v["acceptance"] = gr.Plot(initial.acceptance, show_label=False, elem_id="sv-heat-acceptance", min_width=330)
        v["length"] = gr.Plot(initial.length, show_label=False, elem_id="sv-heat-length", min_width=330)
        v["speedup"] = gr.Plot(initial.speedup, show_label=False, elem_id="sv-heat-speedup", min_width=330)
    v["temperature"] = gr.Radio(label="Theory overlay at temperature", elem_id="sv-theory-temperature",
                                **_radio(initial.temperature))
    with gr.Row(equal_height=False, elem_id="sv-theory-row"):
        v["theory"] = gr.Plot(initial.theory, show_label=False, elem_id="sv-theory", scale=2, min_width=440)
        v["positions"] = gr.Plot(initial.positions, show_label=False, elem_id="sv-sweep-positions", scale=1,
                                 min_width=340)
    v["gap"] = gr.Plot(initial.gap, show_label=False, elem_id="sv-gap")
    v["gap_words"] = gr.HTML(initial.gap_words, elem_id="sv-gap-words")
    return v


def _compare_section(handlers: CompareHandlers, picker: dict[str, Any], examples: list, large: gr.Checkbox,
                     width: gr.Number, policy: Policy, gpu: Callable[[Callable], Callable]) -> dict[str, Any]:
    gr.HTML("<h2 class='sv-section'>Compare two runs</h2><p class='sv-muted'>The same prompt and models "
            "(chosen above) under two settings: both outputs lined up token by token (different k split the same "
            "text into different steps), then each run's own step timeline.</p>")
    start = COMPARE_PRESETS["draft model vs n-gram"]
    sides: dict[str, Any] = {}
    with gr.Row(elem_id="sv-compare", equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="sv-compare-controls"):
            prompt_value = examples[COMPARE_PROMPT].prompt if len(examples) > COMPARE_PROMPT else ""
            prompt = gr.Textbox(prompt_value, label="Prompt", lines=3, elem_id="sv-compare-prompt")
            with gr.Row():
                max_new = gr.Slider(8, min(256, policy.max_new_tokens), value=48, step=8, label="max new tokens",
                                    min_width=150)
                seed = gr.Number(0, precision=0, minimum=0, label="seed", min_width=80)
            for name, (k, temperature, drafter) in zip("AB", start):
                with gr.Group(elem_id=f"sv-compare-{name.lower()}"):
                    gr.Markdown(f"**Settings {name}**", elem_classes=["sv-side-title"])
                    with gr.Row():
                        sides[f"k_{name}"] = gr.Slider(1, policy.max_k, value=k, step=1, label="k", min_width=120)
                        sides[f"temperature_{name}"] = gr.Slider(0, policy.max_temperature, value=temperature,
                                                                 step=0.05, label="temperature", min_width=120)
                    sides[f"drafter_{name}"] = gr.Radio([("draft model", MODEL_DRAFTER), ("n-gram", NGRAM_DRAFTER)],
                                                        value=drafter, label="drafter")
            side_widgets = [sides[f"{field}_{name}"] for name in "AB" for field in ("k", "temperature", "drafter")]
            with gr.Row():
                presets = [gr.Button(label, size="sm", min_width=90, elem_classes=["sv-preset-button"])
                           for label in COMPARE_PRESETS]
            with gr.Row():
                run = gr.Button("Run A and B", variant="primary", elem_id="sv-compare-run")
                stop = gr.Button("Stop", variant="stop", elem_id="sv-compare-stop")
        with gr.Column(scale=3, min_width=320):
            first = compare_views(None, "Pick two settings (or a preset) and press **Run A and B**.")
            views = {"state": gr.State(None), "status": gr.Markdown(first.status, elem_id="sv-compare-status"),
                     "table": gr.HTML(first.table, elem_id="sv-compare-table"),
                     "alignment": gr.Plot(first.alignment, show_label=False, elem_id="sv-compare-tokens"),
                     "timeline_a": gr.Plot(first.timeline_a, show_label=False, elem_id="sv-compare-a"),
                     "timeline_b": gr.Plot(first.timeline_b, show_label=False, elem_id="sv-compare-b")}
    outputs = [views[name] for name in CompareViews.names()]
    status = views["status"]
    run.click(gpu(handlers.compare), inputs=[large, width, picker["preset"], picker["draft"], picker["target"], prompt,
                                        max_new, seed, *side_widgets],
              outputs=outputs, show_progress_on=[status], api_name="compare_run", api_visibility="private",
              validator=handlers.queued)
    stop.click(handlers.stop, inputs=None, outputs=None, show_progress="hidden", concurrency_limit=None,
               api_name="compare_stop", api_visibility="private")
    for button, label in zip(presets, COMPARE_PRESETS):
        button.click(lambda name=label: handlers.preset(name), inputs=None, outputs=side_widgets,
                     show_progress="hidden", concurrency_limit=None, api_name="compare_preset",
                     api_visibility="private")
    return {"state": views["state"], "status": status, "outputs": outputs}


def _radio(update: dict[str, Any]) -> dict[str, Any]:
    return {"choices": update.get("choices", []), "value": update.get("value")}


def _size(ks: list, temperatures: list, prompts: list, seeds: str) -> str:
    seed_count = len([s for s in (seeds or "").replace(";", ",").split(",") if s.strip()])
    runs = len(ks or ()) * len(temperatures or ()) * len(prompts or ()) * max(seed_count, 1)
    return f"**{runs} runs** ({len(ks or ())} k × {len(temperatures or ())} T × {len(prompts or ())} prompts × " \
           f"{max(seed_count, 1)} seeds). {SWEEP_NOTE}"


def _recorded_status(recorded: RecordedSweep) -> str:
    if recorded.table is None:
        return "No recorded sweep found: pick models and settings and press **Run sweep**."
    return (f"Showing the recorded sweep **{recorded.name}** ({recorded.table.num_runs} runs): a recording, shown "
            "without running a model. "
            "Pick a temperature below to compare it with theory, or press **Run sweep** to record your own.")
