"""The document formats and their strict readers (torch-free, docs/architecture.md §3): the trace
(`specviz.trace/2`), the race (`specviz.race/1`) and the sweep (`specviz.sweep/1`)."""
