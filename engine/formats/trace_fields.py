"""Typed access to a parsed JSON document: each value checked against a `Kind`, each error a
TraceFormatError naming the field's path (`steps[3].accept_prob[1] must be a probability or null`).

The trace reader (engine/formats/trace_reader.py) reads every field through a `FieldReader`, so a
hand-edited file can only fail with one of these messages.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from engine.config import MAX_K
from engine.records import DRAFT_ORIGINS, EMIT_KINDS, VERDICTS
from engine.formats.trace import TraceFormatError

MAX_WHOLE = 2**31 - 1                 # ids, lengths, counts: far above any vocabulary or context
MAX_AMOUNT = 1e12                     # milliseconds, seconds, tokens per second
PROBABILITY_SLACK = 1e-6              # float32 rounding: a recorded probability may read 1.0000001


@dataclass(frozen=True)
class Kind:
    """What a value must be: a test, and the words for it in an error message."""

    test: Callable[[Any], bool]
    words: str


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_text(value: Any) -> bool:
    """A string that can go out as UTF-8: no lone surrogate (JSON's \\ud800 escape reads into one)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# NaN fails every comparison, so each range test below also refuses it.
WHOLE = Kind(lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_WHOLE,
              f"a whole number from 0 to {MAX_WHOLE}")
WHOLE_OR_NULL = Kind(lambda v: v is None or WHOLE.test(v), f"null or a whole number from 0 to {MAX_WHOLE}")
DRAFT_ORIGIN = Kind(lambda v: isinstance(v, str) and v in DRAFT_ORIGINS, f"one of {', '.join(DRAFT_ORIGINS)}")
DRAFT_COUNT = Kind(lambda v: WHOLE.test(v) and v <= MAX_K, f"a whole number from 0 to {MAX_K}")
AMOUNT = Kind(lambda v: is_number(v) and 0 <= v <= MAX_AMOUNT, f"a number from 0 to {MAX_AMOUNT:g}")
PROBABILITY = Kind(lambda v: is_number(v) and -PROBABILITY_SLACK <= v <= 1 + PROBABILITY_SLACK, "a probability")
PROBABILITY_OR_NULL = Kind(lambda v: v is None or PROBABILITY.test(v), "a probability or null")
TEXT = Kind(is_text, "a string")
BOOL = Kind(lambda v: isinstance(v, bool), "true or false")
LIST = Kind(lambda v: isinstance(v, list), "a list")
OBJECT = Kind(lambda v: isinstance(v, dict), "an object")
VERDICT = Kind(lambda v: isinstance(v, str) and v in VERDICTS, f"one of {', '.join(VERDICTS)}")
EMIT_KIND = Kind(lambda v: isinstance(v, str) and v in EMIT_KINDS, f"one of {', '.join(EMIT_KINDS)}")
INT64 = Kind(lambda v: isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63,
              "a whole number below 2**63")
CONFIG_KINDS = {                      # SpecConfig's field types; SpecConfig checks the ranges itself
    "int": INT64,
    "float": Kind(lambda v: INT64.test(v) or isinstance(v, float) and -math.inf < v < math.inf, "a finite number"),
    "bool": BOOL,
    "str": TEXT,
}


def show(value: Any) -> str:
    """The start of `value` as JSON, for an error message (its type where JSON cannot show it)."""
    try:
        return json.dumps(value)[:40]
    except (TypeError, ValueError, RecursionError):
        return type(value).__name__


class FieldReader:
    """Typed field access with error messages that name the path of the bad field."""

    def __init__(self, data: Any, where: str, document: str = "trace"):
        """`where`: the path of `data` in its document ("" at the root, which the messages call `document`)."""
        if not isinstance(data, dict):
            raise TraceFormatError(f"{where or document} must be an object, got {type(data).__name__}")
        self.data, self.where = data, where

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, kind: Kind, optional: bool = False) -> Any:
        """The value at `key`, of `kind`; None for a missing or null optional field."""
        path = self.path(key)
        if key not in self.data:
            if optional:
                return None
            raise TraceFormatError(f"missing field {path}")
        value = self.data[key]
        if value is None and optional:
            return None
        expect(value, kind, path)
        return value

    def int(self, key: str, optional: bool = False) -> int:
        return self.get(key, WHOLE, optional)

    def num(self, key: str, optional: bool = False) -> float:
        return self.get(key, AMOUNT, optional)

    def prob(self, key: str, optional: bool = False) -> float | None:
        return self.get(key, PROBABILITY_OR_NULL if optional else PROBABILITY, optional)

    def str(self, key: str) -> str:
        return self.get(key, TEXT)

    def bool(self, key: str, default: bool) -> bool:
        value = self.get(key, BOOL, optional=True)
        return default if value is None else value

    def list(self, key: str, optional: bool = False) -> list[Any]:
        value = self.get(key, LIST, optional)
        return [] if value is None else value

    def values(self, key: str, kind: Kind, optional: bool = False) -> tuple[Any, ...] | None:
        """The list at `key`, every item of `kind`; None for a missing or null optional list."""
        items = self.get(key, LIST, optional)
        if items is None:
            return None
        for index, item in enumerate(items):
            expect(item, kind, f"{self.path(key)}[{index}]")
        return tuple(items)

    def obj(self, key: str, optional: bool = False) -> "FieldReader | None":
        value = self.get(key, OBJECT, optional)
        return None if value is None else FieldReader(value, self.path(key))

    def items(self, key: str, optional: bool = False) -> list["FieldReader"]:
        return [FieldReader(item, f"{self.path(key)}[{i}]") for i, item in enumerate(self.list(key, optional))]


def expect(value: Any, kind: Kind, path: str) -> None:
    if not kind.test(value):
        raise TraceFormatError(f"{path} must be {kind.words}, got {show(value)}")
