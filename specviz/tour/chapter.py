"""One tour chapter: the view it sets on the page, its words, and the facts its words quote.

Every number a chapter says comes from `facts`, each read from the recorded trace, sweep or race the page shows:
the words are templates with named fields (`{step}`), never with typed-in numbers (tests/test_tour.py checks both).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from specviz.tokens import visible


@dataclass(frozen=True)
class View:
    """What a chapter puts on screen: a tab, and on it a recorded run, a step, a Lab stage; `outline` is the CSS
    selector of the one element to look at; `focus`, inside it, the part the question reads when the element is
    taller than the screen, and `focus_end` where that part ends when the chapter's words read a span of it (the
    tour brings the span, from the top of `focus` to the bottom of `focus_end`, into view where it fits)."""

    tab: str                           # run | race | explore | lab (the tab's id in specviz/layout.py)
    outline: str
    recorded: str | None = None        # the Run tab's recorded trace (its file name)
    step: int | None = None            # the Run tab's step
    lab_stage: str | None = None       # the Lab tab's stage key
    lab_step: int | None = None        # the Lab tab's step
    focus: str | None = None           # a part of the outlined element to scroll into view (its top otherwise)
    focus_end: str | None = None       # the last part the chapter reads, below `focus` (a span of two table rows)
    shows: tuple[str, str] | None = None   # (selector, words) on screen while the tab shows the recording read:
                                           # after a run of one's own the tour says the numbers are the recording's

    def to_json(self) -> str:
        return json.dumps({name: value for name, value in asdict(self).items() if value is not None})


@dataclass(frozen=True)
class Chapter:
    """A chapter's title, view and words; `text` (three sentences at most), `question` and `answer` are
    templates filled from `facts`."""

    title: str
    view: View
    text: str
    question: str
    answer: str
    facts: dict[str, str] = field(default_factory=dict)

    def said(self, template: str) -> str:
        """`template` with its facts filled in."""
        return template.format(**self.facts)

    @property
    def words(self) -> tuple[str, str, str]:
        """The text, the question and the answer as the page shows them."""
        return self.said(self.text), self.said(self.question), self.said(self.answer)


def quoted(text: str) -> str:
    """A token as the chapter quotes it: its visible form (specviz/tokens.py) in quotation marks."""
    return f"\u201c{visible(text)}\u201d"


def prob(value: float) -> str:
    """A probability or ratio as the step table prints it (three decimals)."""
    return f"{value:.3f}"
