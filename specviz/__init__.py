"""SpecViz UI: Gradio layout, event handlers and Plotly figures of a speculative decoding Trace.

Nothing in this package imports torch: it reads traces (engine.formats.trace, engine.records,
engine.metrics, engine.config are pure Python) and drives models only through the
`specviz.serving.runner.Runner` protocol that app.py implements around the engine.
"""
