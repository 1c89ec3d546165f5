"""The tour in the browser (the tour view's `js_on_load`): Back / Next, the chapter list, the arrow keys and a
link (`?tour=4` or `#tour=4` opens the page at chapter 4), and "Hide text", which folds the sheet to its buttons. Showing a chapter sets its view the way a student
would (the tab, the recorded run, the step slider, the Lab's stage), waits for the page to draw it (a step only when the scrubber's box holds it too), outlines the
chapter's element (a CSS rule on its selector, which outlives the redraws that replace the element; the root's
`data-outline` names it) and scrolls it, or the part of it the chapter's question reads (`focus`), into the part
of the screen the sheet leaves free; the large-text switch
sets the chapter again once the page is redrawn. A newer chapter cancels an older one's waits. The root gets
`data-ready="<chapter>"` (what the browser tests wait for) only when the view holds and the element (or the part its
question reads) has stayed put for three looks; a view it could not set is said in the sheet's status line and in `data-error`."""

from __future__ import annotations

from specviz.style import TOUR_OUTLINE_CSS, FigureStyle

TOUR_JS = """
const root = element.querySelector('.sv-tour');
if (root) {
const sheet = root.querySelector('.sv-tour-sheet');
const chapters = Array.from(root.querySelectorAll('.sv-tour-chapter'));
const list = root.querySelector('.sv-tour-list');
const link = root.querySelector('.sv-tour-link');
const status = root.querySelector('.sv-tour-status');
const pickLabel = root.querySelector('.sv-tour-pick-label');
const fold = root.querySelector('.sv-tour-fold');
function folded(on) {     // the sheet folded to its buttons, or open with the chapter's words
  root.dataset.folded = on ? '1' : '0';
  fold.setAttribute('aria-expanded', on ? 'false' : 'true');
  fold.setAttribute('aria-label', on ? 'Show the chapter text' : 'Hide the chapter text');
  fold.title = on ? 'Show the chapter text again' : 'Hide the chapter text, to see the page under it';
  fold.firstChild.textContent = on ? '▴' : '▾';
  fold.querySelector('.sv-tour-word').textContent = on ? ' Show text' : ' Hide text';
}
const outline = document.createElement('style');
outline.id = 'sv-tour-outline';
document.head.appendChild(outline);
let current = 0, ticket = 0;
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));
const shown = (e) => !!e && e.getClientRects().length > 0;
const text = (selector) => { const e = document.querySelector(selector); return e ? e.innerText : ''; };
async function until(test, ms = 30000) {      // a newer chapter (or Close) cancels the wait
  const mine = ticket, end = performance.now() + ms;
  while (performance.now() < end) {
    if (mine !== ticket) throw new Error('cancelled');
    try { if (test()) return true; } catch (error) { /* the page is still drawing */ }
    await sleep(80);
  }
  return false;
}
// A step shows when the step panel's heading names it and the scrubber's box and range hold it too: a redraw
// answered after the slide (a restyle sent before it) can set the scrubber back while the heading moves on.
const scrubberAt = (slider, step) => {
  const inputs = Array.from(document.querySelectorAll(slider + ' input'));
  return inputs.length > 0 && inputs.every((input) => Number(input.value) === Number(step));
};
const stepShown = (box, slider, step) => new RegExp('^Step ' + step + '(\\\\D|$)').test(text(box + ' .sv-step-no'))
  && scrubberAt(slider, step);
async function toStep(box, slider, step) {    // slide, and slide again if a redraw of the tab reset the slider
  await until(() => document.querySelector(slider + ' input[type=range]'));
  for (let attempt = 0; attempt < 20; attempt++) {
    if (stepShown(box, slider, step)) return true;
    slide(slider, step);
    if (await until(() => stepShown(box, slider, step), 1500)) return true;
  }
  return false;
}
function slide(selector, value) {
  const range = document.querySelector(selector + ' input[type=range]');
  if (!range) return false;
  range.value = value;
  range.dispatchEvent(new Event('input', {bubbles: true}));
  range.dispatchEvent(new Event('change', {bubbles: true}));
  range.dispatchEvent(new PointerEvent('pointerup', {bubbles: true}));
  return true;
}
async function choose(selector, value, changed) {
  const radio = document.querySelector(selector + ' input[value="' + CSS.escape(value) + '"]');
  if (!radio) return false;
  if (radio.checked) return true;
  const before = text(changed);
  radio.click();
  return until(() => text(changed) !== before);
}
async function setView(view) {
  const tab = document.getElementById('sv-tab-' + view.tab + '-button');
  if (!tab) throw new Error('there is no ' + view.tab + ' tab');
  if (tab.getAttribute('aria-selected') !== 'true') tab.click();
  if (!await until(() => shown(document.getElementById('sv-tab-' + view.tab)))) throw new Error('the tab did not open');
  if (view.recorded && !await choose('#sv-recorded', view.recorded, '#sv-status'))
    throw new Error('the recorded run ' + view.recorded + ' is not offered');
  if (view.step !== undefined && !await toStep('#sv-detail', '#sv-scrubber', view.step))
    throw new Error('step ' + view.step + ' did not show');
  if (view.lab_stage) {
    await until(() => document.querySelector('#sv-lab-stage input'));
    if (!await choose('#sv-lab-stage', view.lab_stage, '#sv-lab-explanation'))
      throw new Error('the Lab has no stage ' + view.lab_stage);
  }
  if (view.lab_step !== undefined && !await toStep('#sv-lab-detail', '#sv-lab-scrubber', view.lab_step))
    throw new Error('Lab step ' + view.lab_step + ' did not show');
  let target = null;
  if (!await until(() => shown(target = document.querySelector(view.outline))))
    throw new Error('nothing to outline at ' + view.outline);
  return target;
}
function holds(view) {     // the chapter's view is on screen
  const tab = document.getElementById('sv-tab-' + view.tab + '-button');
  const checked = (selector, value) => { const radio = document.querySelector(selector + ' input[value="' +
    CSS.escape(value) + '"]'); return !!radio && radio.checked; };
  return !!tab && tab.getAttribute('aria-selected') === 'true' && shown(document.querySelector(view.outline))
    && (!view.recorded || (checked('#sv-recorded', view.recorded) && text('#sv-status').includes(view.recorded)))
    && (view.step === undefined || stepShown('#sv-detail', '#sv-scrubber', view.step))
    && (!view.lab_stage || checked('#sv-lab-stage', view.lab_stage))
    && (view.lab_step === undefined || stepShown('#sv-lab-detail', '#sv-lab-scrubber', view.lab_step));
}
function free() {         // the part of the screen the sheet leaves: [0, bottom)
  return root.dataset.open === '1' ? sheet.getBoundingClientRect().top : innerHeight;
}
function span(target, view) {   // the element, or the part of it the chapter reads: focus, down to focus_end
  const part = (view.focus && document.querySelector(view.focus)) || target, box = part.getBoundingClientRect();
  const end = view.focus_end && document.querySelector(view.focus_end);
  if (!end) return {top: box.top, bottom: box.bottom, height: box.height};
  const last = end.getBoundingClientRect(), top = Math.min(box.top, last.top), bottom = Math.max(box.bottom, last.bottom);
  return {top, bottom, height: bottom - top};
}
function bring(target, view) {   // that part into the screen the sheet leaves, centred where it fits
  const box = span(target, view);
  const room = free();
  const top = box.height < room - 16 ? Math.max(8, (room - box.height) / 2) : 8;
  window.scrollBy(0, box.top - top);
}
function pad() { document.body.style.paddingBottom = root.dataset.open === '1' ? sheet.offsetHeight + 'px' : ''; }
async function show(n) {
  n = Math.min(Math.max(1, n), chapters.length);
  current = n;
  const mine = ++ticket;
  root.dataset.open = '1';
  delete root.dataset.ready;
  delete root.dataset.error;
  chapters.forEach((chapter, i) => { chapter.hidden = i !== n - 1; });
  chapters[n - 1].querySelector('details').open = false;
  sheet.scrollTop = 0;                                      // a chapter reads from its top
  list.value = String(n);
  pickLabel.textContent = 'Chapter ' + n + ' of ' + chapters.length + ' ▾';
  folded(false);                                            // a new chapter's words are read first
  link.href = location.pathname + '?tour=' + n;
  root.querySelector('.sv-tour-back').disabled = n === 1;
  root.querySelector('.sv-tour-next').disabled = n === chapters.length;
  const params = new URLSearchParams(location.search);     // a link that opened a chapter follows the tour
  if (params.has('tour')) {
    params.set('tour', String(n));
    history.replaceState(null, '', location.pathname + '?' + params + location.hash);
  } else if (location.hash.startsWith('#tour=')) {
    history.replaceState(null, '', location.pathname + location.search + '#tour=' + n);
  }
  pad();
  status.textContent = 'Setting the view…';
  outline.textContent = '';
  delete root.dataset.outline;
  delete root.dataset.focus;
  delete root.dataset.focusEnd;
  try {
    const view = JSON.parse(chapters[n - 1].dataset.view);
    await setView(view);
    if (mine !== ticket) return;
    outline.textContent = view.outline + ' { OUTLINE_CSS }';
    root.dataset.outline = view.outline;
    if (view.focus) root.dataset.focus = view.focus;
    if (view.focus_end) root.dataset.focusEnd = view.focus_end;
    // Settle: a response still on its way (a tab's refit, a redraw of the run) can move the element or undo the
    // view; set it again or scroll again until the view holds and the element stays put.
    // Three still looks, for as long as a busy machine needs: a CI run under two workers once found the part
    // off-screen at "ready" (moved after two still looks, or still moving at the old ten seconds' bound); a minute is
    // the most a page gets before it is called ready anyway.
    let last = null, still = 0;
    for (let look = 0; look < 240 && still < 3; look++) {
      await sleep(250);
      if (mine !== ticket) return;
      if (!holds(view)) { last = null; still = 0; await setView(view); continue; }
      // the part the question reads, where it names one: its rows can grow under a still element (large text's
      // stacked table redrawn after the scroll put the row off-screen on a busy machine)
      const target = document.querySelector(view.outline);
      const watched = () => { const r = span(target, view); return [r.top, r.bottom]; };
      const [top, bottom] = watched();
      if (last !== null && Math.abs(top - last[0]) < 1 && Math.abs(bottom - last[1]) < 1) { still++; continue; }
      still = 0;
      bring(target, view);
      last = watched();
    }
    if (mine !== ticket) return;
    status.textContent = view.shows && !text(view.shows[0]).includes(view.shows[1])
      ? 'This tab now shows a run of your own, not the recording this chapter quotes: reload the page to see it.' : '';
    root.dataset.ready = String(n);
  } catch (error) {
    if (mine !== ticket) return;
    status.textContent = 'This chapter could not set its view: ' + error.message + '.';
    root.dataset.error = error.message;
  }
}
function close() {
  ticket++;
  root.dataset.open = '0';
  outline.textContent = '';
  delete root.dataset.outline;
  delete root.dataset.focus;
  delete root.dataset.focusEnd;
  pad();
}
root.querySelector('.sv-tour-open').addEventListener('click', () => show(current || 1));
root.querySelector('.sv-tour-back').addEventListener('click', () => show(current - 1));
root.querySelector('.sv-tour-next').addEventListener('click', () => show(current + 1));
root.querySelector('.sv-tour-close').addEventListener('click', close);
fold.addEventListener('click', () => folded(root.dataset.folded !== '1'));
list.addEventListener('change', () => show(Number(list.value)));
new ResizeObserver(pad).observe(sheet);
document.addEventListener('change', async (event) => {    // large text regrows the page: set the chapter again
  const large = event.target.closest && event.target.closest('#sv-large input');
  if (!large || root.dataset.open !== '1') return;
  const mine = ++ticket;
  delete root.dataset.ready;
  const big = large.checked;
  await until(() => Array.from(document.querySelectorAll('.js-plotly-plot')).filter(shown)
    .every((p) => p.layout && p.layout.font && (p.layout.font.size >= LARGE_FONT) === big));
  if (mine === ticket) show(current);
});
document.addEventListener('keydown', (event) => {
  if (root.dataset.open !== '1' || event.altKey || event.ctrlKey || event.metaKey) return;
  if (event.target.closest && event.target.closest('input, textarea, select, [contenteditable=true]')) return;
  if (event.key === 'ArrowRight' && current < chapters.length) { event.preventDefault(); show(current + 1); }
  else if (event.key === 'ArrowLeft' && current > 1) { event.preventDefault(); show(current - 1); }
  else if (event.key === 'Escape') close();
});
const asked = new URLSearchParams(location.search).get('tour') || (location.hash.match(/^#tour=(\\d+)/) || [])[1];
if (asked && Number(asked) >= 1)
  until(() => document.querySelector('#sv-timeline .js-plotly-plot')).then(() => show(Number(asked)));
}
""".replace("OUTLINE_CSS", TOUR_OUTLINE_CSS).replace("LARGE_FONT", str(FigureStyle.for_screen(large=True).font_size))
