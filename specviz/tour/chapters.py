"""The tour's chapters in order, built from what the page shows (specviz/tour/sources.py); a chapter whose
recording is missing is left out, so the tour never quotes a number the page cannot show."""

from __future__ import annotations

from specviz.tour.chapter import Chapter
from specviz.tour.run_chapters import bonus_and_carryover, caches_and_cut, greedy_step, residual_sum, sampled_step
from specviz.tour.sources import TourSources
from specviz.tour.tab_chapters import explore_gap, lab_stages, race, tree_gather


def build_tour(sources: TourSources) -> tuple[Chapter, ...]:
    """Chapters (1) to (9): a greedy step, the bonus and carryover, the caches' cut, a sampled step, the residual,
    the Lab's stages, Explore's gap, a token tree's gather, the race."""
    chapters = (
        greedy_step(sources.greedy, sources.greedy_name),
        bonus_and_carryover(sources.greedy, sources.greedy_name),
        caches_and_cut(sources.greedy, sources.greedy_name),
        sampled_step(sources.sampled, sources.sampled_name),
        residual_sum(sources.sampled, sources.sampled_name),
        lab_stages(sources.lab),
        explore_gap(sources.sweep),
        tree_gather(sources.lab),
        race(sources.race),
    )
    return tuple(chapter for chapter in chapters if chapter is not None)
