"""Run a race (engine/formats/race.py): the same prompt and config decoded target-only, then
speculatively, one after the other on the same loaded pair, every token's wall-clock time kept.

Fair by construction: both lanes start their clock before the prompt's prefill, run on the
same models in the same process, and both first run a few untimed tokens (WARMUP_TOKENS), so
one-time costs (first kernel calls, allocations) land in neither lane. The speculative lane
uses the light recorder (ids and verdicts only; engine/decode/recorder.py), so its clock holds
decoding, not the page's step detail; token texts are looked up after each lane's clock stops.

`run_race` is a generator: it yields a `RaceProgress` before each lane and after every
speculative step, so a server can step it on its compute thread and show progress, and
`should_stop` (asked between tokens and steps) ends it early with no race.
"""

from __future__ import annotations

from typing import Callable, Iterator

from engine.config import SpecConfig
from engine.decode.baseline import target_only
from engine.decode.speculative import SpeculativeEngine
from engine.formats.race import LaneToken, Race, RaceProgress, RaceStep, SpeculativeLane, TargetOnlyLane, TimedToken

WARMUP_TOKENS = 2


def run_race(pair, prompt: str, config: SpecConfig,
             should_stop: Callable[[], bool] = lambda: False) -> Iterator[RaceProgress]:
    """Yield progress, then `RaceProgress("done", n, race)`; nothing more once `should_stop()` is true."""
    engine = SpeculativeEngine(pair, detailed_trace=False)
    generation = engine.start(prompt, config)          # checks the prompt and the config before any model runs
    prompt_ids = list(generation.prompt.token_ids)
    config = generation.config                         # with the models, dtypes and kernels that really run
    yield RaceProgress("warm-up")
    warmup = config.replace(max_new_tokens=min(WARMUP_TOKENS, config.max_new_tokens))
    target_only(pair, prompt_ids, warmup)
    engine.generate(prompt, warmup)
    if should_stop():
        return
    yield RaceProgress("target-only")
    baseline = target_only(pair, prompt_ids, config, should_stop)
    if baseline.stopped:
        return
    slow = TargetOnlyLane(tuple(TimedToken(LaneToken(token_id, pair.token_text(token_id)), t_s)
                                for token_id, t_s in zip(baseline.token_ids, baseline.token_times_s)),
                          baseline.wall_s)
    yield RaceProgress("speculative")
    generation = engine.start(prompt, config)
    ends, emitted = [], []
    while not generation.is_done:
        if should_stop():
            return
        record = generation.step()
        ends.append(generation.elapsed_s)              # its clock runs only inside steps, not while paused here
        emitted.append([(token.id, token.kind) for token in record.emitted])
        yield RaceProgress("speculative", sum(len(tokens) for tokens in emitted))
    steps = tuple(RaceStep(t_s, tuple(LaneToken(token_id, pair.token_text(token_id), kind) for token_id, kind in tokens))
                  for t_s, tokens in zip(ends, emitted))
    race = Race(prompt, config, slow, SpeculativeLane(steps, generation.elapsed_s), warmup.max_new_tokens)
    yield RaceProgress("done", len(race.speculative.token_ids), race)
