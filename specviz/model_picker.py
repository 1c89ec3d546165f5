"""A compact model choice for the Explore and Lab tabs: a preset, or custom draft and target boxes."""

from __future__ import annotations

from typing import Any

import gradio as gr

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER
from specviz.serving.policy import Policy
from specviz.serving.runner import CUSTOM, Runner


def custom_note(policy: Policy) -> str:
    if policy.hosted:
        return ("Type a draft and a target from this server's list (hosted mode, no local paths): "
                f"{', '.join(sorted(policy.allowed_models))}. They must share a vocabulary.")
    return "Type a draft and a target: hub id, local folder, or .gguf path. They must share a vocabulary."


def model_picker(runner: Runner, prefix: str, policy: Policy,
                 with_drafter: bool = False) -> dict[str, gr.components.Component]:
    """Preset dropdown, its description, hidden custom boxes (and a drafter radio); ids start with `prefix`."""
    presets = list(runner.presets())
    default = next((p for p in presets if p.name == runner.default_preset), presets[0] if presets else None)
    c: dict[str, gr.components.Component] = {}
    c["preset"] = gr.Dropdown(choices=[(p.name, p.name) for p in presets] + [("custom models…", CUSTOM)],
                              value=default.name if default else CUSTOM, label="Models", elem_id=f"{prefix}-preset")
    c["preset_info"] = gr.Markdown(default.description if default else custom_note(policy), elem_classes=["sv-note"])
    with gr.Row():
        c["draft"] = gr.Textbox(label="Draft model", placeholder="hub id, local folder or .gguf path",
                                visible=default is None, elem_id=f"{prefix}-draft", min_width=160)
        c["target"] = gr.Textbox(label="Target model", placeholder="hub id, local folder or .gguf path",
                                 visible=default is None, elem_id=f"{prefix}-target", min_width=160)
    if with_drafter:
        c["drafter"] = gr.Radio([("draft model", MODEL_DRAFTER), ("n-gram lookup", NGRAM_DRAFTER)], label="Drafter",
                                value=default.default_drafter if default else MODEL_DRAFTER,
                                elem_id=f"{prefix}-drafter")
    return c


def picker_changed(runner: Runner, policy: Policy, preset: str, with_drafter: bool = False) -> tuple[Any, ...]:
    """Show the custom boxes for 'custom', describe the preset (and pick its drafter)."""
    info = next((p for p in runner.presets() if p.name == preset), None)
    custom = preset == CUSTOM
    description = custom_note(policy) if custom else (info.description if info else "")
    updates: tuple[Any, ...] = (gr.update(visible=custom), gr.update(visible=custom), description)
    if with_drafter:
        updates += (gr.update(value=info.default_drafter) if info else gr.update(),)
    return updates
