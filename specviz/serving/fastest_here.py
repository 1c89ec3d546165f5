"""The fastest exact configuration the default pair's load found for this machine (issue #40 item 2), said before
any Run and applied by one button.

The load measured this machine's costs (engine/device_costs.py) and facts (engine/machine_facts.py). At the
acceptance of the page's recorded greedy run of the same pair, the i.i.d. cost model E / (k c + v) picks the
chain's k (a chain: the model prices chains, and a tree's extra verify rows cost more than they bring on a CPU's
forwards); where the CPU computes bfloat16 natively and the loaded target is float32, a bfloat16 target reads half
the bytes each forward; where the int4 kernel runs its AVX-512 code and the loaded draft is int8, an int4 draft
reads half its bytes again at about twice the speed (the draft never changes the output). `choice_text` says it
with the numbers; `use_fastest` sets the Run tab's controls to it (a chain of that k with the draft model, the
bfloat16 target where native, the int4 draft where it pays), so the next Run measures it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from engine.config import MODEL_DRAFTER
from engine.device_costs import DeviceCosts
from engine.formats.trace import Trace
from engine.machine_facts import MachineFacts
from specviz.serving.runner import LoadStatus


@dataclass(frozen=True)
class FastestHere:
    alpha: float | None          # the recorded run's acceptance, where it ran the loaded pair
    k: int | None                # the cost model's fastest k at that acceptance (None: nothing to price it at)
    speedup: float | None        # its predicted speedup over target-only decoding
    bfloat16_target: bool        # this CPU computes bfloat16 natively and the loaded target is float32
    bf16_refusal: str | None     # a CPU's reason a bfloat16 target would not pay (None where it would, or off a CPU)
    int4_draft: bool = False     # an int4 draft pays on this CPU (MachineFacts.int4_draft_pays) and the loaded one is int8

    @property
    def applies(self) -> bool:
        """Whether the button would change anything: a k to set, a bfloat16 target or an int4 draft to choose."""
        return self.k is not None or self.bfloat16_target or self.int4_draft

    def button_label(self) -> str:
        parts = ([f"a chain of k = {self.k} with the draft model"] if self.k is not None else [])
        parts += ["a bfloat16 target"] if self.bfloat16_target else []
        parts += ["an int4 draft"] if self.int4_draft else []
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        return "Use the fastest here: " + listed


def fastest_here(costs: DeviceCosts | None, machine: MachineFacts | None, recorded: Trace | None) -> FastestHere | None:
    """What the load's measurements make fastest here; None when the load measured nothing to choose by."""
    if costs is None or machine is None:
        return None
    alpha = recorded_acceptance(recorded, machine)
    k, speedup = costs.fitted().best(alpha) if alpha is not None and costs.draft_token_ms is not None else (None, None)
    cpu_float32 = machine.device == "cpu" and machine.target_dtype == "float32"
    return FastestHere(alpha, k, speedup, cpu_float32 and machine.bf16_refusal is None,
                       machine.bf16_refusal if cpu_float32 else None,
                       machine.device == "cpu" and machine.int4_draft_pays and machine.draft_dtype == "int8")


def choice_text(costs: DeviceCosts, machine: MachineFacts, recorded: Trace | None) -> str:
    """Before any Run, the fastest exact configuration here as far as the load can tell: the k the cost model picks
    at the acceptance of a recorded run of this pair, with its predicted speedup, and whether a bfloat16 target
    would pay on this CPU ("" when there is nothing to say)."""
    choice = fastest_here(costs, machine, recorded)
    said = []
    if choice.k is not None:
        said.append(f"At the {choice.alpha:.0%} acceptance of this pair's recorded greedy run, **k = {choice.k} is the "
                    f"fastest here: predicted {choice.speedup:.2f}x over target-only decoding** (the i.i.d. model "
                    "E / (k c + v) at these costs, v on a line fitted over k; the k slider sets k, and a run's own "
                    "acceptance moves the best k).")
    if choice.bfloat16_target:
        said.append("This CPU computes bfloat16 natively (AVX-512 BF16 or AMX): **target dtype bfloat16** runs a "
                    "prepacked bfloat16 target, which reads half the bytes of a float32 one each forward. Its "
                    "greedy output is then identical to that bfloat16 target's own decoding (near ties may "
                    "flip), a different claim from the float32 target's."
                    + (" (The k above is priced at the float32 target's costs; a bfloat16 target's forwards are "
                       "cheaper, so the draft costs more of one and its best k may be smaller.)"
                       if choice.k is not None else ""))
    elif choice.bf16_refusal is not None:
        said.append(f"Target dtype: {choice.bf16_refusal}.")
    if choice.int4_draft:
        said.append("**Draft dtype int4** quantizes the draft's weights to 4 bits in groups of 32 (a scale and an "
                    "offset each): half an int8 draft's bytes, on a kernel that runs near this machine's memory speed. "
                    "It can only move which drafts are accepted, never the output: the target decides every token.")
    if choice.applies:
        said.append("**Use the fastest here** (beside Run) sets these for the next Run.")
    return " ".join(said)


def recorded_acceptance(recorded: Trace | None, machine: MachineFacts) -> float | None:
    """The share of drafts accepted in `recorded` where it is a chain run of the same draft model and target as
    the loaded pair (any dtype: the tokens a draft proposes hardly depend on it); else None."""
    if (recorded is None or recorded.config.drafter != MODEL_DRAFTER or recorded.config.is_tree
            or (recorded.config.draft, recorded.config.target) != (machine.draft, machine.target)):
        return None
    return recorded.summary.acceptance_rate


def button_update(status: LoadStatus | None, recorded: Trace | None) -> Any:
    """The button as the load stands: shown, with what it sets, once a finished load found something to use."""
    choice = None if status is None or status.loading else fastest_here(status.device_costs, status.machine, recorded)
    if choice is None or not choice.applies:
        return gr.update(visible=False)
    return gr.update(visible=True, value=choice.button_label())


def use_fastest(status: LoadStatus | None, recorded: Trace | None) -> tuple[Any, Any, Any, Any, Any, Any]:
    """The Run tab's k, adaptive k, tree nodes, drafter, target dtype and draft dtype set to the fastest here; each
    control the choice does not name keeps its value."""
    choice = None if status is None else fastest_here(status.device_costs, status.machine, recorded)
    keep = gr.update()
    if choice is None or not choice.applies:
        return keep, keep, keep, keep, keep, keep
    dtypes = (gr.update(value="bfloat16") if choice.bfloat16_target else keep,
              gr.update(value="int4") if choice.int4_draft else keep)
    if choice.k is None:
        return keep, keep, keep, keep, *dtypes
    return gr.update(value=choice.k), gr.update(value=False), gr.update(value=0), gr.update(value=MODEL_DRAFTER), *dtypes
