"""A trace's audit (issue #38 item 8): each emitted token's probability under a target SpecViz loaded itself, and
which tokens that target would (almost) never emit, saved with the trace so a page draws the marks without a model.

    "audit": {"scored_by": str, "temperature", "top_k", "top_p", "threshold", "expected_marked",
              "probabilities": [one per emitted token], "marked": [positions among the emitted tokens]}

engine/audit/ computes it (`python -m engine.audit TRACE --write OUT`); the marking rule is engine/audit/marks.py's:
at T > 0 a token is marked exactly when its probability is below the threshold, at T = 0 when it is not the target's
argmax (which its probability alone cannot say, so `marked` is stored). Torch-free.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.formats.trace import TraceFormatError
from engine.formats.trace_fields import PROBABILITY, WHOLE, FieldReader


@dataclass(frozen=True)
class TraceAudit:
    scored_by: str                       # the model that scored the tokens, and how it ran ("float32, stock kernels")
    temperature: float
    top_k: int
    top_p: float
    threshold: float                     # "less than once in a million": engine/audit/marks.py RARE
    expected_marked: float               # marked tokens expected had each been drawn from the target itself
    probabilities: tuple[float, ...]     # one per emitted token, in order
    marked: tuple[int, ...]              # positions among the emitted tokens

    def first(self, tokens: int) -> "TraceAudit":
        """The audit of the first `tokens` emitted tokens (a trace as it stood after fewer steps)."""
        return dataclasses.replace(self, probabilities=self.probabilities[:tokens],
                                   marked=tuple(position for position in self.marked if position < tokens))

    def to_dict(self) -> dict[str, Any]:
        return {"scored_by": self.scored_by, "temperature": self.temperature, "top_k": self.top_k,
                "top_p": self.top_p, "threshold": self.threshold, "expected_marked": self.expected_marked,
                "probabilities": list(self.probabilities), "marked": list(self.marked)}


def parse_audit(reader: FieldReader | None, emitted: int) -> TraceAudit | None:
    """The audit of a trace of `emitted` tokens; TraceFormatError names the field that does not fit."""
    if reader is None:
        return None
    audit = TraceAudit(reader.str("scored_by"), reader.num("temperature"), reader.int("top_k"), reader.num("top_p"),
                       reader.prob("threshold"), reader.num("expected_marked"),
                       reader.values("probabilities", PROBABILITY), reader.values("marked", WHOLE))
    if len(audit.probabilities) != emitted:
        raise TraceFormatError(f"{reader.path('probabilities')} holds {len(audit.probabilities)} values for the "
                               f"trace's {emitted} emitted tokens: one each")
    if list(audit.marked) != sorted(set(audit.marked)) or any(position >= emitted for position in audit.marked):
        raise TraceFormatError(f"{reader.path('marked')} must list positions among the {emitted} emitted tokens, "
                               "each once, in order")
    if not 0 < audit.threshold < 1 or audit.temperature < 0 or not 0 < audit.top_p <= 1 or audit.expected_marked < 0:
        raise TraceFormatError(f"{reader.where} needs a threshold in (0, 1), a temperature of 0 or more, top_p in "
                               "(0, 1] and expected_marked of 0 or more")
    if audit.temperature > 0:
        below = tuple(i for i, p in enumerate(audit.probabilities) if p < audit.threshold)
        if below != audit.marked:
            raise TraceFormatError(f"{reader.path('marked')} must be exactly the tokens whose probability is below "
                                   f"the threshold {audit.threshold:g} (at T > 0): {list(below)}")
    return audit
