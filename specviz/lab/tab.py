"""The Lab tab: the engine as it stands after each lab problem A -> D, against target-only decoding.

`lab_tab(...)` is called inside the page's gr.Tabs; the recorded traces of the default
pair (assets/traces/lab-*.json) show before any model loads.
"""

from __future__ import annotations

from typing import Callable

import gradio as gr

from specviz.assets import ASSETS_DIR, load_examples
from specviz.lab.handlers import MAX_LAB_TOKENS, LabHandlers
from specviz.lab.views import CHOICES, LabSet, LabViews, render_lab
from specviz.model_picker import model_picker, picker_changed
from specviz.serving.policy import Policy
from specviz.serving.runner import Runner

INTRO = ("<div class='sv-tab-intro'><p>Speculative decoding is only lossless when every piece is in place. "
         "Walk through the engine as it is built: <b>A</b> drafts and verifies but cleans nothing up, "
         "<b>B</b> adds the bonus-token carryover (after a fully accepted step the draft is fed its last draft "
         "d<sub>k</sub> along with the bonus; A feeds it the bonus alone), <b>C</b> zero-fills rejected cache "
         "positions, <b>D</b> cuts them for real. Each stage runs the same prompt greedily for the same number "
         "of new tokens; the vermillion vertical line marks the step where its output first leaves what the target alone writes. "
         "<b>T</b> then keeps D's engine but drafts a token tree: the same prompt as a chain and as a tree, "
         "side by side.</p>"
         "</div>")
DEFAULT_KEY = "A"


def lab_tab(runner: Runner, large: gr.Checkbox, width: gr.Number, recorded: LabSet | None,
            policy: Policy = Policy(), gpu: Callable[[Callable], Callable] = lambda fn: fn) -> None:
    """The tab's components and events; `gpu` wraps the lab run (spaces.GPU on ZeroGPU)."""
    handlers = LabHandlers(runner, policy=policy, shown_first=recorded)
    reference = recorded.reference if recorded else None
    initial = render_lab(recorded, DEFAULT_KEY, _recorded_status(recorded))
    examples = load_examples(ASSETS_DIR)
    gr.HTML(INTRO)
    with gr.Row(elem_id="sv-lab-main", equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="sv-lab-controls"):
            with gr.Accordion("Run the lab on your own prompt", open=recorded is None, elem_id="sv-lab-run-box"):
                picker = model_picker(runner, "sv-lab", policy)
                prompt = gr.Textbox(reference.prompt.text if reference else (examples[0].prompt if examples else ""),
                                    label="Prompt", lines=3, elem_id="sv-lab-prompt")
                with gr.Row():
                    k = gr.Slider(1, policy.max_k, value=min(reference.config.k if reference else 5, policy.max_k),
                                  step=1, label="k", min_width=120)
                    most = min(MAX_LAB_TOKENS, policy.max_new_tokens)
                    max_new = gr.Slider(8, most, step=8, label="max new tokens", min_width=150,
                                        value=min(reference.config.max_new_tokens if reference else 64, most))
                gr.Markdown("Greedy, float32, the same prompt, k and length for every stage: stage D is then "
                            "target-only decoding's output, exact up to float rounding at near ties, which the run "
                            "checks.", elem_classes=["sv-note"])
                with gr.Row():
                    run = gr.Button("Run the lab", variant="primary", elem_id="sv-lab-run")
                    stop = gr.Button("Stop", variant="stop", elem_id="sv-lab-stop")
        with gr.Column(scale=3, min_width=320, elem_id="sv-lab-views"):
            stage = gr.Radio([(c.title, c.key) for c in CHOICES], value=DEFAULT_KEY, label="Stage",
                             elem_id="sv-lab-stage")
            state = gr.State(None)      # the session's lab; None: the recorded one (why: specviz/run/tab.py)
            status = gr.Markdown(initial.status, elem_id="sv-lab-status")
            explanation = gr.HTML(initial.explanation, elem_id="sv-lab-explanation")
            verdict = gr.HTML(initial.verdict, elem_id="sv-lab-verdict")
            chain = gr.Plot(initial.chain_timeline, show_label=False, elem_id="sv-lab-chain-timeline",
                            visible=initial.chain_timeline is not None)      # the tree stage: D's chain above its tree
            timeline = gr.Plot(initial.timeline, show_label=False, elem_id="sv-lab-timeline")
            with gr.Row(elem_id="sv-lab-scrub-row", elem_classes=["sv-scrub-row"], equal_height=False):
                prev = gr.Button("◀ Prev", elem_id="sv-lab-prev", scale=0, min_width=120)
                scrubber = gr.Slider(initial.scrubber.minimum, initial.scrubber.maximum, value=initial.scrubber.value,
                                     step=1, label="Step (scrub through this stage's steps)",
                                     interactive=initial.scrubber.interactive, elem_id="sv-lab-scrubber",
                                     min_width=160)
                next_ = gr.Button("Next ▶", elem_id="sv-lab-next", scale=0, min_width=120)
            detail = gr.HTML(initial.detail, elem_id="sv-lab-detail")
            tree = gr.Plot(initial.tree, show_label=False, elem_id="sv-lab-tree", visible=initial.tree is not None)
            drift = gr.Plot(initial.drift, show_label=False, elem_id="sv-lab-drift")
    views = {"lab": state, "status": status, "explanation": explanation, "verdict": verdict, "chain_timeline": chain,
             "timeline": timeline, "scrubber": scrubber, "detail": detail, "tree": tree, "drift": drift}
    views_out = [views[name] for name in LabViews.names()]
    show_in = [state, stage, status, large, width]
    stage.change(handlers.show, inputs=show_in, outputs=views_out, show_progress="hidden", concurrency_limit=None,
                 api_name="lab_show", api_visibility="private")
    for source in (large, width):
        source.change(handlers.restyle, inputs=[*show_in, scrubber], outputs=views_out, show_progress="hidden",
                      concurrency_limit=None, api_name="lab_restyle", api_visibility="private")
    step_in = [state, stage, scrubber, large, width]
    step_out = [timeline, detail, drift, tree, chain]
    scrubber.input(handlers.select_step, inputs=step_in, outputs=step_out, trigger_mode="always_last",
                   show_progress="hidden", concurrency_limit=None, api_name="lab_step", api_visibility="private")
    for button, move in ((prev, handlers.previous_step), (next_, handlers.next_step)):
        button.click(move, inputs=step_in, outputs=[scrubber, *step_out], show_progress="hidden",
                     concurrency_limit=None, api_visibility="private")
    run.click(gpu(handlers.run), inputs=[state, stage, large, width, picker["preset"], picker["draft"], picker["target"],
                                    prompt, k, max_new], outputs=views_out, show_progress_on=[status],
              api_name="lab_run", api_visibility="private", validator=handlers.queued)
    stop.click(handlers.stop, inputs=None, outputs=None, show_progress="hidden", concurrency_limit=None,
               api_name="lab_stop", api_visibility="private")
    picker["preset"].change(lambda preset: picker_changed(runner, policy, preset), inputs=[picker["preset"]],
                            outputs=[picker["draft"], picker["target"], picker["preset_info"]],
                            api_name="lab_preset", api_visibility="private")


def _recorded_status(recorded: LabSet | None) -> str:
    if recorded is None:
        return "No recorded lab traces found: open **Run the lab on your own prompt** and press **Run the lab**."
    reference = recorded.reference
    model = reference.config.target if reference else "the default pair"
    return (f"Showing recorded lab runs of **{model}** (greedy, k = {reference.config.k if reference else '?'}, "
            f"{reference.config.max_new_tokens if reference else '?'} new tokens in every stage): recordings, shown "
            "without running a model. "
            "Pick a stage, scrub through its steps, or run the lab on your own prompt.")
