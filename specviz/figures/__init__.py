"""Plotly figures of a Trace: pure functions `Trace -> go.Figure`, testable through `fig.data`."""
