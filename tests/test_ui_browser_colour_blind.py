"""Deuteranopia (issue #27), on screenshots of the page in Debian's chromium: every kind keeps a pattern or
line style in every view, so a student who cannot tell green from red tells the kinds apart.

The page shows the bundled greedy and sampled runs and a token tree. For each view (the token timeline, the
draft tree, the step panel's token chips, the output text, the residual's sum at a sampled rejection) the
test takes a screenshot with the token texts hidden (only fills and lines are compared), simulates
deuteranopia on it (tests/colour_vision.py: Machado et al. 2009) and cuts out one cell of each kind. Then, in
each view, at most one kind may be a plain solid fill, and every two kinds must differ in pattern or line
style after the simulation: colour alone does not count. A second test plants the bug (the bonus token loses
its pattern in the figures, its dots in the chips, its double line in the text) and watches the check catch
it in every view. The simulated screenshots land in test-artifacts/deuteranopia-<view>.png for a person to
look at.
"""

from __future__ import annotations

from io import BytesIO
from itertools import combinations

import numpy as np
import pytest
from PIL import Image

import specviz.style
from colour_vision import deuteranopia, texture, texture_distance
from fakes import FakeRunner
from specviz.assets import DEMO_TRACE, SAMPLED_TRACE, DemoTrace, load_demo_trace
from specviz.run.recorded import choice_label
from test_ui_browser import ARTIFACTS, open_page
from tree_factory import make_tree_trace
from ui_server import serve

pytestmark = pytest.mark.browser

MIN_DISTANCE = 0.5       # texture_distance between two kinds' patterns (0: the same; measured apart: 0.99 and up)
TREE_TRACE = "tree (made up).json"
# Only fills and lines are compared: the token texts, node ids, tree edges and highlights are hidden.
HIDE_TEXT = """.js-plotly-plot .bartext, .js-plotly-plot .annotation, .js-plotly-plot .scatterlayer,
    .js-plotly-plot .shapelayer { visibility: hidden !important; }
    .sv-tok, .sv-out { color: transparent !important; text-shadow: none !important; }"""
# The planted bug: the bonus token's chips and text lose their dots and double line, and its text tint its
# lightness step (issue #33): it differs from an accepted token by hue alone. (A chip's fill covers its whole box
# again: its text's plain fill is clipped to the content box, under the pattern's frame.)
PLAIN_BONUS = """.sv-tok.sv-bonus { background-image: none !important; background-clip: border-box !important; }
    .sv-out.sv-bonus { border-bottom: 3px solid #00634a !important;
                       background: rgba(204, 121, 167, 0.12) !important; }"""
BARS_JS = """(selector) => {
    const plot = document.querySelector(`${selector} .js-plotly-plot`);
    const cells = {};
    for (const trace of plot.querySelectorAll('.barlayer .trace')) {
        const meta = trace.__data__?.[0]?.trace?.meta;
        if (typeof meta !== 'string') continue;
        for (const bar of trace.querySelectorAll('.point path')) {
            const r = bar.getBoundingClientRect();
            (cells[meta] = cells[meta] || []).push([r.left + scrollX, r.top + scrollY, r.width, r.height]);
        }
    }
    return cells;
}"""
BOXES_JS = """([selector, kinds]) => Object.fromEntries(kinds.map(kind => [kind,
    [...document.querySelectorAll(selector.replaceAll('KIND', kind))].filter(e => e.getClientRects().length > 0)
        .map(e => { const r = e.getBoundingClientRect(); return [r.left + scrollX, r.top + scrollY, r.width, r.height]; })]))"""
TOKENS = ("accepted", "rejected", "unverified", "recovered", "bonus", "carryover")
OUTPUT = ("accepted", "recovered", "bonus")
TREE_KINDS = ("accepted", "rejected", "unreached", "recovered", "bonus", "context")
VIEWS = {"timeline": TOKENS, "step chips": TOKENS, "output text": OUTPUT, "residual sum": ("accepted", "recovered"),
         "tree": TREE_KINDS}


@pytest.fixture(scope="module")
def app():
    """The bundled greedy and sampled runs and a made-up tree run (recovered and bonus steps) to choose from."""
    bundled = dict(load_demo_trace().choices)
    choices = ((DEMO_TRACE, bundled[DEMO_TRACE]), (SAMPLED_TRACE, bundled[SAMPLED_TRACE]),
               (TREE_TRACE, make_tree_trace()))
    demo, url = serve(FakeRunner(), demo_trace=DemoTrace(choices[0][1], DEMO_TRACE, (), choices))
    yield url
    demo.close()


def simulated(page, name: str) -> np.ndarray:
    """The whole page as a deuteranope sees it, saved for a person to look at."""
    shot = np.asarray(Image.open(BytesIO(page.screenshot(full_page=True))).convert("RGB"))
    seen = deuteranopia(shot)
    ARTIFACTS.mkdir(exist_ok=True)
    Image.fromarray(seen.astype(np.uint8)).save(ARTIFACTS / f"deuteranopia-{name}.png")
    return seen


def patches(image: np.ndarray, boxes: dict[str, list], inset: int = 3, least: tuple[int, int] = (12, 8),
            inset_x: int | None = None) -> dict:
    """Each kind's largest box, cut out of `image` (`inset` pixels in from its edges; `inset_x` from its left
    and right ones, where that differs: an output token's box is rounded to whole pixels, and a column of its
    neighbour's tint at its edge reads as a vertical line)."""
    cut, side = {}, inset if inset_x is None else inset_x
    for kind, found in boxes.items():
        found = [box for box in found if box[2] >= least[0] + 2 * side and box[3] >= least[1] + 2 * inset]
        if not found:
            continue
        left, top, width, height = (round(v) for v in max(found, key=lambda box: box[2] * box[3]))
        cut[kind] = image[top + inset: top + height - inset, left + side: left + width - side]
    return cut


def problems(view: str, cut: dict, kinds: tuple[str, ...]) -> list[str]:
    """What a deuteranope could not tell apart in this view (a kind missing from the screen counts too)."""
    found = [f"{view}: no {kind} cell on screen to check" for kind in kinds if kind not in cut]
    textures = {kind: texture(patch) for kind, patch in cut.items() if kind in kinds}
    solid = [kind for kind, seen in textures.items() if seen.solid]
    if len(solid) > 1:
        found.append(f"{view}: {', '.join(solid)} are all plain fills: only colour tells them apart")
    for a, b in combinations(textures, 2):
        distance = texture_distance(textures[a], textures[b])
        if distance < MIN_DISTANCE:
            found.append(f"{view}: {a} and {b} share one pattern (distance {distance:.2f} < {MIN_DISTANCE})")
    return found


def choose(page, label: str, first: int = 0) -> None:
    """Show the recorded run whose label holds `label`, at its first step."""
    page.locator("#sv-recorded label", has_text=label).click()
    page.wait_for_function(f"() => document.querySelector('#sv-recorded input:checked')?.parentElement.innerText"
                           f".includes('{label}')")
    page.wait_for_function(f"() => document.querySelector('#sv-detail').innerText.startsWith('Step {first} ')")


def next_step(page, index: int) -> None:
    """Click Next until the step panel shows step `index`."""
    page.click("#sv-next")
    page.wait_for_function(f"() => document.querySelector('#sv-detail').innerText.startsWith('Step {index} ')")


def chips(page, image: np.ndarray) -> dict:
    return patches(image, page.evaluate(BOXES_JS, ["#sv-detail .sv-tok.sv-KIND", list(TOKENS)]), inset=2,
                   least=(10, 8))


def every_view(page, planted: str = "", prefix: str = "") -> dict[str, dict]:
    """One patch per kind of every view, from simulated screenshots (the greedy run at steps 0 and 2, the sampled
    run at its first recorded residual, the tree run at steps 0 and 1). `planted`: CSS added after the page opened;
    `prefix` starts the saved screenshots' names."""
    page.add_style_tag(content=HIDE_TEXT + planted)
    views: dict[str, dict] = {}
    choose(page, "sampled")                   # the runs are drawn after the page opened (a planted bug included)
    sampled = dict(load_demo_trace().choices)[SAMPLED_TRACE]
    rejection = next(step.index for step in sampled.steps if step.rejected_at is not None and step.residual)
    for index in range(1, rejection + 1):
        next_step(page, index)
    page.locator("#sv-detail .sv-sum-chart").scroll_into_view_if_needed()
    image = simulated(page, prefix + "run-sampled-residual")
    views["residual sum"] = patches(image, page.evaluate(
        BOXES_JS, ["#sv-detail .sv-sum-row .sv-sum-KIND", ["accepted", "recovered"]]), inset=2, least=(10, 8))

    choose(page, choice_label(dict(load_demo_trace().choices)[DEMO_TRACE]))
    image = simulated(page, prefix + "run-greedy-step0")
    views["timeline"] = patches(image, page.evaluate(BARS_JS, "#sv-timeline"))
    views["output text"] = patches(image, page.evaluate(
        BOXES_JS, ["#sv-output .sv-text .sv-out.sv-KIND:not(.sv-selected)", list(OUTPUT)]), inset=0, least=(14, 10),
        inset_x=1)
    views["step chips"] = chips(page, image)
    next_step(page, 1)
    next_step(page, 2)                        # a full accept: the bonus and the carryover chips
    image = simulated(page, prefix + "run-greedy-step2")
    views["step chips"] |= {k: v for k, v in chips(page, image).items() if k not in views["step chips"]}

    choose(page, "tree")
    page.wait_for_selector("#sv-tree .js-plotly-plot", state="visible")
    views["tree"] = {}
    for step in (0, 1):                       # step 0 ends in a recovered token, step 1 in a bonus one
        if step:
            next_step(page, step)
        page.wait_for_function(f"() => document.querySelector('#sv-tree .js-plotly-plot').layout.title.text"
                               f".includes('step {step}')")
        image = simulated(page, f"{prefix}tree-step{step}")
        cells = {kind: boxes for kind, boxes in page.evaluate(BARS_JS, "#sv-tree").items() if kind in TREE_KINDS}
        views["tree"] |= {k: v for k, v in patches(image, cells).items() if k not in views["tree"]}
    return views


def test_every_kind_keeps_a_pattern_under_deuteranopia(browser, app):
    page = open_page(browser, app, width=1400, height=1000)
    views = every_view(page)
    page.close()
    found = [problem for view, kinds in VIEWS.items() for problem in problems(view, views[view], kinds)]
    assert not found, "\n".join(found)


def test_a_kind_that_loses_its_pattern_is_caught(browser, app, monkeypatch):
    """The planted bug: the bonus token drawn plain, in the figures (PATTERNS) and on the page (CSS)."""
    monkeypatch.setitem(specviz.style.PATTERNS, "bonus", "")
    page = open_page(browser, app, width=1400, height=1000)
    views = every_view(page, planted=PLAIN_BONUS, prefix="planted-")
    page.close()
    for view in ("timeline", "step chips", "output text", "tree"):
        caught = [problem for problem in problems(view, views[view], VIEWS[view]) if "bonus" in problem]
        assert caught, f"{view}: a plain bonus token went unnoticed"
