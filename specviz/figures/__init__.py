"""Plotly figures of a Trace: pure functions `Trace -> Figure` (specviz/figures/common.py: the dicts Plotly
draws), testable through `fig.data`."""
