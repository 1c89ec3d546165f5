"""Read an uploaded file (a trace or a sweep) into its object, or say in one gr.Error what is wrong.

The Run tab's trace upload and the Explore tab's sweep upload check the same things in the
same order: not empty, under the size cap, parses as the expected SpecViz format.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import gradio as gr

Parsed = TypeVar("Parsed")


def parse_upload(data: bytes | None, max_bytes: int, kind: str, parse: Callable[[bytes], Parsed],
                 format_error: type[Exception]) -> Parsed:
    """parse(data), or gr.Error for an empty file, one over max_bytes, or a format_error."""
    if not data:
        raise gr.Error("The uploaded file is empty.")
    if len(data) > max_bytes:
        raise gr.Error(f"The file is over the {max_bytes // 1024 // 1024} MiB {kind} size limit.")
    try:
        return parse(data)
    except format_error as error:
        raise gr.Error(f"Not a SpecViz {kind}: {error}") from None
