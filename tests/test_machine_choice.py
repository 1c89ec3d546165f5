"""Before any Run, the page says what this machine's costs make fastest (issue #40 item 2): the background load of
the default pair measures a CPU's costs too (engine/loading/machine_probe.py; a GPU's were measured at load
already), and the status line names the k the cost model picks at the acceptance of the page's recorded run of
the same pair, with its predicted speedup, and whether a bfloat16 target would pay on this CPU.

Oracles: the speedup worked out by hand from the i.i.d. model's closed form (E = (1 - a^(k+1)) / (1 - a) tokens a
step over k c + v target tokens) at every measured k, the recorded trace's accepted and drafted counts summed here,
and this CPU's own answer to whether it computes bfloat16 natively (its flags and the prepacking probe). The real
load is the tiny random pair's, preloaded as app.py does it."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from app import EngineRunner
from engine.device_costs import DeviceCosts
from engine.machine_facts import MachineFacts
from engine.runtime.cpu.kernels import int4_draft_pays
from engine.runtime.cpu.native_bf16 import native_bf16_refusal
from engine.runtime.cpu.others_share import CpuTimes, now, others_share, read_cpu_times
from specviz.assets import load_demo_trace
from engine.config import MODEL_DRAFTER
from specviz.serving.fastest_here import button_update, choice_text, fastest_here, recorded_acceptance, use_fastest
from specviz.serving.load_status import BUSY_SHARE, load_status_text
from specviz.serving.runner import LoadStatus, ModelChoice

RECORDED = load_demo_trace().trace                      # the page's recorded greedy run of the default pair
SAME_PAIR = MachineFacts("cpu", RECORDED.config.draft, RECORDED.config.target, "int8", "float32", None)
# a CPU where a draft token costs 0.1 of a target token and a verify of k + 1 tokens 1 + 0.1 k of one
CPU_LIKE = DeviceCosts("cpu", "dynamic", False, target_token_ms=100.0, draft_token_ms=10.0,
                       verify_ms=tuple((k, 100.0 + 10.0 * k) for k in (1, 2, 3, 4, 5, 6, 8)))


def by_hand(alpha: float, k: int) -> float:
    """The i.i.d. model's speedup at CPU_LIKE's costs, from its closed form."""
    return ((1 - alpha ** (k + 1)) / (1 - alpha)) / (k * 0.1 + (1.0 + 0.1 * k))


def test_the_recorded_runs_acceptance_is_its_accepted_drafts_over_its_drafted_ones():
    accepted = sum(step.num_accepted for step in RECORDED.steps)
    drafted = sum(step.k for step in RECORDED.steps)
    assert recorded_acceptance(RECORDED, SAME_PAIR) == pytest.approx(accepted / drafted)
    other = dataclasses.replace(SAME_PAIR, draft="embedded:another-draft")
    assert recorded_acceptance(RECORDED, other) is None              # another pair lends no acceptance
    assert recorded_acceptance(None, SAME_PAIR) is None


def test_the_status_line_names_the_k_the_model_picks_with_its_speedup():
    alpha = recorded_acceptance(RECORDED, SAME_PAIR)
    best = max((1, 2, 3, 4, 5, 6, 8), key=lambda k: by_hand(alpha, k))
    text = choice_text(CPU_LIKE, SAME_PAIR, RECORDED)
    assert f"At the {alpha:.0%} acceptance of this pair's recorded greedy run, **k = {best} is the fastest" in text
    assert f"predicted {by_hand(alpha, best):.2f}x over target-only decoding" in text
    assert "k = " not in choice_text(CPU_LIKE, dataclasses.replace(SAME_PAIR, draft="x"), RECORDED)


def test_the_status_line_says_whether_a_bfloat16_target_pays_on_this_cpu():
    native = choice_text(CPU_LIKE, SAME_PAIR, None)
    assert "This CPU computes bfloat16 natively" in native and "**target dtype bfloat16**" in native
    assert "a different claim from the float32 target's" in native
    why = "this CPU has no native bfloat16 arithmetic, so a bfloat16 target would be emulated: the float32 target stays"
    emulated = choice_text(CPU_LIKE, dataclasses.replace(SAME_PAIR, bf16_refusal=why), None)
    assert emulated == f"Target dtype: {why}."
    gpu = dataclasses.replace(SAME_PAIR, device="cuda", target_dtype="bfloat16")
    assert "bfloat16" not in choice_text(CPU_LIKE, gpu, None)       # a GPU's target is bfloat16 already


def test_the_button_sets_the_chain_k_and_a_bfloat16_target_where_native():
    """"Use the fastest here" sets what the line says: the k by hand, a chain with the draft model, and the bfloat16
    target only where the CPU computes it natively; each control the choice does not name keeps its value."""
    alpha = recorded_acceptance(RECORDED, SAME_PAIR)
    best = max((1, 2, 3, 4, 5, 6, 8), key=lambda k: by_hand(alpha, k))
    ready = LoadStatus("qwen-coder", "ready", 1.0, "", 9.0, device_costs=CPU_LIKE, machine=SAME_PAIR)
    k, adaptive, nodes, drafter, dtype, draft_dtype = use_fastest(ready, RECORDED)
    assert (k["value"], adaptive["value"], nodes["value"], drafter["value"], dtype["value"]) == (
        best, False, 0, MODEL_DRAFTER, "bfloat16")
    assert draft_dtype == {"__type__": "update"}             # SAME_PAIR's CPU runs no int4 kernel: the draft stays
    assert button_update(ready, RECORDED) == {"__type__": "update", "visible": True, "value": (
        f"Use the fastest here: a chain of k = {best} with the draft model and a bfloat16 target")}
    assert "**Use the fastest here** (beside Run) sets these" in choice_text(CPU_LIKE, SAME_PAIR, RECORDED)
    emulated = dataclasses.replace(ready, machine=dataclasses.replace(SAME_PAIR, bf16_refusal="emulated here"))
    assert use_fastest(emulated, RECORDED)[4] == {"__type__": "update"}         # the target dtype is left alone
    assert button_update(emulated, RECORDED)["value"].endswith(f"k = {best} with the draft model")
    other_pair = dataclasses.replace(ready, machine=dataclasses.replace(SAME_PAIR, draft="x"))
    assert [update.get("value") for update in use_fastest(other_pair, RECORDED)] == [None, None, None, None, "bfloat16",
                                                                                       None]
    nothing = dataclasses.replace(other_pair, machine=dataclasses.replace(SAME_PAIR, draft="x", bf16_refusal="no"))
    assert not fastest_here(CPU_LIKE, nothing.machine, RECORDED).applies
    assert button_update(nothing, RECORDED) == {"__type__": "update", "visible": False}
    loading = dataclasses.replace(ready, state="loading")
    assert button_update(loading, RECORDED)["visible"] is False and button_update(None, RECORDED)["visible"] is False


def test_the_button_sets_an_int4_draft_where_the_cpu_runs_it_and_the_draft_is_int8():
    int4_here = dataclasses.replace(SAME_PAIR, int4_draft_pays=True)
    ready = LoadStatus("qwen-coder", "ready", 1.0, "", 9.0, device_costs=CPU_LIKE, machine=int4_here)
    assert use_fastest(ready, RECORDED)[5] == {"__type__": "update", "value": "int4"}
    assert button_update(ready, RECORDED)["value"].endswith("with the draft model, a bfloat16 target and an int4 draft")
    text = choice_text(CPU_LIKE, int4_here, RECORDED)
    assert "**Draft dtype int4**" in text and "never the output" in text
    for machine in (dataclasses.replace(int4_here, draft_dtype="float32"),          # a float draft: left as chosen
                    dataclasses.replace(int4_here, device="cuda", target_dtype="bfloat16")):
        assert not fastest_here(CPU_LIKE, machine, RECORDED).int4_draft
    only_int4 = dataclasses.replace(int4_here, draft="x", bf16_refusal="no")        # nothing else to set: still applies
    assert [update.get("value") for update in use_fastest(dataclasses.replace(ready, machine=only_int4), RECORDED)] == [
        None, None, None, None, None, "int4"]


def test_a_cpu_preload_measures_its_costs_and_the_page_says_the_choice():
    runner = EngineRunner(device="cpu")
    runner.preload(ModelChoice(preset="tiny-random")).join(300)
    status = runner.load_status()
    assert status.state == "ready", status.message
    costs, machine = status.device_costs, status.machine
    assert costs is not None and costs.device == "cpu" and costs.cache == "dynamic"
    assert costs.ks == [1, 2, 3, 4, 5, 6, 8] and costs.target_token_ms > 0 and costs.draft_token_ms > 0
    assert machine.device == "cpu" and machine.target_dtype == "float32" and machine.draft
    assert machine.bf16_refusal == native_bf16_refusal()             # this CPU's own answer
    assert machine.int4_draft_pays == int4_draft_pays()
    assert machine.others_busy is not None and 0.0 <= machine.others_busy <= 1.0     # read from /proc/stat
    text = load_status_text(status, RECORDED)
    assert "**Measured on this CPU when the pair loaded** (dynamic cache, no graphs)" in text
    said = ("This CPU computes bfloat16 natively" if machine.bf16_refusal is None
            else f"Target dtype: {machine.bf16_refusal}.")
    assert said in text
    assert machine.draft != RECORDED.config.draft and "is the fastest here" not in text    # not the recorded pair: no k
    assert ("**Use the fastest here**" in text) == (machine.bf16_refusal is None)    # a bfloat16 target to set, or nothing


def test_a_load_without_facts_says_only_what_it_measured():
    status = LoadStatus("qwen-coder", "ready", 1.0, "models ready", 12.0, device_costs=CPU_LIKE)
    text = load_status_text(status, RECORDED)
    assert "Measured on this CPU" in text and "fastest here" not in text


def test_the_choice_reads_verify_costs_on_a_line_fitted_over_k():
    """Two loads of the default pair on the same CPU named k = 5 (2.23x) and then k = 3 (1.99x): three repeats per k
    scatter the verify costs enough to move the argmax. The choice reads them on their least-squares line over k
    (the oracle: Python's statistics.linear_regression), so a bump at one k does not pick it; the plant (the raw,
    bumpy costs) picks the bump."""
    import statistics
    ks = (1, 2, 3, 4, 5, 6, 8)
    bumpy = DeviceCosts("cpu", "dynamic", False, target_token_ms=100.0, draft_token_ms=10.0,
                        verify_ms=tuple((k, 100.0 + 10.0 * k + (-25.0 if k == 3 else 8.0 if k == 5 else 0.0))
                                        for k in ks))
    slope, intercept = statistics.linear_regression(list(ks), [ms for _, ms in bumpy.verify_ms])
    assert all(ms == pytest.approx(intercept + slope * k) for k, ms in bumpy.fitted().verify_ms)
    alpha = recorded_acceptance(RECORDED, SAME_PAIR)

    def speedup(k: int, verify_ms: float) -> float:
        return ((1 - alpha ** (k + 1)) / (1 - alpha)) / (k * 0.1 + verify_ms / 100.0)
    best = max(ks, key=lambda k: speedup(k, intercept + slope * k))
    bump = max(ks, key=lambda k: speedup(k, dict(bumpy.verify_ms)[k]))
    assert bump == 3 and best != 3                                   # the bump would win on the raw costs
    assert f"**k = {best} is the fastest here" in choice_text(bumpy, SAME_PAIR, RECORDED)
    assert bumpy.best(alpha)[0] == 3                                 # the plant: unfitted, the bump is picked


def test_the_share_other_programs_used_is_their_busy_time_over_every_cpus_time():
    """By hand from two /proc/stat lines 100 ticks a second apart: the machine was busy 3.5 s (user 2.0, system 0.5,
    steal 1.0: another virtual machine's) and idle 1.0 s; this process used 0.5 s of it; others 3.0 of 4.5 s."""
    before = read_cpu_times("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3", 1.0, 100)
    after = read_cpu_times("cpu  300 0 100 900 50 0 0 100 0 0\ncpu0 1 2 3", 1.5, 100)
    assert (after.busy_s - before.busy_s, after.idle_s - before.idle_s) == (3.5, 1.0)
    assert others_share(before, after) == pytest.approx(3.0 / 4.5)
    assert others_share(before, CpuTimes(before.busy_s + 1.0, before.idle_s + 1.0, before.own_s + 1.0)) == 0.0
    with pytest.raises(ValueError, match="all-CPU line"):
        read_cpu_times("intr 1 2 3", 0.0, 100)


@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="Linux's /proc/stat")
def test_a_program_spinning_beside_the_measurement_is_counted_whole():
    """The law on a real machine, busy or idle: the time another program spent on the CPUs while SpecViz measured is
    inside what the share counts (its own CPU time, /proc/PID/stat, less two ticks of rounding). The test waits for
    the spinner to have used half a second of CPU, not for a time to pass."""
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_s(pid: int) -> float:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks             # utime, stime

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        before, spun = now(), cpu_s(spinner.pid)
        while cpu_s(spinner.pid) - spun < 0.5:
            os.sched_yield()
        after, spun = now(), cpu_s(spinner.pid) - spun
    finally:
        spinner.kill()
        spinner.wait()
    capacity = (after.busy_s + after.idle_s) - (before.busy_s + before.idle_s)
    assert others_share(before, after) * capacity >= spun - 2 / ticks, (others_share(before, after), capacity, spun)


def test_costs_measured_beside_other_programs_are_said_to_be_high():
    status = LoadStatus("qwen-coder", "ready", 1.0, "models ready", 12.0, device_costs=CPU_LIKE)
    for share, warned in ((None, False), (BUSY_SHARE - 0.01, False), (BUSY_SHARE, True), (0.62, True)):
        text = load_status_text(dataclasses.replace(status, machine=dataclasses.replace(SAME_PAIR, others_busy=share)),
                                RECORDED)
        assert ("while these costs were measured" in text) == warned, (share, text)
    assert "**Other programs used 62% of this machine's CPUs while these costs were measured**" in text
    assert text.index("Other programs used") < text.index("fastest here")   # said beside the costs, before the choice


class PlantedClock:
    """A step clock reading planted times, one per mark: what a busy machine does to one repeat, without timing."""

    def __init__(self, times: list[float]):
        self.times = iter(times)

    def mark(self) -> float:
        return next(self.times)

    def between(self, start: float, end: float) -> float:
        return end - start


def test_a_cpus_probe_keeps_each_phases_fastest_repeat_where_a_gpus_keeps_the_mean():
    """Three repeats of a k = 1 step (marks: start, drafted, verified), the second one's draft slowed to 10 ms by
    another program: the CPU's probe keeps 1 ms, the mean would say 4; the target token likewise."""
    from engine.decode.kv import KVCache
    from engine.loading.cost_probe import CONTEXT_TOKENS, _mean, _time_step, _time_target_tokens
    from engine.loading.tiny import build_tiny_pair
    pair = build_tiny_pair()
    target, draft = (KVCache(model, pair.vocab_size, None, CONTEXT_TOKENS + 2) for model in (pair.target, pair.draft))
    for cache in (target, draft):
        cache.forward([5, 6, 7], num_logits=1)
    marks = [0, 1, 3, 3, 13, 15, 15, 16, 18]
    assert _time_step(target, draft, PlantedClock(marks), 1, 0, 3, min) == (1, 2)
    assert _time_step(target, draft, PlantedClock(marks), 1, 0, 3, _mean) == (4, 2)
    assert _time_target_tokens(target, PlantedClock([0, 5, 5, 25, 25, 30]), 0, 3, min) == 5      # each repeat alone
    assert _time_target_tokens(target, PlantedClock([0, 30]), 0, 3) == 10                        # one interval / 3


def test_the_cpus_probe_at_load_asks_for_the_fastest_repeats(monkeypatch):
    """Through measure_costs as engine/loading/machine_probe.py calls it: the planted slow repeat is not in the costs."""
    import engine.loading.cost_probe as cost_probe
    from engine.loading.machine_probe import probe_machine
    from engine.loading.tiny import build_tiny_pair
    marks = [0, 1, 3, 3, 13, 15, 15, 16, 18] + [20, 25, 25, 45, 45, 50]     # the k = 1 steps, then 3 target tokens
    monkeypatch.setattr(cost_probe, "StepClock", lambda device: PlantedClock(marks))
    monkeypatch.setattr("engine.loading.machine_probe.CPU_PROBED_KS", (1,))
    monkeypatch.setattr("engine.loading.machine_probe.CPU_WARMUPS", 0)
    pair = build_tiny_pair()
    costs, _ = probe_machine(pair, lambda fraction, message: None)
    assert (costs.target_token_ms, costs.draft_token_ms, costs.verify_ms) == (5, 1, ((1, 2),))
