"""Reading a JSON document (a trace, a race or a sweep) without letting anything but the
format's own error out: size limit first, then syntax, oversized numbers and deep nesting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_document(path: str | Path, max_bytes: int, error: type[ValueError], what: str) -> bytes:
    """A document file's bytes, refused with `error` before reading when it is over `max_bytes`."""
    path = Path(path)
    if path.stat().st_size > max_bytes:
        raise error(f"{path.name} is over the {max_bytes // 1024 // 1024} MiB {what} size limit")
    return path.read_bytes()


def parse_json(text: str | bytes, max_bytes: int, error: type[ValueError], what: str) -> Any:
    """The parsed document, or `error` with one sentence saying why `text` is not a `what`."""
    if len(text) > max_bytes:
        raise error(f"the {what} is {len(text) // 1024} KiB, over the {max_bytes // 1024 // 1024} MiB limit")
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as problem:
        raise error(f"not valid JSON ({getattr(problem, 'msg', problem)}); the file may be truncated") from None
    except ValueError:            # valid syntax, but a number past Python's 4300-digit limit
        raise error(f"not a {what}: it holds a number thousands of digits long") from None
    except RecursionError:
        raise error(f"not a {what}: its JSON is nested too deeply to read") from None
