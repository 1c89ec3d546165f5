"""The race replay, in the browser: the lanes' tokens appear at their recorded times
(`data-t`, seconds), each lane's clock, token count, tokens/s and bar update every frame,
and a lane that has shown all its tokens and reached its recorded end says it finished,
with its place. Driven by the page's clock (requestAnimationFrame), never by the server, so
a busy server cannot make the replay stutter.

`PLAYER_JS` is the race view's `js_on_load` (gr.HTML): it plays once when the view first
becomes visible, again whenever a new race arrives, and on the `sv-race-replay` event
(`REPLAY_JS`, the Replay button) at the chosen speed. The clocks always show recorded time.
While playing, the view's root has `data-state="playing"`, then `"done"`; each lane's
`data-shown` counts its tokens on screen (what the browser tests wait for).
"""

from __future__ import annotations

from specviz.style import COLORS

REPLAY_EVENT = "sv-race-replay"

PLAYER_JS = """
const state = {frame: 0, speed: 1};
function play(speed) {
  const root = element.querySelector('.sv-race');
  if (!root || !root.querySelector('.sv-lane')) return;
  cancelAnimationFrame(state.frame);
  state.speed = Number(speed) > 0 ? Number(speed) : state.speed;
  const lanes = Array.from(root.querySelectorAll('.sv-lane')).map((lane) => ({
    lane, items: Array.from(lane.querySelectorAll('[data-t]')), wall: Number(lane.dataset.wall),
    total: Number(lane.dataset.total), next: 0, shown: 0, forwards: 0, done: false,
    clock: lane.querySelector('.sv-clock'), count: lane.querySelector('.sv-count'),
    rate: lane.querySelector('.sv-rate'), fwd: lane.querySelector('.sv-forwards'),
    fill: lane.querySelector('.sv-lane-fill'), place: lane.querySelector('.sv-lane-place'),
    text: lane.querySelector('.sv-lane-text')}));
  root.dataset.state = 'playing';
  root.dataset.played = '1';
  let finished = 0;
  for (const l of lanes) {
    l.items.forEach((item) => item.classList.remove('sv-on'));
    l.lane.dataset.shown = '0';
    l.lane.dataset.state = 'running';
    l.place.textContent = 'running';
  }
  const start = performance.now();
  const tick = (now) => {
    if (!root.isConnected) return;
    const t = (now - start) / 1000 * state.speed;
    for (const l of lanes) {
      if (l.done) continue;
      while (l.next < l.items.length && Number(l.items[l.next].dataset.t) <= t) {
        const item = l.items[l.next++];
        item.classList.add('sv-on');
        l.shown += Number(item.dataset.n);
        l.forwards += Number(item.dataset.f);
        l.text.scrollTop = l.text.scrollHeight;
      }
      const elapsed = Math.min(t, l.wall);
      l.clock.textContent = elapsed.toFixed(1);
      l.count.textContent = l.shown;
      l.fwd.textContent = l.forwards;
      l.rate.textContent = elapsed > 0 ? (l.shown / elapsed).toFixed(1) : '0.0';
      l.fill.style.width = (l.total ? 100 * l.shown / l.total : 100) + '%';
      l.lane.dataset.shown = String(l.shown);
      if (l.next >= l.items.length && t >= l.wall) {
        l.done = true;
        finished += 1;
        l.lane.dataset.state = 'done';
        // The place is the recorded one (a slow frame may reach both ends at once): the shorter wall time wins.
        const ahead = lanes.filter((other) => other !== l && other.wall < l.wall).length;
        l.place.textContent = ahead === 0 ? 'finished first' : 'finished second';
      }
    }
    if (finished === lanes.length) {
      root.dataset.state = 'done';
      return;
    }
    state.frame = requestAnimationFrame(tick);
  };
  state.frame = requestAnimationFrame(tick);
}
element.addEventListener('REPLAY_EVENT', (event) => play(event.detail && event.detail.speed));
watch('value', () => play(state.speed));
const seen = new IntersectionObserver((entries) => {
  const root = element.querySelector('.sv-race');
  if (entries.some((entry) => entry.isIntersecting) && root && !root.dataset.played) play(state.speed);
});
seen.observe(element);
""".replace("REPLAY_EVENT", REPLAY_EVENT)

REPLAY_JS = """(speed) => {
  const root = document.querySelector('#sv-race-view .sv-race');
  if (root) root.dispatchEvent(new CustomEvent('REPLAY_EVENT', {bubbles: true, detail: {speed: speed}}));
}""".replace("REPLAY_EVENT", REPLAY_EVENT)


def player_css() -> str:
    """The race view's css (scoped to it by gr.HTML's css_template), in the shared palette."""
    css = """
.sv-race { font-size: 1em; }
.sv-race-verdict, .sv-race-pending { font-size: 1.1em; margin: 4px 0 10px; }
.sv-race-pending, .sv-race[data-state='playing'] .sv-race-verdict { display: none; }
.sv-race[data-state='playing'] .sv-race-pending { display: block; }
.sv-race-source, .sv-race-how, .sv-race-legend, .sv-lane-sub { color: #5f6368; font-size: 0.92em; }
.sv-race-lanes { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
@media (max-width: 700px) { .sv-race-lanes { grid-template-columns: 1fr; } }
.sv-lane { border: 1px solid #d0d4da; border-radius: 8px; padding: 8px 10px; min-width: 0; }
.sv-lane[data-lane='speculative'] { border-top: 4px solid ACCEPTED; }
.sv-lane[data-lane='target-only'] { border-top: 4px solid #555555; }
.sv-lane-place { float: right; font-weight: 700; font-size: 0.9em; }
.sv-lane[data-state='done'] .sv-lane-place { color: ACCEPTED; }
.sv-lane-stats { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 6px 0; font-variant-numeric: tabular-nums; }
.sv-lane-stats .sv-clock, .sv-lane-stats .sv-count, .sv-lane-stats .sv-rate { font-weight: 700; font-size: 1.25em; }
.sv-lane-bar { height: 8px; background: #e8eaed; border-radius: 4px; overflow: hidden; margin-bottom: 6px; }
.sv-lane-fill { height: 100%; background: #555555; }
.sv-lane[data-lane='speculative'] .sv-lane-fill { background: ACCEPTED; }
.sv-lane-text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em;
  white-space: pre-wrap; word-break: break-word; max-height: 22em; min-height: 8em; overflow-y: auto;
  line-height: 1.7; }
.sv-race[data-state='playing'] [data-t]:not(.sv-on) { display: none; }
.sv-rstep { border: 1px solid #9aa0a6; border-radius: 4px; padding: 1px 0; margin: 0 1px; }
.sv-rt.sv-accepted { background: TINT_ACCEPTED; }
.sv-rt.sv-recovered { background: TINT_RECOVERED; box-shadow: inset 0 -2px 0 RECOVERED; }
.sv-rt.sv-bonus { background: TINT_BONUS; box-shadow: inset 0 -2px 0 BONUS; }
.sv-race-legend .sv-rt { padding: 1px 6px; margin: 0 4px; border-radius: 3px; }
"""
    for kind in ("accepted", "recovered", "bonus"):
        css = css.replace(f"TINT_{kind.upper()}", tint(COLORS[kind], 0.25)).replace(kind.upper(), COLORS[kind])
    return css


def tint(color: str, alpha: float) -> str:
    """'#RRGGBB' as a translucent rgba() background."""
    red, green, blue = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({red}, {green}, {blue}, {alpha})"
