"""What the tour reads: the recorded traces, lab runs, sweep and race the page shows (assets/), each optional."""

from __future__ import annotations

from dataclasses import dataclass

from engine.formats.race import Race
from engine.formats.sweep_reader import SweepTable
from engine.formats.trace import Trace
from specviz.assets import DEMO_TRACE, SAMPLED_TRACE, DemoTrace
from specviz.lab.views import LabSet


@dataclass(frozen=True)
class TourSources:
    """The page's recorded runs, by what the chapters need; a missing one leaves its chapters out."""

    greedy: Trace | None = None
    sampled: Trace | None = None
    greedy_name: str = DEMO_TRACE
    sampled_name: str = SAMPLED_TRACE
    lab: LabSet | None = None
    sweep: SweepTable | None = None
    race: Race | None = None


def tour_sources(demo: DemoTrace, lab: LabSet | None, sweep: SweepTable | None, race: Race | None) -> TourSources:
    """The sources from what the page was built with: the Run tab's recorded greedy and sampled traces (the
    first of each kind it offers), the Lab's set, Explore's sweep and the Race tab's race."""
    offered = demo.offered()
    greedy = next(((name, trace) for name, trace in offered
                   if trace.config.is_greedy and not trace.config.is_tree), (DEMO_TRACE, None))
    sampled = next(((name, trace) for name, trace in offered
                    if not trace.config.is_greedy and not trace.config.is_tree), (SAMPLED_TRACE, None))
    return TourSources(greedy=greedy[1], sampled=sampled[1], greedy_name=greedy[0], sampled_name=sampled[0],
                       lab=lab, sweep=sweep, race=race)
