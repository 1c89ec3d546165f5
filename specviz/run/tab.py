"""The Run tab: controls on the left (models, prompt, k, tree size, temperature, more settings), the run
on the right (token timeline, step scrubber, the step's draft tree in a tree run, step detail, output,
KV caches, acceptance charts, export/import), wired to `Handlers` (specviz/run/handlers.py). One column on a phone.
"""

from __future__ import annotations

import gradio as gr

from engine.config import (DRAFT_DTYPES, MAX_TREE_BRANCH, MODEL_DRAFTER, NGRAM_DRAFTER,
                           TARGET_DTYPES, SpecConfig)
from specviz.assets import ASSETS_DIR, DemoTrace, load_examples
from engine.load.class_point import ClassLog
from specviz.controls import Controls
from specviz.serving.device_call import GpuDecorator
from specviz.serving.fastest_here import button_update, use_fastest
from specviz.serving.policy import MIN_TOP_P, Policy
from specviz.run.handlers import Handlers
from specviz.run.recorded import CONTROL_FIELDS, RecordedRuns, status_for
from specviz.run.views import Views, render
from specviz.model_picker import BRANCH_INFO, TREE_NODES_INFO, preset_choices, server_box
from specviz.serving.runner import CUSTOM, Runner
from specviz.serving.run_queue import CAPACITY, SERVER_RUNS, VIEWERS, RunQueue

DEFAULT_PROMPT = "Write a Python function that checks whether a string is a palindrome."
STATE_TTL_S = 3 * 3600     # a session's trace is dropped this long after its last run or upload


def run_tab(runner: Runner, demo_trace: DemoTrace, policy: Policy, large: gr.Checkbox, width: gr.Number,
            gpu: GpuDecorator | None, queue_size: int = CAPACITY, server_runs: int = SERVER_RUNS,
            class_log: ClassLog | None = None, load_line: gr.Markdown | None = None) -> None:
    """Build the tab inside the current gr.Tab and wire its events; `large` and `width` are the
    page's text-size toggle and viewport width; `gpu` (spaces.GPU on a ZeroGPU Space, else None) makes
    each run one GPU call once it leaves the queue; `queue_size` distinct runs may wait at once, and
    `server_runs` stream at once from each vLLM server; `class_log` keeps the runs that did (a class's load);
    `load_line`, the page's load status line, shows "Use the fastest here" once the load has priced this machine."""
    handlers = Handlers(runner, policy=policy, queue=RunQueue(runner, capacity=queue_size, gpu=gpu,
                                                                   server_runs=server_runs, class_log=class_log),
                        shown_first=demo_trace.trace)
    first = demo_trace.trace.steps[0].index if demo_trace.trace and demo_trace.trace.steps else None
    initial = render(demo_trace.trace, status_for(demo_trace.name, demo_trace.trace), selected=first)
    recorded = RecordedRuns(demo_trace, policy)
    # The session's trace starts as None (the handlers read it as the trace shown first): Gradio
    # re-derives a state's config from its default value on every update of every page, and for a
    # Trace that is dataclasses.asdict of the whole trace (docs/benchmark.md, "A class at once").
    state = gr.State(None, time_to_live=STATE_TTL_S)
    with gr.Row(elem_id="sv-main", equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="sv-controls"):
            controls = _controls(runner, demo_trace, policy)
            use_fastest_here = gr.Button("Use the fastest here", visible=False, size="sm", elem_id="sv-use-fastest")
            with gr.Row(elem_id="sv-run-row"):
                run = gr.Button("Run", variant="primary", elem_id="sv-run")
                stop = gr.Button("Stop", variant="stop", elem_id="sv-stop")
        with gr.Column(scale=3, min_width=320, elem_id="sv-views"):
            recorded_pick = gr.Radio(recorded.choices(), value=demo_trace.name or None, elem_id="sv-recorded",
                                     label="Recorded runs of the default pair (no model needed)",
                                     visible=len(recorded.traces) > 1)
            views = _views(initial)
    views_out = [state if name == "trace" else views[name] for name in Views.names()]
    control_in = [controls[name] for name in Controls.names()]
    recorded_pick.input(recorded.show, inputs=[recorded_pick, large, width],
                        outputs=[*views_out, *(controls[name] for name in CONTROL_FIELDS)],
                        show_progress="hidden", concurrency_limit=None, api_visibility="private")

    # preprocess=False: Controls checks the raw values itself, so an API caller's bad value
    # (text for a number, a value out of range) gets the same clear sentence as the page's.
    # The validator runs as a request joins the queue: Stop reaches a run still waiting there.
    # Runs wait in the tab's own queue (specviz/serving/), which tells each its place and joins
    # identical requests to one run, so up to VIEWERS pages watch at once instead of one.
    shown_elsewhere = dict(fn=lambda: gr.update(value=None), outputs=recorded_pick, show_progress="hidden",
                           queue=False, api_visibility="private")   # a new run or upload: no recorded run is shown
    run.click(handlers.run, inputs=[state, large, width, *control_in], outputs=views_out,
              show_progress_on=[views["status"]], api_name="run", preprocess=False, concurrency_limit=VIEWERS,
              validator=handlers.queued).success(**shown_elsewhere)
    views["replay"].click(handlers.replay, inputs=[state, large, width], outputs=views_out,
                          show_progress="hidden", concurrency_limit=8, api_visibility="private")
    stop.click(handlers.stop, inputs=None, outputs=None, show_progress="hidden", concurrency_limit=None,
               api_name="stop")
    step_out = [views["timeline"], views["kv_cache"], views["detail"], views["tree"], views["output"]]
    step_in = [state, views["scrubber"], large, width]
    views["scrubber"].input(handlers.select_step, inputs=step_in, outputs=step_out, trigger_mode="always_last",
                            show_progress="hidden", concurrency_limit=None, api_name="select_step")
    for button, move in ((views["prev"], handlers.previous_step), (views["next"], handlers.next_step)):
        button.click(move, inputs=step_in, outputs=[views["scrubber"], *step_out], show_progress="hidden",
                     concurrency_limit=None, api_visibility="private")
    restyle_in = [state, views["scrubber"], large, width, views["status"]]
    for source in (large, width):
        source.change(handlers.restyle, inputs=restyle_in, outputs=views_out, show_progress="hidden",
                      concurrency_limit=None, api_visibility="private")
    controls["preset"].change(handlers.preset_changed, inputs=[controls["preset"]],
                              outputs=[controls["draft"], controls["target"], controls["drafter"],
                                       controls["preset_info"], controls["server"], controls["k"],
                                       controls["adaptive_k"], controls["tree_nodes"], controls["tree_branch"]],
                              api_visibility="private")
    for source in (controls["target_dtype"], controls["temperature"], controls["preset"]):
        source.change(handlers.exactness, inputs=[controls["target_dtype"], controls["temperature"], controls["preset"]],
                      outputs=[controls["exactness"]], show_progress="hidden", api_visibility="private")
    if load_line is not None:        # the load's choice for this machine (specviz/serving/fastest_here.py)
        load_line.change(lambda: button_update(runner.load_status(), demo_trace.trace), inputs=None,
                         outputs=[use_fastest_here], show_progress="hidden", queue=False, api_visibility="private")
        use_fastest_here.click(lambda: use_fastest(runner.load_status(), demo_trace.trace), inputs=None,
                               outputs=[controls[name] for name in ("k", "adaptive_k", "tree_nodes", "drafter",
                                                                    "target_dtype", "draft_dtype")],
                               show_progress="hidden", queue=False, api_visibility="private")
    views["upload"].upload(handlers.upload, inputs=[views["upload"], large, width], outputs=views_out,
                           concurrency_limit=2, api_visibility="private").success(**shown_elsewhere)
    views["export"].click(handlers.export, inputs=[state, views["scrubber"]], outputs=[views["files"]],
                          concurrency_limit=2, api_name="export")


def _controls(runner: Runner, demo_trace: DemoTrace, policy: Policy) -> dict[str, gr.components.Component]:
    presets = list(runner.presets())
    default = next((p for p in presets if p.name == runner.default_preset), presets[0] if presets else None)
    recorded = demo_trace.trace
    start = policy.within(recorded.config if recorded else SpecConfig())   # Run first re-records what the page shows
    c: dict[str, gr.components.Component] = {}
    if policy.hosted:
        gr.Markdown(policy.note, elem_id="sv-hosted", elem_classes=["sv-note"])
    c["preset"] = gr.Dropdown(choices=preset_choices(presets, with_server=True),
                              value=default.name if default else CUSTOM, label="Models", elem_id="sv-preset")
    c["preset_info"] = gr.Markdown(default.description if default else "", elem_id="sv-preset-info")
    c["draft"] = gr.Textbox(label="Draft model", placeholder="hub id, local folder or .gguf path", visible=default is None,
                            elem_id="sv-draft")
    c["target"] = gr.Textbox(label="Target model", placeholder="hub id, local folder or .gguf path",
                             visible=default is None, elem_id="sv-target")
    c["server"] = server_box("sv", policy)
    c["drafter"] = gr.Radio([("draft model", MODEL_DRAFTER), ("n-gram lookup", NGRAM_DRAFTER)], label="Drafter",
                            value=start.drafter if recorded else default.default_drafter if default else MODEL_DRAFTER,
                            elem_id="sv-drafter")
    c["prompt"] = gr.Textbox(label="Prompt", lines=4, max_lines=12, elem_id="sv-prompt",
                             value=recorded.prompt.text if recorded else DEFAULT_PROMPT)
    examples = load_examples(ASSETS_DIR)
    if examples:
        gr.Examples([[e.prompt] for e in examples], inputs=[c["prompt"]], example_labels=[e.name for e in examples],
                    cache_examples=False, label="Example prompts", elem_id="sv-examples")
    with gr.Row(elem_id="sv-k-row"):
        c["k"] = gr.Slider(1, policy.max_k, value=start.k, step=1, label="k (draft tokens per step)",
                           elem_id="sv-k", min_width=140)
        c["adaptive_k"] = gr.Checkbox(label="adaptive k", value=start.adaptive_k, elem_id="sv-adaptive", min_width=100)
    with gr.Row(elem_id="sv-tree-row"):
        c["tree_nodes"] = gr.Slider(0, policy.max_tree_nodes, value=start.tree_nodes,
                                    step=1, elem_id="sv-tree-nodes",
                                    label="tree nodes (0 = a chain)", min_width=220, info=TREE_NODES_INFO)
        c["tree_branch"] = gr.Slider(1, MAX_TREE_BRANCH, value=start.tree_branch, step=1, label="branch",
                                     elem_id="sv-tree-branch", min_width=220, info=BRANCH_INFO)
    c["temperature"] = gr.Slider(0.0, policy.max_temperature, value=start.temperature,
                                 step=0.05, label="temperature (0 = greedy)", elem_id="sv-temperature")
    c["max_new_tokens"] = gr.Slider(1, policy.max_new_tokens, value=start.max_new_tokens,
                                    step=1, label="max new tokens", elem_id="sv-max-new")
    with gr.Accordion("More settings: top-p, top-k, seed, precision", open=False, elem_id="sv-more"):
        with gr.Row():
            c["top_p"] = gr.Slider(MIN_TOP_P, 1.0, value=start.top_p, step=0.05, label="top-p", min_width=120)
            c["top_k"] = gr.Number(value=start.top_k, precision=0, minimum=0, label="top-k (0 = off)", min_width=100)
        with gr.Row():
            c["seed"] = gr.Number(value=start.seed, precision=0, minimum=0, label="seed", min_width=100)
        with gr.Row():
            c["draft_dtype"] = gr.Dropdown(list(DRAFT_DTYPES), value="auto", label="draft dtype", min_width=120,
                                           elem_id="sv-draft-dtype",
                                           info="auto: int8 on a CPU, bfloat16 on CUDA, else float32; int4 (CPU): "
                                                "half int8's bytes; never changes the output")
            c["target_dtype"] = gr.Dropdown(list(TARGET_DTYPES), value="auto", label="target dtype", min_width=120,
                                            elem_id="sv-target-dtype",
                                            info="auto: float32 on a CPU, bfloat16 on CUDA (its tensor cores)")
    c["exactness"] = gr.Markdown(Handlers.exactness("auto", start.temperature), elem_classes=["sv-note"],
                                 elem_id="sv-exactness")
    c["with_baseline"] = gr.Checkbox(label="compare with target-only decoding after the run", value=False,
                                     elem_id="sv-baseline")
    return c


def _views(initial: Views) -> dict[str, gr.components.Component]:
    first = initial.outputs()
    value = dict(zip(Views.names(), first))
    scrubber = initial.scrubber
    v: dict[str, gr.components.Component] = {}
    v["status"] = gr.Markdown(initial.status, elem_id="sv-status")
    v["timeline"] = gr.Plot(value["timeline"], show_label=False, elem_id="sv-timeline")
    with gr.Row(elem_id="sv-scrub-row", equal_height=False):
        v["prev"] = gr.Button("◀ Prev", elem_id="sv-prev", scale=0, min_width=120)
        v["scrubber"] = gr.Slider(scrubber.minimum, scrubber.maximum, value=scrubber.value, step=1,
                                  label="Step (scrub through the recorded steps)", interactive=scrubber.interactive,
                                  elem_id="sv-scrubber", min_width=160)
        v["next"] = gr.Button("Next ▶", elem_id="sv-next", scale=0, min_width=120)
        v["replay"] = gr.Button("▶▶ Replay", elem_id="sv-replay", scale=0, min_width=120)
    v["tree"] = gr.Plot(initial.tree, show_label=False, elem_id="sv-tree", visible=initial.tree is not None)
    v["detail"] = gr.HTML(initial.detail, elem_id="sv-detail")
    with gr.Row(equal_height=False):
        with gr.Column(scale=3, min_width=300):
            v["output"] = gr.HTML(initial.output, elem_id="sv-output")
        with gr.Column(scale=2, min_width=300):
            v["metrics"] = gr.HTML(initial.metrics, elem_id="sv-metrics")
    v["kv_cache"] = gr.Plot(value["kv_cache"], show_label=False, elem_id="sv-kv")
    with gr.Row(equal_height=False, elem_id="sv-acceptance"):
        v["per_step"] = gr.Plot(value["per_step"], show_label=False, elem_id="sv-per-step", min_width=280)
        v["positions"] = gr.Plot(value["positions"], show_label=False, elem_id="sv-positions", min_width=280)
        v["histogram"] = gr.Plot(value["histogram"], show_label=False, elem_id="sv-histogram", min_width=280)
    with gr.Accordion("Export / import", open=False, elem_id="sv-io"):
        with gr.Row():
            v["export"] = gr.Button("Export the trace (JSON) and figures at this step (HTML, zip)",
                                    elem_id="sv-export")
            v["upload"] = gr.UploadButton("Load a trace (JSON)", file_types=[".json"], type="binary",
                                          elem_id="sv-upload")
        v["files"] = gr.File(label="Downloads", file_count="multiple", interactive=False, elem_id="sv-files")
    return v
