"""Before any Run: this machine's costs and facts, measured once when the default pair loads in the background
(app.py `EngineRunner.preload`), for the page's status line (specviz/serving/load_status.py).

A GPU's costs are measured at every load on its captured graphs (engine/loading/speed_up.py). A CPU's were not,
so the page could not say before a Run whether speculation pays here, nor which k is fastest (issue #40 item 2):
here they are measured on the kernels a run uses (the dynamic cache), with fewer repeats than a GPU's (a 2-core
CPU takes about 0.15 s a target forward of the default pair) and one k fewer than 1..8 (k = 7's verify is read as
the nearest measured k's by DeviceCosts.verify_cost, and the fastest k is picked among the measured ones), each
phase the fastest of its repeats (cost_probe.py: the page's own browser slows some). The facts say whether this
CPU computes bfloat16 natively, whether an int4 draft pays here, and how much of the CPUs other programs used
while the costs were measured (a busy machine's costs come out high: the page says so).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.decode.pair import ModelPair
from engine.device_costs import DeviceCosts
from engine.loading.cost_probe import measure_costs
from engine.machine_facts import MachineFacts
from engine.runtime.cpu.kernels import int4_draft_pays
from engine.runtime.cpu.native_bf16 import native_bf16_refusal
from engine.runtime.cpu.others_share import while_measuring

CPU_PROBED_KS = (1, 2, 3, 4, 5, 6, 8)
CPU_WARMUPS, CPU_REPEATS = 1, 3


def probe_machine(pair: ModelPair, report: Callable[[float, str], None]) -> tuple[DeviceCosts | None, MachineFacts]:
    """The loaded pair's device costs (a GPU's from its load; a CPU's measured now) and this machine's facts."""
    costs, others = pair.device_costs, None
    if costs is None and pair.device.type == "cpu":
        report(0.99, "measuring this CPU's costs: a target token, and k drafts with their verify for k = 1 to 8")
        costs, others = while_measuring(lambda: measure_costs(pair, "dynamic", CPU_PROBED_KS, CPU_WARMUPS,
                                                              CPU_REPEATS, fastest=True))
        pair.device_costs = costs
    on_cpu = pair.device.type == "cpu"
    refusal = native_bf16_refusal() if on_cpu else None
    return costs, MachineFacts(pair.device.type, "" if pair.draft is None else pair.draft_name, pair.target_name,
                               pair.draft_dtype if pair.draft is not None else "", pair.target_dtype, refusal,
                               int4_draft_pays=on_cpu and int4_draft_pays(), others_busy=others)
