"""The page: a header with the large-text toggle, the guided tour (specviz/tour/) and the model status line
(specviz/serving/load_status.py),
then four tabs, each built by its own folder: Run (specviz/run/tab.py), Race (specviz/race/tab.py),
Explore (specviz/explore/tab.py) and Lab (specviz/lab/tab.py).

`build_demo(runner)` builds the Blocks; the caller launches it with the theme and css
(Gradio 6 takes both in `launch()`, see app.py).
"""

from __future__ import annotations

import gradio as gr

from engine.formats.race import Race
from engine.load.class_point import ClassLog
from specviz.assets import (ASSETS_DIR, DemoTrace, RecordedSweep, load_demo_trace, load_lab_traces, load_recorded_race,
                            load_recorded_sweep)
from specviz.explore.tab import explore_tab
from specviz.lab.tab import lab_tab
from specviz.lab.views import KEYS, LabSet, recorded_lab
from specviz.pinned_captions import PIN_CAPTIONS_JS
from specviz.serving.device_call import GpuDecorator, no_gpu
from specviz.serving.load_status import load_status_line
from specviz.serving.policy import Policy
from specviz.race.tab import race_tab
from specviz.run.tab import run_tab
from specviz.serving.runner import Runner
from specviz.style import NARROW_WIDTH
from specviz.serving.run_queue import CAPACITY, SERVER_RUNS
from specviz.tour.panel import tour_panel
from specviz.tour.sources import tour_sources

TITLE = "SpecViz: speculative decoding, step by step"
INTRO = (
    "<div id='sv-header'><h1>SpecViz <span>speculative decoding, step by step</span></h1>"
    "<p>A small <b>draft</b> model guesses <i>k</i> tokens; the large <b>target</b> model checks all of them in "
    "<b>one</b> forward pass, keeps the longest prefix it agrees with, and adds one token of its own. "
    "Every step below was recorded: scrub through it, or press <b>Run</b> to record your own.</p></div>"
)
# Plotly sizes a chart to its box only when the window resizes: after the large-text class or a tab
# switch changes the boxes (large text gives side-by-side charts a full row each), a resize event
# refits every visible chart (Plotly skips hidden ones, hence the tab switch too).
REFIT_JS = "requestAnimationFrame(() => window.dispatchEvent(new Event('resize')))"
SETTLE_MS = 300            # a resize is settled when no other follows it within this long
LARGE_TEXT_JS = f"(large) => {{ document.body.classList.toggle('sv-large', large); {REFIT_JS}; }}"
# The viewport's width reaches the figures on load, and again whenever the window settles on the other side of
# NARROW_WIDTH (a phone turned from landscape to portrait, a window narrowed): every tab restyles on `width.change`,
# so a page whose large text was switched on in landscape (the toggle is hidden on a portrait phone) is drawn for
# the phone it became instead of squeezing landscape figures ('74%77%69%' in Explore's heatmaps). It waits for the
# resizing to settle: a full-page screenshot passes through other sizes and returns, and redrawing every figure
# for a passing size left one chart a negative height.
WIDTH_JS = f"""() => {{
  let sent = innerWidth < {NARROW_WIDTH}, settle = null;
  addEventListener('resize', () => {{
    clearTimeout(settle);
    settle = setTimeout(() => {{
      const resized = document.getElementById('sv-resized');
      if ((innerWidth < {NARROW_WIDTH}) === sent || !resized) return;
      sent = !sent;
      resized.click();
    }}, {SETTLE_MS});
  }});
  return innerWidth;
}}"""


def build_demo(runner: Runner, gpu: GpuDecorator | None = None,
               demo_trace: DemoTrace | None = None, policy: Policy = Policy(), sweep: RecordedSweep | None = None,
               lab: LabSet | None = None, race: tuple[Race | None, str] | None = None,
               queue_size: int = CAPACITY, server_runs: int = SERVER_RUNS) -> gr.Blocks:
    """The Blocks app; `gpu` is spaces.GPU on a ZeroGPU Space (else None): the Run tab's queue makes each
    run one GPU call of it, and it wraps the other tabs' entries that run models; `policy`
    is what this server accepts (control ranges; models in hosted mode); the recorded trace,
    sweep, lab set and race (with its file name) shown first come from assets/ unless given;
    `queue_size` distinct runs of the Run tab may wait at once; `server_runs` of them stream at once from
    each vLLM server (docs/architecture.md §9, "lanes")."""
    demo_trace = demo_trace if demo_trace is not None else load_demo_trace(ASSETS_DIR)
    wrap = gpu if gpu is not None else no_gpu
    sweep = sweep if sweep is not None else load_recorded_sweep(ASSETS_DIR)
    lab = lab if lab is not None else recorded_lab(load_lab_traces(KEYS))
    race = race if race is not None else load_recorded_race(ASSETS_DIR)
    class_log = ClassLog()      # the Run tab's vLLM runs, drawn by Explore's load view as the class's own load point
    # delete_cache: Gradio's copies of uploads and exports older than a day go, checked hourly.
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=(3600, 86400)) as demo:
        with gr.Row(elem_id="sv-top"):
            with gr.Column(scale=5, min_width=300):
                gr.HTML(INTRO)
                tour_panel(tour_sources(demo_trace, lab, sweep.table, race[0]))   # the guided tour (specviz/tour/)
            with gr.Column(scale=1, min_width=180):
                large = gr.Checkbox(label="Large text (projector)", value=False, elem_id="sv-large")
                width = gr.Number(value=None, visible=False, elem_id="sv-width")   # the viewport, set on load
                # clicked by WIDTH_JS when the window settles on the other side of the phone width
                resized = gr.Button("resized", visible="hidden", elem_id="sv-resized")
        load_line = load_status_line(demo, runner, demo_trace.trace)
        with gr.Tabs(elem_id="sv-tabs") as tabs:
            with gr.Tab("Run", id="run", elem_id="sv-tab-run"):
                run_tab(runner, demo_trace, policy, large, width, gpu, queue_size, server_runs, class_log, load_line)
            with gr.Tab("Race", id="race", elem_id="sv-tab-race"):
                race_tab(runner, policy, *race, wrap)
            with gr.Tab("Explore", id="explore", elem_id="sv-tab-explore"):
                explore_tab(runner, large, width, sweep, policy, wrap, class_log)
            with gr.Tab("Lab", id="lab", elem_id="sv-tab-lab"):
                lab_tab(runner, large, width, lab, policy, wrap)
        large.change(None, inputs=[large], js=LARGE_TEXT_JS)
        tabs.select(None, js=f"() => {{ {REFIT_JS}; }}")
        # the viewport's width, and a phone's scrolling tree keeping its caption in view (specviz/pinned_captions.py)
        demo.load(None, inputs=None, outputs=[width], js=f"() => {{ ({PIN_CAPTIONS_JS})(); return ({WIDTH_JS})(); }}")
        resized.click(None, inputs=None, outputs=[width], js="() => window.innerWidth")
    return demo
