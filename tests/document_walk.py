"""Walking a JSON document field by field, for the upload tests (test_upload_walk.py, test_trace_fuzz.py):
the path of every value, the fields (paths with list positions left open), and a document with one value
replaced or deleted."""

from __future__ import annotations

from typing import Any, Iterator

DELETE = object()           # stands for "delete the field" where a value is expected
# Twenty odd values a hand edit or a broken writer puts in a field: wrong types, NaN, infinities,
# huge and negative numbers, empty and broken strings, empty containers.
ODD_VALUES = (None, True, False, 0, -1, -0.5, 1.5, 2**31, 2**64, 10**11, 1e308, -1e308, float("nan"), float("inf"),
              float("-inf"), "x", "", "\ud800", [], {})


def paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """The path of every value in `node`, itself included."""
    yield path
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from paths(child, (*path, key))


def fields(document: Any) -> dict[tuple[str, ...], list[tuple[Any, ...]]]:
    """Paths by field: the path with its list positions left open ("[]")."""
    found: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for path in paths(document):
        found.setdefault(tuple("[]" if isinstance(key, int) else key for key in path), []).append(path)
    return found


def replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    """`document` (changed in place) with the value at `path` set to `value`, or deleted for DELETE
    (the root: replaced, or {})."""
    if not path:
        return {} if value is DELETE else value
    *parents, key = path
    parent = document
    for step in parents:
        parent = parent[step]
    if value is DELETE:
        del parent[key]
    else:
        parent[key] = value
    return document


def where(path: tuple[Any, ...]) -> str:
    """'steps[2].draft[0].q': a path as the readers name fields."""
    text = ""
    for key in path:
        text += f"[{key}]" if isinstance(key, int) else f".{key}" if text else str(key)
    return text or "(the document)"
