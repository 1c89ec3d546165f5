"""The Explore side panel's sweep settings follow the sweep on screen: the recorded one when the page
opens, an uploaded one after an upload, so the panel never describes settings that have not run.

`shown_settings` gives the controls' values for a sweep (its own k, temperatures, prompts, seeds and
length, where the controls offer them); `settings_note` says whose settings they are and what the
controls could not show.
"""

from __future__ import annotations

from typing import Any, Sequence

from engine.formats.sweep_reader import SweepTable
from specviz.explore.handlers import MAX_NEW_TOKENS, TEMPERATURES
from specviz.serving.policy import Policy

DEFAULT_KS = (1, 2, 3, 4, 6, 8)
DEFAULT_TEMPERATURES = (0.0, 0.7)
SETTING_NAMES = ("ks", "temperatures", "prompts", "seeds", "max_new_tokens")   # the controls, in this order


def _offered(meta: dict[str, Any], key: str, offered: Sequence[Any], default: Sequence[Any]) -> list[Any]:
    """The sweep's values under `key` that the control offers (none ticked rather than one that did not
    run); `default` when the sweep does not say."""
    if not isinstance(meta.get(key), list):
        return list(default)
    return [value for value in meta[key] if value in offered]


def shown_settings(table: SweepTable | None, ks: Sequence[int], prompts: Sequence[str],
                   policy: Policy = Policy()) -> dict[str, Any]:
    """The controls' values for `table`: its own settings where the controls (`ks`, the example `prompts`,
    the policy's length) offer them; the defaults where it names none."""
    meta = table.meta if table is not None else {}
    listed_seeds = table.meta_list("seeds") if table is not None else []
    seeds = [s for s in listed_seeds if isinstance(s, int) and not isinstance(s, bool)]
    tokens = meta.get("max_new_tokens")
    most = min(MAX_NEW_TOKENS, policy.max_new_tokens)
    return {"ks": _offered(meta, "ks", ks, [k for k in DEFAULT_KS if k in ks]),
            "temperatures": _offered(meta, "temperatures", TEMPERATURES, DEFAULT_TEMPERATURES),
            "prompts": _offered(meta, "prompts", prompts, prompts[:1]),
            "seeds": ", ".join(str(seed) for seed in seeds) or "0",
            "max_new_tokens": tokens if isinstance(tokens, int) and 8 <= tokens <= most else min(32, most)}


def settings_note(table: SweepTable | None, whose: str, ks: Sequence[int], prompts: Sequence[str],
                  policy: Policy = Policy()) -> str:
    """One line above the controls: whose settings they show (`whose`: 'the recorded sweep's'), and
    which of that sweep's settings they cannot show."""
    if table is None:
        return "No sweep on screen: these are starting settings; press **Run sweep** to record one."
    meta = table.meta
    missing = []
    extra_ks = [k for k in table.meta_list("ks") if k not in ks]
    extra_ts = [t for t in table.meta_list("temperatures") if t not in TEMPERATURES]
    extra_prompts = [p for p in table.meta_list("prompts") if p not in prompts]
    tokens = meta.get("max_new_tokens")
    if extra_ks:
        missing.append("k = " + ", ".join(str(k) for k in extra_ks))
    if extra_ts:
        missing.append("T = " + ", ".join(f"{t:g}" for t in extra_ts))
    if extra_prompts:
        missing.append(f"{len(extra_prompts)} prompt{'s' if len(extra_prompts) != 1 else ''} not among the examples")
    if isinstance(tokens, int) and tokens != shown_settings(table, ks, prompts, policy)["max_new_tokens"]:
        missing.append(f"{tokens} new tokens")
    note = f"Set to {whose} settings; the panel above the charts describes the sweep on screen."
    if missing:
        note += f" Not offered here, so not set: {'; '.join(missing)}."
    return note


def settings_values(table: SweepTable | None, ks: Sequence[int], prompts: Sequence[str],
                    policy: Policy = Policy()) -> list[Any]:
    """The controls' values in SETTING_NAMES order."""
    shown = shown_settings(table, ks, prompts, policy)
    return [shown[name] for name in SETTING_NAMES]
