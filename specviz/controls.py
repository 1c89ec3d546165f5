"""The values of the run controls, and their translation into a validated RunRequest.

A run on a vLLM server (`preset == VLLM_SERVER`, the address in `server`) is refused, in one
sentence, the settings the server cannot honour: token trees, adaptive k and the target-only comparison;
top-k is for the server's probe to decide (vLLM 0.32's speculation crashes on it unless the server runs
SpecViz's CPU sampler fix: engine/vllm/stream.py `completion_body`; docs/architecture.md §10).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config import DRAFT_DTYPES, MODEL_DRAFTER, NGRAM_DRAFTER, TARGET_DTYPES, ConfigError, SpecConfig
from specviz.serving.policy import Policy, server_url
from specviz.serving.runner import CUSTOM, VLLM_SERVER, ModelChoice, RunRequest
from specviz.updates import ComponentFields

MAX_PROMPT_CHARS = 8000


@dataclass(frozen=True)
class Controls(ComponentFields):
    """Widget values in the order the layout passes them (see `names()`)."""

    preset: str
    draft: str
    target: str
    drafter: str
    prompt: str
    k: Any
    adaptive_k: bool
    tree_nodes: Any
    tree_branch: Any
    temperature: Any
    top_p: Any
    top_k: Any
    max_new_tokens: Any
    seed: Any
    draft_dtype: str
    target_dtype: str
    with_baseline: bool
    server: Any = ""                 # the vLLM server's address, read when `preset` is VLLM_SERVER

    def to_request(self, policy: Policy = Policy()) -> RunRequest:
        """Check every value, whatever its type (API callers send any JSON); raises ConfigError
        with one readable sentence on bad input, or when `policy` (this server's limits) refuses it."""
        prompt = checked_prompt(_text(self.prompt, "the prompt"))
        k, max_new_tokens = _whole(self.k, "k"), _whole(self.max_new_tokens, "max new tokens")
        temperature, tree_nodes = _real(self.temperature, "temperature"), _whole(self.tree_nodes, "tree nodes")
        policy.check_ranges(k, max_new_tokens, temperature, tree_nodes)    # the page's ranges, named in the message
        config = SpecConfig(
            k=k, adaptive_k=_flag(self.adaptive_k, "adaptive k"), tree_nodes=tree_nodes,
            tree_branch=_whole(self.tree_branch, "tree branch"), temperature=temperature,
            top_p=_real(self.top_p, "top-p"), top_k=_whole(self.top_k, "top-k"), max_new_tokens=max_new_tokens,
            seed=_whole(self.seed, "seed"), drafter=_text(self.drafter, "the drafter"))
        request = RunRequest(models=self._models(), prompt=prompt, config=config,
                             with_baseline=_flag(self.with_baseline, "the target-only comparison"))
        policy.check(request)
        if request.models.server:
            check_server_run(request)
        return request

    def _models(self) -> ModelChoice:
        dtypes = {"draft_dtype": _text(self.draft_dtype, "draft dtype") or "auto",
                  "target_dtype": _text(self.target_dtype, "target dtype") or "auto"}
        for name, allowed in (("draft_dtype", DRAFT_DTYPES), ("target_dtype", TARGET_DTYPES)):
            if dtypes[name] not in allowed:
                raise ConfigError(f"{name.replace('_', ' ')} must be one of {', '.join(allowed)}, got {dtypes[name]!r}")
        return choose_models(_text(self.preset, "the preset"), _text(self.draft, "the draft model"),
                             _text(self.target, "the target model"), self.drafter, **dtypes,
                             server=_text(self.server, "the vLLM server's address"))


def check_server_run(request: RunRequest) -> None:
    """ConfigError (one sentence) for a setting a vLLM server's run cannot honour."""
    config = request.config
    refusals = [(config.tree_nodes > 0, "token trees (set tree nodes to 0)"),
                (config.adaptive_k, "adaptive k (its k is the server's own)"),
                (request.with_baseline, "the target-only comparison (untick it)")]
    for refused, what in refusals:
        if refused:
            raise ConfigError(f"A run on a vLLM server cannot use {what}.")


def checked_prompt(prompt: str | None) -> str:
    """The prompt without surrounding blanks; ConfigError when it is empty or too long."""
    text = (prompt or "").strip()
    if not text:
        raise ConfigError("The prompt is empty: type one or pick an example.")
    if len(text) > MAX_PROMPT_CHARS:
        raise ConfigError(f"The prompt is {len(text)} characters; the limit is {MAX_PROMPT_CHARS}.")
    return text


def choose_models(preset: str, draft: str, target: str, drafter: str = MODEL_DRAFTER, draft_dtype: str = "auto",
                  target_dtype: str = "auto", server: str = "") -> ModelChoice:
    """The pair to load: a preset, custom draft and target, or a vLLM server's address (its drafter
    tells what the server speculates with); ConfigError with one sentence otherwise."""
    dtypes = {"draft_dtype": draft_dtype, "target_dtype": target_dtype}
    if preset == VLLM_SERVER:
        if not (server or "").strip():
            raise ConfigError("Enter the vLLM server's address (http://host:port), or choose a model preset.")
        return ModelChoice(server=server_url(server), server_method="ngram" if drafter == NGRAM_DRAFTER else "draft_model",
                           target=(target or "").strip())      # the model the server must serve ("" = any)
    if preset != CUSTOM:
        if not preset:
            raise ConfigError("Choose a model preset, or 'custom' to type your own draft and target.")
        return ModelChoice(preset=preset, **dtypes)
    draft, target = (draft or "").strip(), (target or "").strip()
    if not target:
        raise ConfigError("Enter a target model for the custom pair (hub id, local folder or .gguf path).")
    if not draft and drafter == MODEL_DRAFTER:
        raise ConfigError("Enter a draft model for the custom pair, or switch the drafter to n-gram.")
    return ModelChoice(draft=draft, target=target, **dtypes)


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be text, got {type(value).__name__}")
    return value


def _flag(value: Any, name: str) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    raise ConfigError(f"{name} must be true or false, got {value!r}")


def _whole(value: Any, name: str) -> int:
    number = _real(value, name)
    if number != int(number):
        raise ConfigError(f"{name} must be a whole number, got {number:g}")
    return int(number)


def _real(value: Any, name: str) -> float:
    if value is None or value == "":
        raise ConfigError(f"{name} is empty: enter a number.")
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{name} must be a number, got {str(value)[:40]!r}") from None
    if number != number or number in (float("inf"), float("-inf")):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return number
