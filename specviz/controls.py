"""The values of the run controls, and their translation into a validated RunRequest."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from engine.config import ConfigError, SpecConfig
from specviz.runner import CUSTOM, ModelChoice, RunRequest

MAX_PROMPT_CHARS = 8000


@dataclass(frozen=True)
class Controls:
    """Widget values in the order the layout passes them (see `names()`)."""

    preset: str
    draft: str
    target: str
    drafter: str
    prompt: str
    k: Any
    adaptive_k: bool
    temperature: Any
    top_p: Any
    top_k: Any
    max_new_tokens: Any
    seed: Any
    draft_dtype: str
    target_dtype: str
    with_baseline: bool

    @classmethod
    def names(cls) -> list[str]:
        return [field.name for field in fields(cls)]

    def to_request(self) -> RunRequest:
        """Check every value; raises ConfigError with one readable sentence on bad input."""
        prompt = (self.prompt or "").strip()
        if not prompt:
            raise ConfigError("The prompt is empty: type one or pick an example.")
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ConfigError(f"The prompt is {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}.")
        config = SpecConfig(
            k=_whole(self.k, "k"), adaptive_k=bool(self.adaptive_k), temperature=_real(self.temperature, "temperature"),
            top_p=_real(self.top_p, "top-p"), top_k=_whole(self.top_k, "top-k"),
            max_new_tokens=_whole(self.max_new_tokens, "max new tokens"), seed=_whole(self.seed, "seed"),
            drafter=self.drafter)
        return RunRequest(models=self._models(), prompt=prompt, config=config, with_baseline=bool(self.with_baseline))

    def _models(self) -> ModelChoice:
        dtypes = {"draft_dtype": self.draft_dtype or "float32", "target_dtype": self.target_dtype or "float32"}
        if self.preset != CUSTOM:
            if not self.preset:
                raise ConfigError("Choose a model preset, or 'custom' to type your own draft and target.")
            return ModelChoice(preset=self.preset, **dtypes)
        draft, target = (self.draft or "").strip(), (self.target or "").strip()
        if not target:
            raise ConfigError("Enter a target model for the custom pair (hub id, local folder or .gguf path).")
        if not draft and self.drafter == "model":
            raise ConfigError("Enter a draft model for the custom pair, or switch the drafter to n-gram.")
        return ModelChoice(draft=draft, target=target, **dtypes)


def _whole(value: Any, name: str) -> int:
    number = _real(value, name)
    if number != int(number):
        raise ConfigError(f"{name} must be a whole number, got {number:g}")
    return int(number)


def _real(value: Any, name: str) -> float:
    if value is None or value == "":
        raise ConfigError(f"{name} is empty: enter a number.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return number
