"""The Run tab teaches from the bundled traces alone, in Debian's chromium (Playwright): both
recorded runs (greedy and sampled) are offered on the first screen; each step's detail states
the record's cache arithmetic; the output outlines the selected step's tokens; at a sampled
rejection the residual is drawn with the recovered token marked; token kinds differ by pattern
as well as colour; every tab names each quantity (r, α, τ) with one name and one tooltip. Every wait is for the exact page state asserted, never for time.
Screenshots (desktop, large text, phone) land in test-artifacts/ for a person to look at.
"""

from __future__ import annotations

import pytest

from fakes import FakeRunner
from specviz.assets import DEMO_TRACE, SAMPLED_TRACE, load_demo_trace
from specviz.quantities import QUANTITIES
from specviz.run.recorded import choice_label
from test_ui_browser import ARTIFACTS, CELLS_JS, open_page
from ui_server import serve

pytestmark = pytest.mark.browser

BY_KEY = {quantity.key: quantity for quantity in QUANTITIES}
DETAIL_JS = "() => document.querySelector('#sv-detail').innerText"
SELECTED_JS = """() => Array.from(document.querySelectorAll('#sv-output .sv-out.sv-selected[title]'))
    .map(span => span.title.split(':')[0])"""
PATTERNS_JS = """() => Object.fromEntries(document.querySelector('#sv-timeline .js-plotly-plot').data
    .map(t => [t.meta, t.marker && t.marker.pattern ? t.marker.pattern.shape : ''])
)"""


@pytest.fixture(scope="module")
def recorded():
    demo = load_demo_trace()
    traces = dict(demo.choices)
    assert demo.name == DEMO_TRACE and SAMPLED_TRACE in traces, "both bundled traces must load"
    return traces


@pytest.fixture(scope="module")
def bundled_app(recorded):
    demo, url = serve(FakeRunner(), demo_trace=load_demo_trace())
    yield url
    demo.close()


def wait_step(page, index):
    page.wait_for_function(f"({DETAIL_JS})().startsWith('Step {index} ')")


def go_to(page, current, index):
    """Click Next until the detail shows step `index` (waiting for each step's detail)."""
    for step in range(current + 1, index + 1):
        page.click("#sv-next")
        wait_step(page, step)


def cut_sentence(step):
    k, kept = step.k, step.num_kept
    if k == kept:
        return f"All {k} drafts were accepted and kept: nothing to cut."
    cut = step.kv_target.cutoff
    return f"so {cut} position{'s' * (cut != 1)} {'is' if cut == 1 else 'are'} cut: k − accepted = {k} − {kept} = {cut}."


def test_the_first_screen_offers_greedy_and_sampled_and_every_step_explains_itself(browser, bundled_app, recorded):
    greedy, sampled = recorded[DEMO_TRACE], recorded[SAMPLED_TRACE]
    page = open_page(browser, bundled_app, width=1400, height=1000)
    options = page.locator("#sv-recorded label").all_inner_texts()
    assert any(text.startswith("greedy (T = 0)") for text in options)
    assert any(text.startswith(f"sampled (T = {sampled.config.temperature:g})") for text in options)
    wait_step(page, 0)
    first = greedy.steps[0]
    detail = page.evaluate(DETAIL_JS)
    assert cut_sentence(first) in detail and f"the prompt's {first.context_len} tokens" in detail
    assert "max(0, p − q)" not in detail                       # greedy: the argmax, never the residual
    patterns = page.evaluate(PATTERNS_JS)
    assert patterns["bonus"] and patterns["recovered"] and patterns["rejected"]
    assert len({patterns["bonus"], patterns["recovered"], patterns["rejected"]}) == 3 and not patterns["accepted"]
    page.screenshot(path=str(ARTIFACTS / "teaching-greedy-step0-desktop.png"), full_page=True)

    go_to(page, 0, 1)                     # a full accept: the bonus and where it goes next
    step = greedy.steps[1]
    detail = page.evaluate(DETAIL_JS)
    assert cut_sentence(step) in detail and "one position behind the target" in detail
    page.wait_for_function(f"({SELECTED_JS})().length === {step.num_emitted}")
    assert set(page.evaluate(SELECTED_JS)) == {"step 1"}

    page.locator("#sv-recorded label", has_text=choice_label(sampled)).click()   # not a vLLM sampled run
    recovered = sum(token.kind == "recovered" for s in sampled.steps for token in s.emitted)
    page.wait_for_function(f"({CELLS_JS})('recovered') === {recovered}")
    wait_step(page, sampled.steps[0].index)
    page.wait_for_function("() => document.querySelector('#sv-temperature input[type=number]').value"
                           f" === '{sampled.config.temperature:g}'")
    rejection = next(s for s in sampled.steps if s.rejected_at is not None and s.residual)
    go_to(page, sampled.steps[0].index, rejection.index)
    detail = page.evaluate(DETAIL_JS)
    position = rejection.rejected_at
    ratio, draw = rejection.accept_prob[position], rejection.draws[position]
    assert f"u = {draw:.3f} ≥ {ratio:.3f}: reject" in detail
    assert "◀ drawn here" in detail and "norm(max(0, p − q))" in detail
    assert cut_sentence(rejection) in detail
    page.locator("#sv-detail .sv-residual").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "teaching-sampled-rejection-desktop.png"), full_page=True)

    assert page.locator("#sv-recorded input:checked").count() == 1
    page.click("#sv-run")                 # a run of one's own replaces the recorded one: none stays ticked
    page.wait_for_function("() => document.querySelectorAll('#sv-recorded input:checked').length === 0")
    assert page.inner_text("#sv-status").startswith("Done")
    page.close()


def test_large_text_and_phone_screens_keep_the_explanations(browser, bundled_app, recorded):
    greedy = recorded[DEMO_TRACE]
    page = open_page(browser, bundled_app, width=1400, height=1000)
    page.click("#sv-large input")
    page.wait_for_function("() => document.querySelector('#sv-timeline .js-plotly-plot').layout.font.size >= 18")
    wait_step(page, 0)
    assert cut_sentence(greedy.steps[0]) in page.evaluate(DETAIL_JS)
    page.screenshot(path=str(ARTIFACTS / "teaching-large-text.png"), full_page=True)
    page.close()
    phone = open_page(browser, bundled_app, width=390, height=844)
    wait_step(phone, 0)
    assert cut_sentence(greedy.steps[0]) in phone.evaluate(DETAIL_JS)
    phone.screenshot(path=str(ARTIFACTS / "teaching-phone.png"), full_page=True)
    phone.close()


QUANTITIES_JS = """() => [...document.querySelectorAll('[data-quantity]')].filter(e => e.getClientRects().length > 0)
    .map(e => [e.dataset.quantity, e.title, e.querySelector('.sv-card-label')?.innerText ?? e.innerText])"""


def test_every_tab_names_each_quantity_with_one_name_and_one_tooltip(browser, bundled_app):
    """The Run, Explore and Lab tabs as a student hovers them: each quantity shown has its one tooltip."""
    page = open_page(browser, bundled_app, width=1400, height=1000)
    seen: dict[str, dict[str, set[str]]] = {}
    for tab, ready in (("Run", "#sv-metrics .sv-card"), ("Explore", "#sv-multiply-note"),
                       ("Lab", "#sv-lab-verdict .sv-card")):
        page.get_by_role("tab", name=tab, exact=True).click()
        page.wait_for_selector(ready, state="visible")
        for key, title, label in page.evaluate(QUANTITIES_JS):
            seen.setdefault(key, {}).setdefault(title, set()).add(tab)
            assert label.strip() in (BY_KEY[key].label, BY_KEY[key].symbol), f"{tab}: {key} is named {label!r}"
    page.close()
    assert {key: set().union(*tabs.values()) for key, tabs in seen.items()}["tokens_per_step"] == {"Run", "Explore",
                                                                                                    "Lab"}
    for key, titles in seen.items():
        assert list(titles) == [BY_KEY[key].tip], f"{key} has {len(titles)} tooltips: {titles}"


MARK_JS = """() => {
    const mark = document.querySelector('#sv-detail .sv-picked-mark');
    const row = mark.closest('.sv-sum-row'), numbers = row.querySelector('.sv-bar-value').firstChild;
    const range = document.createRange();
    range.selectNodeContents(numbers);
    const lines = [...range.getClientRects()], last = lines[lines.length - 1], box = mark.getBoundingClientRect();
    const middle = (box.top + box.bottom) / 2, rowBox = row.getBoundingClientRect();
    return {onLastLine: last.top <= middle && middle <= last.bottom, inRow: rowBox.top <= box.top && box.bottom <= rowBox.bottom,
            rightOfNumbers: box.left >= last.right - 1};
}"""


@pytest.mark.parametrize("width, height, large", [(1280, 720, True), (390, 844, False)])
def test_the_drawn_mark_stays_on_its_row_beside_the_numbers(browser, bundled_app, recorded, width, height, large):
    """Issue #33 item 2 review: at 1280x720 with large text and at 390x844 '◀ drawn here' wrapped onto a line of
    its own between the residual's rows, pointing at nothing. It must sit on its row's last line of numbers, right
    of them (the old markup, the mark a flex item of its own: caught at both sizes)."""
    sampled = recorded[SAMPLED_TRACE]
    page = open_page(browser, bundled_app, width=width, height=height)
    if large:
        page.click("#sv-large input")
        page.wait_for_function("() => document.querySelector('#sv-timeline .js-plotly-plot').layout.font.size >= 18")
    page.locator("#sv-recorded label", has_text=choice_label(sampled)).click()   # not a vLLM sampled run
    wait_step(page, sampled.steps[0].index)
    rejection = next(s for s in sampled.steps if s.rejected_at is not None and s.residual)
    go_to(page, sampled.steps[0].index, rejection.index)
    page.wait_for_selector("#sv-detail .sv-picked-mark")
    page.locator("#sv-detail .sv-picked-mark").scroll_into_view_if_needed()
    assert page.evaluate(MARK_JS) == {"onLastLine": True, "inRow": True, "rightOfNumbers": True}
    page.screenshot(path=str(ARTIFACTS / f"teaching-drawn-mark-{width}x{height}.png"), full_page=True)
    page.close()
