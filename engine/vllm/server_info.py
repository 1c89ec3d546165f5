"""What a vLLM server is: its model, version, speculation, whether it reports each step, and whether
its speculative method is the one the page was told.

`probe` decides from what the server itself publishes (docs/architecture.md §10, "Probe"):
- `/version` and `/v1/models`: its release and what it serves;
- `/metrics`: vLLM registers its `vllm:spec_decode_*` counters (one per draft position) only when it
  speculates, and SpecViz's CPU sampler fix (plugins/vllm_cpu_sampler_fix) adds its own gauge there;
- two short greedy completions whose output is pinned with `allowed_token_ids`, so what the server
  drafts depends on its method alone, whatever its model would say. After a context with no repeat
  (NO_REPEAT, then a token not in it) an n-gram lookup finds nothing and drafts nothing, while a
  draft model drafts on every step; after a context that repeats one token (REPEAT) every lookup
  matches, so even an n-gram server on vLLM's default (5, 5) lookup drafts, and its final chunk shows
  whether the per-step arrays come with each request (vLLM leaves them out of a request that never
  drafted: the old two-token probe could not tell, and refused every default n-gram server).
A server that returns other tokens than the pinned ones (it ignores `allowed_token_ids`) leaves the
method unchecked: `method_note` says so, and the page shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.config import MODEL_DRAFTER, NGRAM_DRAFTER
from engine.vllm.counters import parse_counters
from engine.vllm.transport import (DEFAULT_TIMEOUT_S, ServerAddress, Session, VllmError, parse_address,
                                   stream_post)

METHODS = ("draft_model", "ngram")
NO_REPEAT = (40, 41, 42, 43, 44, 45)        # a context no n-gram lookup matches, then PINNED_NEW (not in it)
PINNED_NEW = 50
REPEAT = (33,) * 8                          # one token repeated: any lookup of 1 to 7 tokens matches
FIX_GAUGE = "specviz_vllm_cpu_sampler_fix"  # plugins/vllm_cpu_sampler_fix's /metrics gauge (1 when it ran)
FIX_NAME = "SpecViz CPU sampler fix (vLLM #55005)"


def samples_wrongly(engine: str, temperature: float) -> bool:
    """True for a run of vLLM 0.32's CPU speculation at T > 0 without SpecViz's fix (`engine` as ServerInfo.engine
    writes it): as shipped it does not sample the target's law there (vLLM issue #55005)."""
    return temperature > 0 and engine.startswith("vllm 0.32") and FIX_NAME not in engine
DETAILED_FLAG = "--per-request-spec-decode-metrics detailed"


@dataclass(frozen=True)
class ServerInfo:
    address: ServerAddress
    model: str                      # the served model name (what a request's `model` names)
    root: str                       # what the server loaded: a folder or a hub id
    max_model_len: int | None
    version: str                    # "0.32.0"
    method: str                     # METHODS: given by the caller, checked against the server where it can be
    k: int | None                   # num_spec_tokens the server reported; None: no speculation
    detailed_metrics: bool | None   # per-step arrays come with each request; None: not seen yet (the run decides)
    dtype: str = ""                 # "" when not known (vLLM does not publish it)
    method_note: str = ""           # one sentence: how the method was checked, or why it was not
    cpu_sampler_fix: bool = False   # the server's /metrics says SpecViz's CPU sampler fix ran in it

    @property
    def engine(self) -> str:
        return f"vllm {self.version}" + (f" + {FIX_NAME}" if self.cpu_sampler_fix else "")

    @property
    def drafter(self) -> str:
        return NGRAM_DRAFTER if self.method == "ngram" else MODEL_DRAFTER

    @property
    def speculative(self) -> bool:
        return self.k is not None

    def check_usable(self, expected_model: str = "") -> None:
        """Raise VllmError (one sentence) unless SpecViz can draw this server's runs step by step."""
        if expected_model and expected_model not in (self.model, self.root):
            raise VllmError(f"The vLLM server at {self.address} serves {self.model!r} ({self.root}), not "
                            f"{expected_model!r}.")
        if not self.speculative:
            raise VllmError(f"The vLLM server at {self.address} runs without speculative decoding: start it with "
                            "--speculative-config (scripts/vllm.sh does).")
        if self.detailed_metrics is False:
            raise VllmError(f"The vLLM server at {self.address} does not report each step: start it with "
                            f"{DETAILED_FLAG} (scripts/vllm.sh does).")


@dataclass(frozen=True)
class ProbeRun:
    """One pinned probe completion: the tokens returned and the speculative statistics sent with them."""

    token_ids: tuple[int, ...]
    stats: dict[str, Any] | None    # metrics.speculative_decoding (0.32) or a choice's speculative_decoding_stats

    def honoured(self, pinned: int) -> bool:
        return bool(self.token_ids) and all(token == pinned for token in self.token_ids)

    @property
    def drafted(self) -> int:
        return int((self.stats or {}).get("num_draft_tokens") or 0)

    @property
    def has_arrays(self) -> bool:
        return bool((self.stats or {}).get("per_step_accepted"))


def _stats(data: dict[str, Any]) -> Any:
    found = (data.get("metrics") or {}).get("speculative_decoding")
    for choice in data.get("choices") or ():
        found = choice.get("speculative_decoding_stats") or found
    return found


def pinned_run(where: ServerAddress, model: str, prompt: tuple[int, ...], pinned: int, tokens: int,
               timeout_s: float) -> ProbeRun:
    """A greedy streamed completion allowed to emit `pinned` only (VllmError when it cannot be asked)."""
    body = {"model": model, "prompt": list(prompt), "max_tokens": tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}, "return_token_ids": True, "ignore_eos": True,
            "allowed_token_ids": [pinned]}
    ids: list[int] = []
    stats = None
    for arrival in stream_post(where, "/v1/completions", body, timeout_s, timeout_s):
        for choice in arrival.data.get("choices") or ():
            ids += [int(token) for token in choice.get("token_ids") or ()]
        stats = _stats(arrival.data) or stats
    return ProbeRun(tuple(ids), stats if isinstance(stats, dict) else None)


def published(session: Session) -> tuple[bool | None, int | None, bool]:
    """From /metrics: (speculates: None when it has no page), draft positions (k), the CPU sampler fix ran."""
    try:
        text = session.get_text("/metrics")
    except VllmError:
        return None, None, False
    fixed = any(line.startswith(FIX_GAUGE) and line.split()[-1] in ("1", "1.0") for line in text.splitlines())
    try:
        counters = parse_counters(text)
    except VllmError:
        return (False if "vllm:" in text else None), None, fixed     # vLLM's page without the counters
    return True, len(counters.accepted_per_pos) or None, fixed


def method_verdict(where: ServerAddress, method: str, no_repeat: ProbeRun, repeat: ProbeRun | None) -> str:
    """The sentence saying how `method` was checked against the server's drafting; VllmError when the server
    drafts as the other method does."""
    if not no_repeat.honoured(PINNED_NEW) or (repeat is not None and not repeat.honoured(REPEAT[0])):
        return (f"The {method} method is as told, not checked: the server did not keep to the tokens SpecViz's "
                "probe allowed.")
    if no_repeat.drafted:
        if method == "ngram":
            raise VllmError(f"The vLLM server at {where} drafted after a context with no repeat, which an n-gram "
                            "lookup cannot: it speculates with a draft model, so choose the draft-model method.")
        return "Checked: the server drafted after a context with no repeat, as a draft model does."
    if repeat is not None and repeat.drafted:
        if method == "draft_model":
            raise VllmError(f"The vLLM server at {where} drafted nothing after a context with no repeat and copies "
                            "after one: it speculates by n-gram lookup, so choose the n-gram method.")
        return "Checked: the server drafted only where the context repeats, as an n-gram lookup does."
    return (f"The {method} method is as told, not checked: the server drafted in neither of SpecViz's probes "
            "(its per-step counts are checked when the run ends).")


def probe(address: str | ServerAddress, method: str = "draft_model", dtype: str = "",
          timeout_s: float = DEFAULT_TIMEOUT_S) -> ServerInfo:
    """Ask the server what it serves and how it speculates (raises VllmError when it cannot be asked or
    drafts as another method than `method`)."""
    if method not in METHODS:
        raise VllmError(f"The speculative method must be one of {', '.join(METHODS)}, got {method!r}.")
    where = parse_address(address)
    with Session(where, timeout_s) as session:
        version, models = session.get_json("/version"), session.get_json("/v1/models")
        speculates, positions, fixed = published(session)
    try:
        card = models["data"][0]
        name, root = str(card["id"]), str(card.get("root") or card["id"])
        max_len = card.get("max_model_len")
        release = str(version["version"])
    except (KeyError, IndexError, TypeError):
        raise VllmError(f"The server at {where} does not describe its model as vLLM does: it is not a vLLM "
                        "server.") from None
    no_repeat = pinned_run(where, name, NO_REPEAT, PINNED_NEW, 2, timeout_s)
    runs = [no_repeat]
    repeat = None
    if not no_repeat.drafted and speculates is not False:
        repeat = pinned_run(where, name, REPEAT, REPEAT[0], 4, timeout_s)
        runs.append(repeat)
    reported = [run.stats for run in runs if run.stats is not None]
    k = next((int(stats["num_spec_tokens"]) for stats in reported if isinstance(stats.get("num_spec_tokens"), int)),
             positions)
    if speculates is False or not k or k < 1:
        k = None
    if any(run.has_arrays for run in runs):
        detailed: bool | None = True
    elif k is not None and (not reported or any(run.drafted for run in runs)):
        detailed = False        # it speculates, and a request that drafted came back without its arrays
    else:
        detailed = None
    note = method_verdict(where, method, no_repeat, repeat) if k is not None else ""
    return ServerInfo(where, name, root, max_len if isinstance(max_len, int) else None, release, method, k, detailed,
                      dtype, note, fixed)
