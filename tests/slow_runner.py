"""app.py's EngineRunner with the real engine, slowed down on demand: each step waits `delay` seconds
first, so a Stop, or a second session, lands while a run is under way however fast the machine."""

from __future__ import annotations

import time

from app import EngineRunner
from engine.formats.trace import Trace


class SlowGeneration:
    """An engine generation that waits `delay` seconds before each step; `started` counts the steps it has begun."""

    def __init__(self, generation, delay: float):
        self._generation, self._delay = generation, delay
        self.started = 0

    @property
    def is_done(self) -> bool:
        return self._generation.is_done

    def step(self):
        self.started += 1
        time.sleep(self._delay)
        return self._generation.step()

    def trace(self) -> Trace:
        return self._generation.trace()


class SlowRunner(EngineRunner):
    """EngineRunner on the CPU whose generations can be slowed down (`delay` seconds before each step);
    `slowed` lists the slowed generations, one per run started."""

    def __init__(self, delay: float = 0.0, default_preset: str | None = None):
        super().__init__(device="cpu", default_preset=default_preset)
        self.delay = delay
        self.slowed: list[SlowGeneration] = []

    def start(self, request, progress):
        generation = super().start(request, progress)
        if not self.delay:
            return generation
        self.slowed.append(SlowGeneration(generation, self.delay))
        return self.slowed[-1]
