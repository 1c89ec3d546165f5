"""Explore's "Speculation under load" section (issue #39 item 2): a `specviz.load/1` run (python -m engine load)
drawn against the number N of requests sent at once (specviz/figures/load.py), the recorded one in assets/ first.

A point of any chart picks its level (the browser passes the point's N to the level picker: LOAD_JS); the level's
requests are listed, and Open shows the chosen one on the Run tab as an ordinary SpecViz trace: the request's
trace goes to the Run tab's own trace upload (its handler reads and draws it, as it does any trace file), and the
Run tab opens. An uploaded file is read by the load reader (engine/formats/load_reader.py); a bad one is refused
in one sentence and the run shown stays. Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from pathlib import Path, PurePosixPath
from typing import Any

import gradio as gr

from engine.formats.load_format import MAX_LOAD_BYTES, LoadFormatError
from engine.formats.load_reader import parse_load_json, read_load
from engine.vllm.server_info import FIX_NAME, samples_wrongly
from engine.formats.trace import Trace
from engine.load.class_point import ClassLog, ClassPoint
from engine.load.stats import other_traffic
from engine.load.sweep import stopped
from specviz.assets import ASSETS_DIR
from specviz.figures.common import Figure
from specviz.figures.load import (LoadRun, acceptance_figure, model_sentences, ratio_figure, step_cost_figure,
                                  throughput_figure)
from specviz.serving.uploads import parse_upload
from specviz.style import FigureStyle
from specviz.updates import ComponentFields

LOADS_FOLDER = "loads"         # assets/loads/: the recorded load runs
RECORDED_GLOB = "load-*.json"
INTRO = ("<h2 class='sv-section'>Speculation under load</h2><p class='sv-muted'>One request at a time, speculation "
         "often pays. A server answers many at once: the target verifies every request's drafts in the same batch, "
         "and once that batch fills the machine the drafts' extra tokens stop being free. Here the same weights ran "
         "on a vLLM server with speculation and on one without, with N requests sent at once. Click a point to "
         "list that level's requests, then open one on the Run tab.</p>")
PICK_LEVEL = "Click a point on a chart, or pick N here, to list its requests."
CLASS_STEPS = ("start a vLLM server (`bash scripts/vllm.sh start` prints its URL); have the students choose the model "
               "source \"vLLM server (URL)…\" on the Run tab, enter that URL and press Run at about the same time "
               "(every browser on this app counts), or send a class's worth with `python scripts/classroom.py "
               "--clients 16 --vllm-server URL --url THIS_APP`; then press the button")
CLASS_INFO = (f"A class is load too. To see yours on the throughput chart: {CLASS_STEPS}: the latest class becomes a "
              "star.")


@dataclass(frozen=True)
class LoadViews(ComponentFields):
    """One value per output component of the section, in the order of `names()`."""

    document: dict[str, Any] | None
    status: str
    ratio: Figure
    throughput: Figure
    acceptance: Figure
    step_cost: Figure
    level: Any                  # the level picker: a gr.update of its choices
    request: Any                # the level's requests: a gr.update of its choices


def recorded_load(assets_dir: Path = ASSETS_DIR) -> tuple[dict[str, Any] | None, str]:
    """The recorded load run shipped in `assets_dir`/loads (the default pair's before the tiny pair's) and its file
    name; (None, '') when there is none or it does not read."""
    paths = sorted((assets_dir / LOADS_FOLDER).glob(RECORDED_GLOB), key=lambda path: ("tiny" in path.name, path.name))
    for path in paths:
        try:
            return read_load(path), path.name
        except (LoadFormatError, OSError):
            continue
    return None, ""


def _model_name(folder: str) -> str:
    """A model folder as a reader knows it: its last part, without SpecViz's converted-cache hash prefix
    ('/root/.cache/specviz/gguf-v1/cc324af070c2ecbf-qwen2.5-coder-1.5b-instruct-q4_k_m' ->
    'qwen2.5-coder-1.5b-instruct-q4_k_m'); a hub id or a bare name as it is."""
    name = PurePosixPath(folder).name or folder
    return re.sub(r"^[0-9a-f]{16}-", "", name)


def fix_words(document: dict[str, Any]) -> str:
    """Whether the speculative server ran SpecViz's CPU sampler fix, and what that means at T > 0 (vLLM 0.32's CPU
    speculation samples wrongly there as shipped: vLLM issue #55005); '' for a greedy run as shipped or an older
    record that does not say."""
    engine = document["servers"][0].get("engine", "")
    if FIX_NAME in engine:
        return ", with SpecViz's CPU sampler fix"
    if samples_wrongly(engine, document["settings"]["temperature"]):
        return (", as shipped: its speculation at T > 0 does not sample the target's distribution (vLLM issue "
                "#55005), so the speculative numbers are not those of a working sampler")
    return ""


def about(document: dict[str, Any] | None, source: str, run: LoadRun | None = None) -> str:
    """Where the run comes from, the pair, the machine it ran on, and what the batch cost model says of it (`run`:
    the document as the charts read it, when the caller has it)."""
    if document is None:
        return "No load run recorded here: upload one (`python -m engine load ... --out FILE` writes it)."
    pair, settings, machine = document["pair"], document["settings"], document["machine"]
    drafter = "n-gram lookup" if pair["method"] == "ngram" else f"draft `{_model_name(pair['draft'] or '')}`"
    busy, cores = machine.get("load_average"), machine.get("cores")
    shared = (f" The machine's one-minute load average was {busy[0]:.1f} on {cores or '?'} cores when it started (it "
              "counts the minute before too): compare these numbers only with each other." if busy else "")
    if shared_levels := other_traffic(document["servers"][0]["levels"]):
        shared += (f" **The server with speculation served other requests too** at N = "
                   f"{', '.join(map(str, shared_levels))} (its counters moved by more than this run's own drafts): "
                   "those levels' numbers include that traffic.")
    if (stop := stopped(document)) is not None:
        shared += (f" **This run stopped at N = {stop[1]}**, where {stop[0]} failed: {stop[2]} The levels measured "
                   "before it are drawn.")
    threads = document["servers"][0].get("threads")
    shared += f" Each server ran on {threads} threads, one after the other." if threads else ""
    quantized = (f" (their quantized GGUF weights expanded to {pair['dtype']})"
                 if re.search(r"-q\d", _model_name(pair["target"])) else "")
    return (f"Showing {source}: target `{_model_name(pair['target'])}`, {drafter}, k = {pair['k']}, served in "
            f"{pair['dtype']}{quantized}, T = {settings['temperature']:g}, {settings['max_tokens']} tokens a request, "
            f"on {machine.get('cpu_model', 'an unnamed machine')} (vLLM {document['servers'][0]['version']}"
            f"{fix_words(document)}).{shared}"
            f"\n\n{model_sentences(run or LoadRun.of(document))}")


def class_sentence(point: ClassPoint | None, document: dict[str, Any] | None) -> str:
    """The page's own class on a vLLM server in words: how many runs, how many at once, what they got, and whether
    the sweep shown ran on the same server and model (a point is compared with a sweep only there)."""
    if point is None:
        return ("**Your class:** no run on this app has streamed from a vLLM server yet, so there is no star. To see "
                f"yours on the throughput chart: {CLASS_STEPS} again once they are done: the latest class becomes a "
                "star.")
    rate = f", {point.acceptance_rate:.0%} of drafts accepted" if point.acceptance_rate is not None else ""
    server = f"the vLLM server serving {_model_name(point.root or point.model)} (k = {point.k})"
    if point.runs == 1:
        words = (f"**Your class** (the star): the latest run on {server} ran alone, so N = 1: "
                 f"{point.aggregate_tokens_per_s:.1f} tokens/s ({point.output_tokens} tokens in {point.wall_s:.1f} s)"
                 f"{rate}. Runs whose times overlap make a class of more.")
    else:
        words = (f"**Your class** (the star): the latest {point.runs} runs on {server} overlapped in time, "
                 f"{point.mean_concurrency:.1f} streaming at once on average (their summed time ÷ the "
                 f"{point.wall_s:.1f} s from the first sent to the last token; at most {point.peak_concurrency} at "
                 f"one instant): {point.aggregate_tokens_per_s:.1f} tokens/s in all, "
                 f"{point.per_request_tokens_per_s:.1f} for the median run{rate}. Students press Run within seconds "
                 "of each other, so a class is compared at its average, not its peak.")
    if document is None:
        return words
    spec = document["servers"][0]
    if point.server == spec["address"]:
        return words + " It ran on the same server as this sweep's runs with speculation."
    if _model_name(point.root) == _model_name(document["pair"]["target"]) and point.k == document["pair"]["k"]:
        return words + (" It ran on another server than this sweep, with the same target and k: another machine or "
                        "setting moves every number, so read where it falls against the curve's shape.")
    return words + (" **It ran another pair than this sweep** (" + _model_name(document["pair"]["target"]) +
                    f", k = {document['pair']['k']}): its star shows your class's load, not a point of these curves.")


def render_load(document: dict[str, Any] | None, status: str, style: FigureStyle = FigureStyle(),
                run: LoadRun | None = None, point: ClassPoint | None = None) -> LoadViews:
    """Every chart of `document` (None: the empty charts) and the level picker offering its grid (`run`: the
    document as read, when the caller has it; `point`: the page's class, drawn as a star)."""
    run = run or (LoadRun.of(document) if document is not None else None)
    levels = [level.n for level in run.levels] if run else []
    return LoadViews(document, status, ratio_figure(run, style), throughput_figure(run, style, point),
                     acceptance_figure(run, style), step_cost_figure(run, style),
                     gr.update(choices=[(f"N = {n}", n) for n in levels], value=None),
                     gr.update(choices=[], value=None, visible=False))


def shown(document: dict[str, Any] | None, source: str, style: FigureStyle,
          point: ClassPoint | None = None) -> LoadViews:
    """The section for `document` from `source`: its traces read once for the status and every chart."""
    run = LoadRun.of(document) if document is not None else None
    return render_load(document, about(document, source, run), style, run, point)


def request_choices(document: dict[str, Any] | None, n: Any) -> list[tuple[str, int]]:
    """The speculative server's requests at N = `n`, each named for a student: its prompt, tokens, time, acceptance."""
    if document is None:
        return []
    level = next((level for level in document["servers"][0]["levels"] if level["concurrency"] == n), None)
    if level is None:
        return []
    choices = []
    for i, request in enumerate(level["requests"]):
        if request.get("trace") is None:
            continue
        summary = request["trace"].get("summary") or {}
        rate = summary.get("acceptance_rate")
        accepted = f" · {rate:.0%} of drafts accepted" if isinstance(rate, (int, float)) else ""
        choices.append((f"request {i + 1} · prompt {request['prompt_index'] + 1} · {request['output_tokens']} tokens "
                        f"in {request['done_s'] - request['sent_s']:.2f} s{accepted}", i))
    return choices


class LoadHandlers:
    """The section's events; `shown_first` is the run a page shows before its session uploads one (the session's
    state starts as None, as the Run tab's does: specviz/run/tab.py)."""

    def __init__(self, shown_first: dict[str, Any] | None, name: str, class_log: ClassLog | None = None):
        self.shown_first = shown_first
        self.name = name
        self.class_log = class_log if class_log is not None else ClassLog()

    def first(self) -> LoadViews:
        return shown(self.shown_first, f"the recorded run `{self.name}`", FigureStyle())

    def _document(self, document: dict[str, Any] | None) -> dict[str, Any] | None:
        return document if document is not None else self.shown_first

    def upload(self, data: bytes | None, large: bool, width: float | None,
               point: ClassPoint | None = None) -> tuple[Any, ...]:
        """Draw an uploaded load run (with the class's star if it is shown); a bad file is a gr.Error and the run
        shown stays."""
        document = parse_upload(data, MAX_LOAD_BYTES, "load run", parse_load_json, LoadFormatError)
        return shown(document, "an uploaded load run", FigureStyle.for_screen(large, width), point).outputs()

    def restyle(self, document: dict[str, Any] | None, status: str, large: bool, width: float | None,
                point: ClassPoint | None = None) -> tuple[Any, ...]:
        views = render_load(self._document(document), status, FigureStyle.for_screen(large, width), point=point)
        return (*views.outputs()[2:6],)

    def show_class(self, document: dict[str, Any] | None, large: bool,
                   width: float | None) -> tuple[ClassPoint | None, str, Figure]:
        """The page's latest class on a vLLM server: kept for later redraws, said in words, starred on the
        throughput chart."""
        document = self._document(document)
        point = self.class_log.point()
        run = LoadRun.of(document) if document is not None else None
        return point, class_sentence(point, document), throughput_figure(run, FigureStyle.for_screen(large, width),
                                                                         point)

    def select_level(self, document: dict[str, Any] | None, n: Any) -> Any:
        choices = request_choices(self._document(document), n)
        return gr.update(choices=choices, value=choices[0][1] if choices else None, visible=bool(choices),
                         label=f"Requests at N = {n} (with speculation)")

    def open_request(self, document: dict[str, Any] | None, n: Any, index: Any) -> str:
        """The chosen request's trace as JSON, for the Run tab's trace upload (LOAD_JS sends it there)."""
        document = self._document(document)
        if document is None:
            raise gr.Error("No load run is shown: upload one first.")
        level = next((level for level in document["servers"][0]["levels"] if level["concurrency"] == n), None)
        if level is None or not isinstance(index, int) or not 0 <= index < len(level["requests"]):
            raise gr.Error("Pick a level (click a point) and one of its requests first.")
        trace = level["requests"][index]["trace"]
        if trace is None:
            raise gr.Error("That request has no trace: only the server with speculation records its steps.")
        return Trace.from_dict(trace).to_json()       # as the trace reader reads it (its summary recomputed)


# The browser's part: a click on a chart's point picks its level (each point's customdata starts with its N), and
# Open hands the request's trace to the Run tab's trace upload, then opens the Run tab.
LOAD_JS = """
const pick = (event) => {
  const point = event && event.points && event.points[0];
  const n = point && point.customdata ? point.customdata[0] : null;
  if (n === null || n === undefined) return;
  const label = Array.from(document.querySelectorAll('#sv-load-level label'))
    .find((option) => option.innerText.trim() === 'N = ' + n);
  if (label) { label.click(); label.scrollIntoView({block: 'nearest'}); }
};
const hook = () => {
  document.querySelectorAll('#sv-load-charts .js-plotly-plot').forEach((plot) => {
    if (!plot.on) return;
    if (plot.removeListener) plot.removeListener('plotly_click', pick);
    plot.on('plotly_click', pick);
  });
};
new MutationObserver(hook).observe(document.body, {childList: true, subtree: true});
hook();
"""
OPEN_JS = """
async (text) => {
  if (!text) return;
  document.getElementById('sv-tab-run-button').click();
  const upload = () => document.getElementById('sv-upload');
  const accordion = document.querySelector('#sv-io > button.label-wrap');
  if (!upload() && accordion) accordion.click();        // the Run tab's upload sits in its accordion, drawn open
  for (let i = 0; i < 200 && !upload(); i++) await new Promise((done) => setTimeout(done, 50));
  const input = upload() && upload().parentElement.querySelector('input[type=file]');
  if (!input) return;
  const files = new DataTransfer();
  files.items.add(new File([text], 'load-request.json', {type: 'application/json'}));
  input.files = files.files;
  input.dispatchEvent(new Event('change', {bubbles: true}));
  window.scrollTo({top: 0});
}
"""


def load_section(large: gr.Checkbox, width: gr.Number, class_log: ClassLog | None = None,
                 assets_dir: Path = ASSETS_DIR) -> None:
    """The section's components and events, inside the Explore tab; `class_log` holds the Run tab's vLLM runs."""
    handlers = LoadHandlers(*recorded_load(assets_dir), class_log)
    first = handlers.first()
    gr.HTML(INTRO, js_on_load=LOAD_JS, elem_id="sv-load", padding=False)
    state = gr.State(None)           # None: the recorded run (why: specviz/run/tab.py)
    point = gr.State(None)           # the class drawn as a star, once its button is pressed
    with gr.Row(elem_id="sv-load-main", equal_height=False):
        with gr.Column(scale=1, min_width=300, elem_id="sv-load-controls"):
            status = gr.Markdown(first.status, elem_id="sv-load-status", elem_classes=["sv-note"])
            level = gr.Radio(label="Concurrency level", info=PICK_LEVEL, elem_id="sv-load-level",
                             choices=first.level["choices"])
            request = gr.Radio(label="Requests", choices=[], visible=False, elem_id="sv-load-request")
            open_button = gr.Button("Open the request on the Run tab", elem_id="sv-load-open")
            trace_json = gr.Textbox(visible=False, elem_id="sv-load-trace")
            upload = gr.UploadButton("Upload a load run (specviz.load/1 JSON)", file_types=[".json"], type="binary",
                                     elem_id="sv-load-upload")
            class_button = gr.Button("Draw this page's class on the chart", elem_id="sv-load-class-button")
            class_note = gr.Markdown(CLASS_INFO, elem_id="sv-load-class", elem_classes=["sv-note"])
        with gr.Column(scale=3, min_width=320, elem_id="sv-load-charts"):
            charts = {name: gr.Plot(getattr(first, name), show_label=False, elem_id=f"sv-load-{name.replace('_', '-')}")
                      for name in ("ratio", "throughput", "acceptance", "step_cost")}
    outputs = [state, status, *charts.values(), level, request]
    upload.upload(handlers.upload, inputs=[upload, large, width, point], outputs=outputs, concurrency_limit=2,
                  api_name="load_upload", api_visibility="private")
    level.input(handlers.select_level, inputs=[state, level], outputs=[request], show_progress="hidden",
                concurrency_limit=None, api_name="load_level", api_visibility="private")
    open_button.click(handlers.open_request, inputs=[state, level, request], outputs=[trace_json],
                      show_progress="hidden", concurrency_limit=None, api_name="load_open",
                      api_visibility="private").success(None, inputs=[trace_json], js=OPEN_JS)
    class_button.click(handlers.show_class, inputs=[state, large, width], outputs=[point, class_note,
                                                                                 charts["throughput"]],
                       show_progress="hidden", concurrency_limit=None, api_name="load_class",
                       api_visibility="private")
    for source in (large, width):
        source.change(handlers.restyle, inputs=[state, status, large, width, point], outputs=list(charts.values()),
                      show_progress="hidden", concurrency_limit=None, api_name="load_restyle",
                      api_visibility="private")
