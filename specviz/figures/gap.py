"""The gap between the model at the measured costs and each measured speedup, as stacked shares per k.

One bar per k at the chosen temperature (specviz/explore/gap.py computes the shares): acceptance,
time outside the steady forwards, and target-only's own prefill (drawn below zero: it gives some of
the gap back); a diamond marks the whole gap, model − measured, which the shares add up to. Each share
has its own fill pattern, so nothing depends on telling the colours apart.
"""

from __future__ import annotations

from typing import Any

from specviz.explore.gap import GapShares
from specviz.figures.common import Figure, LEGEND_ROOM, empty_figure, make_figure
from specviz.style import COLORS, FigureStyle

TITLE = "Measured vs the model: where the gap goes"
SHARES = (   # (field, legend name, colour, pattern, hover words for one k)
    ("acceptance", "acceptance: τ measured vs the model's E", COLORS["accepted"], "",
     "τ = %{customdata[0]:.2f} measured vs E = %{customdata[1]:.2f} at α"),
    ("outside", "step 0's prefill, engine time between forwards, short last steps", COLORS["rejected"], "/",
     "%{customdata[2]:.0%} of the speculative run's time was outside its steady forwards"),
    ("baseline_prefill", "target-only's own prefill (gives some back)", COLORS["recovered"], ".",
     "target-only spent %{customdata[3]:.0%} of its time on its prefill"),
)


def gap_figure(shares: list[GapShares], temperature: float | None, style: FigureStyle = FigureStyle()) -> Figure:
    """The shares of each k's gap at `temperature` (an explanation instead when there are none)."""
    if not shares or temperature is None:
        return empty_figure(TITLE, "This sweep did not record the costs needed to split the gap.", style)
    ks = [share.k for share in shares]
    data = [[s.tokens_per_step, s.expected_tokens, s.outside_fraction, s.prefill_fraction, s.model, s.measured]
            for s in shares]
    traces: list[dict[str, Any]] = []
    for field, name, color, shape, words in SHARES:
        marker: dict[str, Any] = {"color": color, "line": {"color": "#222222", "width": 1}}
        if shape:
            marker["pattern"] = {"shape": shape, "fillmode": "overlay", "fgcolor": "rgba(255,255,255,0.75)",
                                 "size": 7, "solidity": 0.35}
        traces.append({"type": "bar", "x": ks, "y": [getattr(s, field) for s in shares], "name": name,
                       "meta": f"gap.{field}", "marker": marker, "customdata": data,
                       "hovertemplate": f"k = %{{x}}: {name}: %{{y:+.2f}}×<br>{words}<extra></extra>"})
    traces.append({"type": "scatter", "mode": "markers", "x": ks, "y": [s.gap for s in shares], "meta": "gap.total",
                   "name": "the whole gap: model − measured", "customdata": data,
                   "marker": {"symbol": "diamond", "size": 12, "color": "#000000", "line": {"color": "#FFFFFF",
                                                                                            "width": 1.5}},
                   "hovertemplate": "k = %{x}: model %{customdata[4]:.2f}× − measured %{customdata[5]:.2f}× = "
                                    "%{y:.2f}×<extra></extra>"})
    subtitle = (f"T = {temperature:g} · model at each k's measured costs − measured speedup, split into shares "
                "that add up to it")
    return make_figure(traces, TITLE, subtitle, style, height=420 + 3 * style.font_size, barmode="relative",
                       margin={"t": 90, "b": 60 + 3 * LEGEND_ROOM // 2},
                       xaxis={"title": {"text": "k"}, "tickmode": "array", "tickvals": ks},
                       yaxis={"title": {"text": "share of the gap (× target-only)"}, "zeroline": True,
                              "zerolinecolor": "#555555"})
