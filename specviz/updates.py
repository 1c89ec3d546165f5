"""What the tabs' handlers send to their components: the partial update while work is under way
(a new status line, every other output as it is, the session's state kept), and the base of the
dataclasses that name a tab's components in order."""

from __future__ import annotations

from dataclasses import fields
from typing import Any, Sequence

import gradio as gr


def status_only(names: Sequence[str], status: str, kept: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """Values for the outputs `names` (in order): `status` for "status", the session's value for
    each name in `kept` (gr.State outputs), and no change for the rest."""
    kept = kept or {}
    return tuple(status if name == "status" else kept[name] if name in kept else gr.update() for name in names)


class ComponentFields:
    """Base of a frozen dataclass whose fields stand for a tab's components, in order (its outputs,
    or a handler's inputs): `names()` lists them for the wiring, `outputs()` gives the values."""

    @classmethod
    def names(cls) -> list[str]:
        return [field.name for field in fields(cls)]

    def outputs(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.names())
