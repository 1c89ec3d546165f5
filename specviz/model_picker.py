"""The model choice: a preset, custom draft and target boxes, or (Run and Explore) a vLLM server's URL box.

The Explore, Lab and Race tabs build theirs here (`model_picker`); the Run tab lays out its own
boxes but takes the choices, the server box and the notes from here, so each says the same thing.
A vLLM server (docs/architecture.md §10) runs its own pair: the page streams from it, so its k and
models are the server's, and a hosted server connects only to the addresses its operator allows.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER
from specviz.serving.policy import Policy
from specviz.serving.runner import CUSTOM, VLLM_SERVER, PresetInfo, Runner

SERVER_PLACEHOLDER = "http://127.0.0.1:8000"
TARGET_LABEL, MODEL_PLACEHOLDER = "Target model", "hub id, local folder or .gguf path"
EXPECTED_LABEL = "Expected model (optional)"       # the target box, for a vLLM server: the model it must serve
EXPECTED_PLACEHOLDER = "the served name or path the server must be running; empty: any"


def server_note(policy: Policy) -> str:
    """What the vLLM server choice does, and (hosted) which servers this one connects to."""
    where = (f"This hosted server connects only to: {', '.join(sorted(policy.allowed_servers))}."
             if policy.hosted and policy.allowed_servers else
             "This hosted server connects to no vLLM server (its operator can allow some with --vllm-server)."
             if policy.hosted else "Start one with `bash scripts/vllm.sh`.")
    return ("Stream the run from a vLLM server started with speculative decoding and "
            "`--per-request-spec-decode-metrics detailed`: its models and its k are the server's own (the k slider "
            "is not used: it, adaptive k and the tree controls are turned off), and the drafter choice says what it "
            "speculates with. vLLM does not return p, q, the draws "
            "or its rejected drafts. Name the model you expect, and a server running another is refused. "
            f"{where}")


# The Run tab's chain and tree controls (k, adaptive k, tree nodes, branch): their notes for SpecViz's engine, and
# for a vLLM server, which drafts its own chain of its own k, so the page turns them off and says why (issue 41).
TREE_NODES_INFO = "above 0: up to this many candidates, k deep, checked in one target forward"
BRANCH_INFO = "children per node: the draft's top choices"
SERVER_K_INFO = "off: a vLLM server drafts its own k (its --speculative-config), shown after the run"
SERVER_ADAPTIVE_INFO = "off: a vLLM server's k is its own"
SERVER_TREE_INFO = "off: a vLLM server drafts a chain, not a token tree"


def source_controls(server: bool) -> tuple[Any, Any, Any, Any]:
    """Updates for k, adaptive k, tree nodes and branch: turned off with the reason for a vLLM server (adaptive k
    unticked and tree nodes at 0, the values a server's run accepts), turned on with their own notes otherwise."""
    if server:
        return (gr.update(interactive=False, info=SERVER_K_INFO),
                gr.update(value=False, interactive=False, info=SERVER_ADAPTIVE_INFO),
                gr.update(value=0, interactive=False, info=SERVER_TREE_INFO),
                gr.update(interactive=False, info=SERVER_TREE_INFO))
    return (gr.update(interactive=True, info=None), gr.update(interactive=True, info=None),
            gr.update(interactive=True, info=TREE_NODES_INFO), gr.update(interactive=True, info=BRANCH_INFO))


def preset_choices(presets: list[PresetInfo], with_server: bool = False) -> list[tuple[str, str]]:
    """The Models dropdown: the presets, 'custom models…' and (where a run can stream from one) the vLLM server."""
    server = [("vLLM server (URL)…", VLLM_SERVER)] if with_server else []
    return [(p.name, p.name) for p in presets] + [("custom models…", CUSTOM)] + server


def server_box(prefix: str, policy: Policy, visible: bool = False) -> gr.Textbox:
    """The vLLM server's address box (`{prefix}-server`), shown when the Models dropdown picks the server;
    hosted, it offers the operator's first allowed server."""
    allowed = sorted(policy.allowed_servers) if policy.hosted else []
    return gr.Textbox(label="vLLM server URL", placeholder=SERVER_PLACEHOLDER, value=allowed[0] if allowed else "",
                      visible=visible, elem_id=f"{prefix}-server", min_width=160)


def describe(runner: Runner, policy: Policy, preset: str) -> str:
    """The note under the Models dropdown for `preset` (a preset's description, custom's or the server's)."""
    if preset == VLLM_SERVER:
        return server_note(policy)
    if preset == CUSTOM:
        return custom_note(policy)
    info = next((p for p in runner.presets() if p.name == preset), None)
    return info.description if info else ""


def custom_note(policy: Policy) -> str:
    if policy.hosted:
        return ("Type a draft and a target from this server's list (hosted mode, no local paths): "
                f"{', '.join(sorted(policy.allowed_models))}. They must share a vocabulary.")
    return "Type a draft and a target: hub id, local folder, or .gguf path. They must share a vocabulary."


def model_picker(runner: Runner, prefix: str, policy: Policy, with_drafter: bool = False,
                 with_server: bool = False) -> dict[str, gr.components.Component]:
    """Preset dropdown, its description, hidden custom boxes (and a drafter radio, and with `with_server`
    the vLLM server choice and its hidden URL box); ids start with `prefix`."""
    presets = list(runner.presets())
    default = next((p for p in presets if p.name == runner.default_preset), presets[0] if presets else None)
    c: dict[str, gr.components.Component] = {}
    c["preset"] = gr.Dropdown(choices=preset_choices(presets, with_server),
                              value=default.name if default else CUSTOM, label="Models", elem_id=f"{prefix}-preset")
    c["preset_info"] = gr.Markdown(default.description if default else custom_note(policy), elem_classes=["sv-note"])
    with gr.Row():
        c["draft"] = gr.Textbox(label="Draft model", placeholder="hub id, local folder or .gguf path",
                                visible=default is None, elem_id=f"{prefix}-draft", min_width=160)
        c["target"] = gr.Textbox(label="Target model", placeholder="hub id, local folder or .gguf path",
                                 visible=default is None, elem_id=f"{prefix}-target", min_width=160)
    if with_server:
        c["server"] = server_box(prefix, policy)
    if with_drafter:
        c["drafter"] = gr.Radio([("draft model", MODEL_DRAFTER), ("n-gram lookup", NGRAM_DRAFTER)], label="Drafter",
                                value=default.default_drafter if default else MODEL_DRAFTER,
                                elem_id=f"{prefix}-drafter")
    return c


def picker_changed(runner: Runner, policy: Policy, preset: str, with_drafter: bool = False,
                   with_server: bool = False) -> tuple[Any, ...]:
    """Show the custom boxes for 'custom' (the server box for the vLLM server), describe the choice (and pick
    the preset's drafter): draft, target, description[, server][, drafter]."""
    info = next((p for p in runner.presets() if p.name == preset), None)
    custom, server = preset == CUSTOM, preset == VLLM_SERVER
    target = (gr.update(visible=True, label=EXPECTED_LABEL, placeholder=EXPECTED_PLACEHOLDER) if server and with_server
              else gr.update(visible=custom, label=TARGET_LABEL, placeholder=MODEL_PLACEHOLDER))
    updates: tuple[Any, ...] = (gr.update(visible=custom), target, describe(runner, policy, preset))
    if with_server:
        updates += (gr.update(visible=preset == VLLM_SERVER),)
    if with_drafter:
        updates += (gr.update(value=info.default_drafter) if info else gr.update(),)
    return updates
