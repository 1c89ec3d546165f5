"""The strict reader of `specviz.trace/2` (and /1) documents: `parse_trace(data) -> Trace`.

Every field is read through engine/formats/trace_fields.py (type, range, path in the message); then
each step is checked on its own (k, verdict order, emitted kinds; a tree step's tree,
engine/formats/trace_tree.py), the steps together (indexes,
context lengths, EOS last, output = emitted tokens, summary counts) and each cache's lengths
(a step starts where the last one ended; in /2 the cutoff is what was removed and stale only
grows). A document either passes all of it or raises one TraceFormatError.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from engine.config import CACHE_KINDS, MAX_K, ConfigError, SpecConfig
from engine.device_costs import DeviceCosts
from engine.metrics import BaselineStats, FirstDifference
from engine.records import (Alternative, CacheLengths, DraftToken, EmittedToken, StepRecord, StepTiming, TargetToken,
                            Token)
from engine.formats.trace import SCHEMA, SCHEMA_V1, SPLITS, TextTokens, Trace, TraceFormatError, cache_records
from engine.formats.trace_audit import parse_audit
from engine.formats.trace_tree import check_tree, parse_tree
from engine.formats.trace_fields import (CONFIG_KINDS, DRAFT_COUNT, DRAFT_ORIGIN, EMIT_KIND, PROBABILITY,
                                         PROBABILITY_OR_NULL, TEXT, VERDICT, WHOLE, WHOLE_OR_NULL, FieldReader, Kind)

CACHE_KIND = Kind(lambda v: isinstance(v, str) and v in CACHE_KINDS, f"one of {', '.join(CACHE_KINDS)}")
SPLIT_KIND = Kind(lambda v: isinstance(v, str) and v in SPLITS, f"one of {', '.join(SPLITS)}")


def _alternatives(reader: FieldReader) -> tuple[Alternative, ...]:
    return tuple(Alternative(r.int("id"), r.str("text"), r.prob("prob")) for r in reader.items("top", optional=True))


def _cache(reader: FieldReader | None) -> CacheLengths | None:
    if reader is None:
        return None
    return CacheLengths(reader.int("before"), reader.int("after_forward"), reader.int("cutoff"), reader.int("after_cutoff"),
                        reader.int("stale", optional=True), masked=reader.int("masked", optional=True),
                        capacity=reader.int("capacity", optional=True))


def _checkcache_records(steps: tuple[StepRecord, ...], schema: str) -> None:
    """Each cache's lengths tell one story: a step starts where the last one ended and its forward
    only appends. A /2 file records `stale` for every cache and its cutoff is what was removed
    (after_cutoff = after_forward - cutoff, stale never shrinks); a /1 file has no `stale` (unknown)
    and its lab modes recorded a cutoff that was never removed, so only the first rule applies."""
    previous: dict[str, CacheLengths] = {}
    for position, step in enumerate(steps):
        for name, cache in cache_records(step):
            where = f"steps[{position}].kv.{name}"
            if schema == SCHEMA and cache.stale is None:
                raise TraceFormatError(f"missing field {where}.stale ({SCHEMA} records stale positions)")
            if schema == SCHEMA_V1 and cache.stale is not None:
                raise TraceFormatError(f"{where}.stale is not part of {SCHEMA_V1}: write the file as {SCHEMA}")
            last = previous.get(name)
            if last is not None and cache.before != last.after_cutoff:
                raise TraceFormatError(f"{where}.before is {cache.before} but the step before ended at "
                                       f"{last.after_cutoff}")
            if cache.after_forward < cache.before:
                raise TraceFormatError(f"{where}.after_forward ({cache.after_forward}) is below before ({cache.before})")
            if schema == SCHEMA:
                _check_cutoff(cache, last, where)
            previous[name] = cache


def _check_cutoff(cache: CacheLengths, last: CacheLengths | None, where: str) -> None:
    if cache.after_cutoff != cache.after_forward - cache.cutoff:
        raise TraceFormatError(f"{where}.after_cutoff ({cache.after_cutoff}) must be after_forward "
                               f"({cache.after_forward}) - cutoff ({cache.cutoff})")
    if cache.capacity is not None and cache.after_forward > cache.capacity:
        raise TraceFormatError(f"{where}.after_forward ({cache.after_forward}) exceeds the static cache's capacity "
                               f"{cache.capacity}")
    if (cache.masked is None) != (cache.capacity is None):
        raise TraceFormatError(f"{where} needs both masked and capacity (a static cache) or neither (a dynamic one)")
    if cache.masked is not None and cache.after_cutoff + cache.masked > cache.capacity:
        raise TraceFormatError(f"{where}.masked ({cache.masked}) rows past after_cutoff ({cache.after_cutoff}) do not "
                               f"fit in the static cache's capacity {cache.capacity}")
    if cache.stale > cache.after_cutoff:
        raise TraceFormatError(f"{where}.stale ({cache.stale}) exceeds the cache length {cache.after_cutoff}")
    if last is not None and cache.stale < last.stale:
        raise TraceFormatError(f"{where}.stale fell from {last.stale} to {cache.stale} (stale positions only pile up)")


def _parse_step(r: FieldReader) -> StepRecord:
    draft = tuple(DraftToken(d.get("id", WHOLE_OR_NULL), d.str("text"), d.prob("q", optional=True), _alternatives(d),
                             d.get("origin", DRAFT_ORIGIN, optional=True) or "engine") for d in r.items("draft"))
    target = tuple(TargetToken(t.get("id", WHOLE_OR_NULL), t.str("text"), t.prob("p", optional=True), _alternatives(t))
                   for t in r.items("target"))
    k = r.get("k", DRAFT_COUNT, optional=True)
    k = len(draft) if k is None else k
    accept_prob = r.values("accept_prob", PROBABILITY_OR_NULL, optional=True)
    draws = r.values("draws", PROBABILITY_OR_NULL, optional=True)
    kv = r.obj("kv")
    timing = r.obj("timing_ms")
    step = StepRecord(
        index=r.int("index"), context_len=r.int("context_len"), k=k,
        carryover=tuple(Token(c.int("id"), c.str("text")) for c in r.items("carryover", optional=True)),
        draft=draft, target=target, verdicts=r.values("verdicts", VERDICT),
        accept_prob=(None,) * k if accept_prob is None else accept_prob,
        draws=(None,) * k if draws is None else draws,
        num_accepted=r.int("num_accepted"),
        emitted=tuple(EmittedToken(e.int("id"), e.str("text"), e.get("kind", EMIT_KIND)) for e in r.items("emitted")),
        kv_target=_cache(kv.obj("target")), kv_draft=_cache(kv.obj("draft", optional=True)),
        timing=StepTiming(timing.num("draft"), timing.num("verify"), timing.num("total"),
                          timing.num("engine", optional=True)),
        eos=r.bool("eos", False),
        residual=tuple(Alternative(a.int("id"), a.str("text"), a.prob("prob")) for a in r.items("residual", optional=True)),
        overlap=r.values("overlap", PROBABILITY, optional=True) or (),
        tree=parse_tree(r.obj("tree", optional=True)),
    )
    _check_step(step, r.where)
    return step


def _check_step(step: StepRecord, where: str) -> None:
    problems = []
    if len(step.draft) != step.k or len(step.verdicts) != step.k:
        problems.append(f"has k={step.k} but {len(step.draft)} draft tokens and {len(step.verdicts)} verdicts")
    if len(step.target) != step.k + 1:
        problems.append(f"needs k+1={step.k + 1} target entries, has {len(step.target)}")
    if step.num_accepted != step.verdicts.count("accepted") or step.num_accepted > step.k:
        problems.append(f"says {step.num_accepted} accepted but its verdicts accept {step.verdicts.count('accepted')}")
    if len(step.emitted) > step.num_accepted + 1 or (not step.emitted):
        problems.append(f"emits {len(step.emitted)} tokens after {step.num_accepted} accepted")
    if len(step.accept_prob) != step.k or len(step.draws) != step.k or len(step.overlap) not in (0, step.k):
        problems.append(f"has k={step.k} but {len(step.accept_prob)} accept_prob, {len(step.draws)} draws and "
                        f"{len(step.overlap)} overlap values (k each; overlap may be empty)")
    if problems:
        raise TraceFormatError(f"{where} " + "; ".join(problems))
    _check_unknown_tokens(step, where)
    accepted, kind = ("accepted",) * step.num_accepted, "bonus" if step.num_accepted == step.k else "recovered"
    if step.verdicts != (accepted + ("rejected",) + ("unverified",) * step.k)[:step.k]:
        raise TraceFormatError(f"{where}.verdicts must be {step.num_accepted} accepted, then one rejected and the "
                               "rest unverified")
    if tuple(token.kind for token in step.emitted) != (accepted + (kind,))[:len(step.emitted)]:
        raise TraceFormatError(f"{where}.emitted must be the {step.num_accepted} accepted drafts, then the {kind} "
                               "token (cut short only by EOS or the token limit)")


def _check_unknown_tokens(step: StepRecord, where: str) -> None:
    """Another engine may leave tokens unknown (id null, docs/architecture.md §10), but never one it emitted."""
    for position, token in enumerate(step.draft):
        if (token.id is None) != (token.origin == "unknown"):
            raise TraceFormatError(f"{where}.draft[{position}] needs origin \"unknown\" exactly when its id is null")
    emitted = len(step.emitted)
    for name, tokens in (("draft", step.draft[:min(emitted, step.num_accepted)]), ("target", step.target[:emitted])):
        for position, token in enumerate(tokens):
            if token.id is None:
                raise TraceFormatError(f"{where}.{name}[{position}] stands for an emitted token, so its id must be known")


def parse_trace(data: Any) -> Trace:
    root = FieldReader(data, "")
    schema = data.get("schema")
    if schema not in (SCHEMA, SCHEMA_V1):
        raise TraceFormatError(f"schema must be {SCHEMA!r} or {SCHEMA_V1!r}, got {schema!r}")
    config = _config(root.obj("config"))
    prompt, output = root.obj("prompt"), root.obj("output")
    steps = tuple(_parse_step(r) for r in root.items("steps"))
    summary = root.obj("summary")
    baseline_reader = summary.obj("baseline", optional=True)
    baseline = None
    if baseline_reader is not None:
        difference = baseline_reader.obj("first_difference", optional=True)
        baseline = BaselineStats(baseline_reader.num("tokens_per_s"), baseline_reader.bool("identical", False),
                                 baseline_reader.num("wall_s", optional=True) or 0.0,
                                 baseline_reader.bool("exact_expected", True),
                                 FirstDifference(difference.int("token"), difference.int("step"),
                                                 difference.num("margin")) if difference is not None else None)
    trace = Trace(config=config,
                  prompt=TextTokens(prompt.str("text"), prompt.values("token_ids", WHOLE)),
                  output=TextTokens(output.str("text"), output.values("token_ids", WHOLE)),
                  steps=steps, wall_s=summary.num("wall_s"), baseline=baseline,
                  complete=root.bool("complete", True), device_costs=_device_costs(root.obj("device_costs", optional=True)),
                  eager_reason=root.get("eager_reason", TEXT, optional=True),
                  split=root.get("split", SPLIT_KIND, optional=True))
    _check_consistency(trace, summary)
    trace = dataclasses.replace(trace, audit=parse_audit(root.obj("audit", optional=True), len(trace.output.token_ids)))
    _checkcache_records(steps, schema)
    return trace


def _device_costs(reader: FieldReader | None) -> DeviceCosts | None:
    """A GPU's costs measured at load (engine/device_costs.py); the derived fields are not read back."""
    if reader is None:
        return None
    verify = reader.obj("verify_ms")
    ks = [key for key in verify.data if key.isdigit() and 1 <= int(key) <= MAX_K]
    if not ks or len(ks) != len(verify.data):
        raise TraceFormatError(f"{verify.where} must map draft lengths 1 to {MAX_K} (as text) to milliseconds")
    costs = DeviceCosts(device=reader.str("device"), cache=reader.get("cache", CACHE_KIND),
                        graphs=reader.bool("graphs", False), target_token_ms=reader.num("target_token_ms"),
                        draft_token_ms=reader.num("draft_token_ms", optional=True),
                        verify_ms=tuple(sorted((int(key), verify.num(key)) for key in ks)),
                        capture_s=reader.num("capture_s", optional=True) or 0.0)
    if costs.target_token_ms <= 0:
        raise TraceFormatError(f"{reader.path('target_token_ms')} must be above 0")
    return costs


def _config(reader: FieldReader) -> SpecConfig:
    """The run's SpecConfig: each field it knows, of its declared type, then SpecConfig's own checks."""
    fields = [field for field in dataclasses.fields(SpecConfig) if field.name in reader.data]
    values = {field.name: reader.get(field.name, CONFIG_KINDS[getattr(field.type, "__name__", field.type)])
              for field in fields}
    values.setdefault("cache", "dynamic")       # files from before the static cache ran on a dynamic one
    try:
        return SpecConfig(**values)
    except ConfigError as error:
        culprit = next((name for name in values if _complaint(values, name) != str(error)), None)
        raise TraceFormatError(f"{reader.where if culprit is None else reader.path(culprit)}: {error}") from None


def _complaint(values: dict[str, Any], default: str) -> str | None:
    """SpecConfig's complaint about `values` with the field `default` left at its default (None: no complaint)."""
    try:
        SpecConfig(**{name: value for name, value in values.items() if name != default})
    except ConfigError as error:
        return str(error)
    return None


def _check_consistency(trace: Trace, stored: FieldReader) -> None:
    committed = len(trace.prompt.token_ids)
    for position, step in enumerate(trace.steps):
        where = f"steps[{position}]"
        if step.index != position:
            raise TraceFormatError(f"{where}.index must be {position} (steps count from 0), got {step.index}")
        if step.context_len != committed:
            raise TraceFormatError(f"{where}.context_len must be {committed} (the prompt and the tokens emitted "
                                   f"before it), got {step.context_len}")
        if step.eos and position < len(trace.steps) - 1:
            raise TraceFormatError(f"{where}.eos is true, but steps follow it")
        check_tree(step, trace.config, where)
        static = trace.config.cache == "static"
        for name, cache in cache_records(step):
            if (cache.capacity is not None) != static:
                raise TraceFormatError(f"{where}.kv.{name} {'lacks' if static else 'has'} a capacity, but the run's "
                                       f"config.cache is {trace.config.cache!r} (a static cache records its capacity)")
        committed += step.num_emitted
    if trace.split == "unsplit" and any(step.k for step in trace.steps):
        raise TraceFormatError("an unsplit trace (split: \"unsplit\") has no verdicts: every step's k must be 0")
    emitted_ids = tuple(token.id for step in trace.steps for token in step.emitted)
    if emitted_ids != trace.output.token_ids:
        raise TraceFormatError("output.token_ids differ from the tokens its steps emitted")
    baseline = trace.baseline
    difference = baseline.first_difference if baseline is not None else None
    if difference is not None:
        where = "summary.baseline.first_difference"
        if baseline.identical:
            raise TraceFormatError(f"{where} is given, but summary.baseline.identical is true")
        if difference.token > len(emitted_ids) or difference.step >= max(len(trace.steps), 1):
            raise TraceFormatError(f"{where} points at new token {difference.token} of step {difference.step}, "
                                   f"past the run's {len(emitted_ids)} tokens in {len(trace.steps)} steps")
    derived = trace.summary
    for name in ("new_tokens", "steps", "drafted", "accepted"):
        if stored.int(name) != getattr(derived, name):
            raise TraceFormatError(f"summary.{name} is {stored.int(name)} but the steps give {getattr(derived, name)}")
