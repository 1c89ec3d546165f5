"""What a server accepts: the ranges of the run controls and, in hosted mode, which models.

A classroom server (the default) takes the page's full ranges and any model a user can
name: hub id, local folder or .gguf path. A public one (`python app.py --hosted`,
SPECVIZ_HOSTED=1, or any Hugging Face Space unless SPECVIZ_HOSTED=0) takes the presets'
models only, never a path on the server's disk, and smaller runs. Pure values and checks: the UI checks a request before any model
loads, and app.py's runner checks again before it loads one.

A vLLM server (docs/architecture.md §10) is an address the server itself connects to, so a hosted
server never takes one typed on the page: only those its operator lists (`--vllm-server URL`,
repeatable, and/or $SPECVIZ_VLLM_SERVERS, comma- or space-separated). A classroom server takes any.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Sequence

from engine.config import MAX_TREE_NODES, NGRAM_DRAFTER, ConfigError, SpecConfig
from engine.presets import PRESETS, TINY_RANDOM, looks_like_path
from engine.vllm.transport import VllmError, parse_address
from specviz.serving.runner import ModelChoice, RunRequest
from specviz.serving.space import on_space

HOSTED_ENV = "SPECVIZ_HOSTED"
SERVERS_ENV = "SPECVIZ_VLLM_SERVERS"
MIN_TOP_P = 0.05            # the top-p slider's floor (top-p 0 would keep no token)
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def preset_models() -> frozenset[str]:
    """Every model reference a preset names: hub ids, embedded GGUF and the built-in tiny pair."""
    references = {preset.target for preset in PRESETS.values()}
    references |= {preset.draft for preset in PRESETS.values() if preset.draft}
    return frozenset(references)


def hosted_from_env(environ: Mapping[str, str] = os.environ) -> bool:
    """Hosted mode's default: $SPECVIZ_HOSTED when it says yes (1, true, yes, on) or no (0, false, no,
    off), else on exactly when the app runs on a Hugging Face Space (a public Space that forgets the
    variable is safe; a private one opts out with SPECVIZ_HOSTED=0). Any other value is refused."""
    value = environ.get(HOSTED_ENV, "").strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if value:
        raise ConfigError(f"{HOSTED_ENV} must be 1 or 0 (or true/false, yes/no, on/off), got {environ[HOSTED_ENV]!r}")
    return on_space(environ)


def server_url(text: str) -> str:
    """The vLLM server address `text` in one spelling (http://host:port), so an allow-list entry and a
    page's entry compare equal however each was written; ConfigError with one sentence otherwise."""
    try:
        return parse_address(text).base_url
    except VllmError as error:
        raise ConfigError(str(error)) from None


def allowed_servers(listed: Sequence[str] = (), environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    """The vLLM servers an operator allows: each `--vllm-server` value and each entry of $SPECVIZ_VLLM_SERVERS
    (commas or spaces between them); ConfigError naming a malformed one."""
    entries = [*listed, *environ.get(SERVERS_ENV, "").replace(",", " ").split()]
    return frozenset(server_url(entry) for entry in entries)


@dataclass(frozen=True)
class Policy:
    """Limits of one server. The defaults are the page's own control ranges."""

    max_k: int = 16                      # draft tokens per step
    max_new_tokens: int = 512
    max_temperature: float = 2.0
    max_tree_nodes: int = MAX_TREE_NODES  # a token tree's node budget (0: a chain)
    hosted: bool = False                 # public: presets' models only, no local paths
    allowed_models: frozenset[str] = frozenset()   # custom model references accepted when hosted
    allowed_servers: frozenset[str] = frozenset()  # vLLM servers (server_url spelling) accepted when hosted

    @classmethod
    def hosted_default(cls, servers: frozenset[str] = frozenset()) -> "Policy":
        """The policy of a public server: short runs of the presets' models (and of the vLLM `servers`
        its operator allows)."""
        return cls(max_k=8, max_new_tokens=128, max_tree_nodes=16, hosted=True, allowed_models=preset_models(),
                   allowed_servers=servers)

    def check(self, request: RunRequest) -> None:
        """Raise ConfigError (one sentence) when this server does not run `request`."""
        self.check_config(request.config)
        self.check_models(request.models)

    def check_config(self, config: SpecConfig) -> None:
        self.check_ranges(config.k, config.max_new_tokens, config.temperature, config.tree_nodes)

    def within(self, config: SpecConfig) -> SpecConfig:
        """`config` with each control this server bounds held to its bound, and top-p to its slider's
        floor: what the page's sliders show for it (a recorded run made elsewhere may go past them)."""
        return config.replace(k=min(config.k, self.max_k), temperature=min(config.temperature, self.max_temperature),
                              max_new_tokens=min(config.max_new_tokens, self.max_new_tokens),
                              tree_nodes=min(config.tree_nodes, self.max_tree_nodes),
                              top_p=max(config.top_p, MIN_TOP_P))

    def check_ranges(self, k: int, max_new_tokens: int, temperature: float, tree_nodes: int = 0) -> None:
        """The controls this server bounds, each in its range (ConfigError naming the range otherwise)."""
        if not 1 <= k <= self.max_k:
            raise ConfigError(f"k must be a whole number from 1 to {self.max_k}{self._here}, got {k}")
        if not 1 <= max_new_tokens <= self.max_new_tokens:
            raise ConfigError(f"max new tokens must be a whole number from 1 to {self.max_new_tokens}{self._here}, "
                              f"got {max_new_tokens}")
        if not 0.0 <= temperature <= self.max_temperature:
            raise ConfigError(f"temperature must be between 0 and {self.max_temperature:g}, got {temperature:g}")
        if not 0 <= tree_nodes <= self.max_tree_nodes:
            raise ConfigError(f"tree nodes must be a whole number from 0 (a chain) to {self.max_tree_nodes}"
                              f"{self._here}, got {tree_nodes}")

    def check_server(self, text: str) -> str:
        """The address of the vLLM server `text` names (server_url), when this server may connect to it:
        a classroom server connects to any; a hosted one only to those its operator allows, so a page
        never makes it send requests to an address of the user's choosing. ConfigError otherwise."""
        url = server_url(text)
        if not self.hosted or url in self.allowed_servers:
            return url
        if not self.allowed_servers:
            raise ConfigError("This hosted server does not connect to vLLM servers typed on the page; its operator "
                              f"can allow some with --vllm-server URL or ${SERVERS_ENV}.")
        raise ConfigError(f"{url} is not a vLLM server this hosted server connects to; choose one of: "
                          f"{', '.join(sorted(self.allowed_servers))}.")

    def check_models(self, models: ModelChoice) -> None:
        if models.server:
            self.check_server(models.server)
            return
        if not self.hosted:
            return
        if models.preset:
            if models.preset not in PRESETS:
                raise ConfigError(f"unknown preset {models.preset!r}; choose one of: {', '.join(PRESETS)}")
            return
        for role, reference in (("draft", models.draft), ("target", models.target)):
            if not reference or (role == "draft" and reference == NGRAM_DRAFTER):   # loads nothing
                continue
            if looks_like_path(reference):
                raise ConfigError(f"the {role} model {reference!r} is a local path, and this hosted server does not "
                                  "load files from its disk: choose a preset or one of its hub models")
            if reference not in self.allowed_models:
                raise ConfigError(f"the {role} model {reference!r} is not one this hosted server runs; "
                                  f"choose a preset or one of: {', '.join(sorted(self.allowed_models))}")

    @property
    def note(self) -> str:
        """What the page says about this server's limits (empty for a classroom server)."""
        if not self.hosted:
            return ""
        hub = sorted(m for m in self.allowed_models if ":" not in m and not m.startswith(TINY_RANDOM + "/"))
        servers = (f" vLLM servers: {', '.join(sorted(self.allowed_servers))} only." if self.allowed_servers
                   else "")
        return (f"**Hosted mode**: this public server runs the presets' models only ({', '.join(hub)} and the "
                f"embedded ones; no local paths), with k up to {self.max_k}, up to {self.max_new_tokens} "
                f"new tokens per run and token trees of up to {self.max_tree_nodes} nodes.{servers}")

    @property
    def _here(self) -> str:
        return " on this hosted server" if self.hosted else ""
