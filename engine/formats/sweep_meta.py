"""The meta of a sweep document (`specviz.sweep/1`): what each key the Explore tab reads must be.

The command line and the app write `{preset, machine, draft, target, drafter, draft_dtype,
target_dtype, prompts[], ks[], temperatures[], seeds[], tree_budgets[], max_new_tokens}`; each may be
missing or null (older sweeps), other keys are kept as they are. `check_meta` refuses a known key of
the wrong kind, and `check_text` any string in the document that cannot go out as UTF-8 (JSON's
"\\ud800" escape reads into a lone surrogate), each with one SweepFormatError naming the path.
"""

from __future__ import annotations

from typing import Any

from engine.config import MAX_K, MAX_NEW_TOKENS, MAX_TEMPERATURE, MAX_TREE_NODES
from engine.formats.sweep_format import SweepFormatError
from engine.formats.trace_fields import INT64, TEXT, Kind, is_number, is_text, show


def _whole(least: int, most: int) -> Kind:
    return Kind(lambda v: isinstance(v, int) and not isinstance(v, bool) and least <= v <= most,
                f"a whole number from {least} to {most}")


SCALARS: dict[str, Kind] = {
    **{key: TEXT for key in ("preset", "machine", "draft", "target", "drafter", "draft_dtype", "target_dtype")},
    "max_new_tokens": _whole(1, MAX_NEW_TOKENS)}
LISTS: dict[str, Kind] = {
    "prompts": TEXT, "ks": _whole(1, MAX_K), "tree_budgets": _whole(0, MAX_TREE_NODES),
    "temperatures": Kind(lambda v: is_number(v) and 0 <= v <= MAX_TEMPERATURE,
                         f"a number from 0 to {MAX_TEMPERATURE:g}"),
    "seeds": Kind(lambda v: INT64.test(v) and v >= 0, "a whole number from 0 to 2**63 - 1")}


def check_meta(meta: dict[str, Any]) -> None:
    """SweepFormatError for a known key of the wrong kind (`meta.ks[2]: expected ..., got ...`)."""
    for key, value in meta.items():
        if value is None:
            continue
        if key in SCALARS:
            kind = SCALARS[key]
            if not kind.test(value):
                raise SweepFormatError(f"meta.{key}: expected {kind.words} or null, got {show(value)}")
        elif key in LISTS:
            kind = LISTS[key]
            if not isinstance(value, list):
                raise SweepFormatError(f"meta.{key}: expected a list or null, got {show(value)}")
            for index, item in enumerate(value):
                if not kind.test(item):
                    raise SweepFormatError(f"meta.{key}[{index}]: expected {kind.words}, got {show(item)}")


def check_text(node: Any, where: str = "") -> None:
    """SweepFormatError for the first string (key or value) under `node` that is not valid Unicode."""
    if isinstance(node, str):
        if not is_text(node):
            raise SweepFormatError(f"{where or 'the document'}: text that is not valid Unicode (a lone surrogate)")
    elif isinstance(node, dict):
        for key, value in node.items():
            path = f"{where}.{key}" if where else str(key)
            if not is_text(key):
                raise SweepFormatError(f"{where or 'the document'}: a key that is not valid Unicode")
            check_text(value, path)
    elif isinstance(node, list):
        for index, item in enumerate(node):
            check_text(item, f"{where}[{index}]")
