"""A load run (`specviz.load/1`, engine/formats/load_format.py) read back strictly: a person may
upload any file, so anything off is one LoadFormatError naming the field. Numbers must lie where a
recorded run can put them (times and speeds finite and never negative, percentiles in order, a
request's send <= first token <= done, accepted <= drafted); the grid is exactly `settings.levels`
on two servers, the speculative one first; the speculative server's levels carry acceptance, counters
and each request's trace (a whole specviz.trace/2, read by the trace reader), the baseline's none;
a level's output tokens are its requests'; the server without speculation may carry the forward probe
(rising sizes, each with its timings). The whole document is returned as read. Torch-free."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.config import MAX_K, MAX_TEMPERATURE
from engine.formats.trace_fields import MAX_WHOLE, is_text
from engine.formats.json_document import parse_json, read_document
from engine.formats.trace import Trace, TraceFormatError
from engine.formats.load_format import LOAD_SCHEMA, MAX_LOAD_BYTES, METHODS, UNFINISHED_SCHEMA, LoadFormatError

SPREAD = ("p50", "p90", "p99")
COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens")


def _fail(where: str, what: str) -> LoadFormatError:
    return LoadFormatError(f"{where}: {what}")


def _get(data: dict[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise _fail(f"{where}.{key}" if where else key, "missing")
    return data[key]


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "must be an object")
    return value


def _list(value: Any, where: str, least: int = 0) -> list[Any]:
    if not isinstance(value, list) or len(value) < least:
        raise _fail(where, f"must be a list of at least {least} entries" if least else "must be a list")
    return value


def _text(value: Any, where: str) -> str:
    if not is_text(value):
        raise _fail(where, "must be a string of valid Unicode (no lone surrogate)")
    return value


def _integer(value: Any, where: str, least: int = 0, most: int = MAX_WHOLE) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise _fail(where, f"must be a whole number from {least} to {most}")
    return value


def _number(value: Any, where: str, least: float = 0.0, most: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < least or (most is not None and value > most):
        bound = f"between {least} and {most}" if most is not None else f"at least {least}"
        raise _fail(where, f"must be a finite number {bound}")
    return float(value)


def _spread(value: Any, where: str) -> None:
    value = _object(value, where)
    numbers = [_number(_get(value, key, where), f"{where}.{key}") for key in SPREAD]
    if numbers != sorted(numbers):
        raise _fail(where, "its percentiles must not fall (p50 <= p90 <= p99)")


def _check_machine(machine: Any) -> None:
    """machine_record()'s own shape is free; the fields a view shows are checked where present."""
    machine = _object(machine, "machine")
    if "cpu_model" in machine:
        _text(machine["cpu_model"], "machine.cpu_model")
    if "cores" in machine and machine["cores"] is not None:
        _integer(machine["cores"], "machine.cores", 1, 1 << 20)
    if machine.get("load_average") is not None:
        loads = _list(machine["load_average"], "machine.load_average", 1)
        for i, load in enumerate(loads):
            _number(load, f"machine.load_average[{i}]")


def _check_pair(pair: Any) -> None:
    pair = _object(pair, "pair")
    _text(_get(pair, "target", "pair"), "pair.target")
    draft = _get(pair, "draft", "pair")
    if draft is not None:
        _text(draft, "pair.draft")
    if _get(pair, "method", "pair") not in METHODS:
        raise _fail("pair.method", f"must be one of {', '.join(METHODS)}")
    _integer(_get(pair, "k", "pair"), "pair.k", 1, MAX_K)
    _text(_get(pair, "dtype", "pair"), "pair.dtype")


def _check_settings(settings: Any) -> dict[str, Any]:
    settings = _object(settings, "settings")
    _number(_get(settings, "temperature", "settings"), "settings.temperature", 0.0, MAX_TEMPERATURE)
    _integer(_get(settings, "max_tokens", "settings"), "settings.max_tokens", 1)
    levels = _list(_get(settings, "levels", "settings"), "settings.levels", 1)
    for i, level in enumerate(levels):
        _integer(level, f"settings.levels[{i}]", 1)
    prompts = _list(_get(settings, "prompts", "settings"), "settings.prompts", 1)
    for i, prompt in enumerate(prompts):
        _text(prompt, f"settings.prompts[{i}]")
    return settings


def _check_acceptance(value: Any, where: str) -> None:
    value = _object(value, where)
    drafted = _integer(_get(value, "drafted", where), f"{where}.drafted")
    accepted = _integer(_get(value, "accepted", where), f"{where}.accepted")
    if accepted > drafted:
        raise _fail(f"{where}.accepted", "must not exceed drafted")
    rate, tau = _get(value, "rate", where), _get(value, "tau", where)
    if rate is not None:
        _number(rate, f"{where}.rate", 0.0, 1.0)
    if tau is not None:
        _number(tau, f"{where}.tau", 1.0)


def _check_counters(value: Any, where: str) -> None:
    value = _object(value, where)
    for key in COUNTERS:
        _integer(_get(value, key, where), f"{where}.{key}")
    for i, count in enumerate(_list(_get(value, "accepted_per_pos", where), f"{where}.accepted_per_pos")):
        _integer(count, f"{where}.accepted_per_pos[{i}]")


def _check_request(request: Any, where: str, prompts: int, speculative: bool) -> int:
    request = _object(request, where)
    index = _integer(_get(request, "prompt_index", where), f"{where}.prompt_index")
    if index >= prompts:
        raise _fail(f"{where}.prompt_index", f"must name one of the {prompts} prompts")
    times = [_number(_get(request, key, where), f"{where}.{key}") for key in ("sent_s", "first_token_s", "done_s")]
    if times != sorted(times):
        raise _fail(where, "its times must not fall (sent_s <= first_token_s <= done_s)")
    tokens = _integer(_get(request, "output_tokens", where), f"{where}.output_tokens", 1)
    if "first_chunk_tokens" in request and not 1 <= _integer(request["first_chunk_tokens"],
                                                             f"{where}.first_chunk_tokens", 1) <= tokens:
        raise _fail(f"{where}.first_chunk_tokens", "must not exceed output_tokens")
    trace = _get(request, "trace", where)
    if not speculative:
        if trace is not None:
            raise _fail(f"{where}.trace", "must be null on the server without speculation")
        return tokens
    try:
        Trace.from_dict(trace)
    except TraceFormatError as error:
        raise _fail(f"{where}.trace", f"not a trace ({error})") from None
    return tokens


def _check_probe(probe: Any, where: str) -> None:
    """The forward probe: sizes rising from 1 token up, each with its timings (engine/load/forward_probe.py)."""
    probe = _object(probe, where)
    sizes = _list(_get(probe, "sizes", where), f"{where}.sizes", 1)
    for i, size in enumerate(sizes):
        _integer(size, f"{where}.sizes[{i}]", 1)
    if sizes != sorted(set(sizes)):
        raise _fail(f"{where}.sizes", "must rise, each size once")
    seconds = _list(_get(probe, "seconds", where), f"{where}.seconds", 1)
    if len(seconds) != len(sizes):
        raise _fail(f"{where}.seconds", "must hold one list of timings per size")
    for i, times in enumerate(seconds):
        for j, value in enumerate(_list(times, f"{where}.seconds[{i}]", 1)):
            _number(value, f"{where}.seconds[{i}][{j}]")


def _check_level(level: Any, where: str, concurrency: int, prompts: int, speculative: bool) -> None:
    level = _object(level, where)
    if _integer(_get(level, "concurrency", where), f"{where}.concurrency", 1) != concurrency:
        raise _fail(f"{where}.concurrency", f"must be {concurrency}, as settings.levels says")
    wall = _number(_get(level, "wall_s", where), f"{where}.wall_s")
    tokens = _integer(_get(level, "output_tokens", where), f"{where}.output_tokens")
    aggregate = _number(_get(level, "aggregate_tokens_per_s", where), f"{where}.aggregate_tokens_per_s")
    if wall > 0 and not math.isclose(aggregate, tokens / wall, rel_tol=1e-6):
        raise _fail(f"{where}.aggregate_tokens_per_s", "must be output_tokens / wall_s")
    _spread(_get(level, "latency_s", where), f"{where}.latency_s")
    _spread(_get(level, "first_token_s", where), f"{where}.first_token_s")
    speed = _get(level, "tokens_per_s_per_request", where)
    if speed is not None:
        speed = _object(speed, f"{where}.tokens_per_s_per_request")
        for key in ("p50", "mean"):
            _number(_get(speed, key, f"{where}.tokens_per_s_per_request"), f"{where}.tokens_per_s_per_request.{key}")
    for key in ("acceptance", "counters_before", "counters_after"):
        value = _get(level, key, where)
        if not speculative and value is not None:
            raise _fail(f"{where}.{key}", "must be null on the server without speculation")
        if speculative:
            (_check_acceptance if key == "acceptance" else _check_counters)(value, f"{where}.{key}")
    requests = _list(_get(level, "requests", where), f"{where}.requests")
    if len(requests) != concurrency:
        raise _fail(f"{where}.requests", f"must hold {concurrency} requests, one per concurrent stream")
    if sum(_check_request(r, f"{where}.requests[{i}]", prompts, speculative) for i, r in enumerate(requests)) != tokens:
        raise _fail(f"{where}.output_tokens", "must be the sum of its requests' output tokens")


def _check_unicode(value: Any, where: str) -> None:
    """Every key and string anywhere, free fields too, can go out as UTF-8 (JSON's \\ud800 escape reads into a lone
    surrogate, which no page can send)."""
    if isinstance(value, str):
        _text(value, where or "the load document")
    elif isinstance(value, dict):
        for key, item in value.items():
            _text(key, f"{where}: a key" if where else "the load document: a key")
            _check_unicode(item, f"{where}.{key}" if where else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_unicode(item, f"{where}[{i}]")


def _grid(servers: list[Any], levels: list[int]) -> list[int]:
    """The levels both servers hold: all of settings.levels, or those before the one where the run stopped (one
    server's `stopped` {concurrency, why}: a level it failed; the levels before it are kept)."""
    stops = [(s, server["stopped"]) for s, server in enumerate(servers)
             if isinstance(server, dict) and server.get("stopped") is not None]
    if not stops:
        return levels
    if len(stops) > 1:
        raise _fail("servers[1].stopped", "a run stops once: only one server may say where")
    s, stop = stops[0]
    where = f"servers[{s}].stopped"
    stop = _object(stop, where)
    _text(_get(stop, "why", where), f"{where}.why")
    at = _integer(_get(stop, "concurrency", where), f"{where}.concurrency", 1)
    if at not in levels[1:]:
        raise _fail(f"{where}.concurrency", "must be one of settings.levels after the first (the first must be "
                                            "measured for the run to be saved)")
    return levels[:levels.index(at)]


def _check_server(server: Any, s: int, speculative: bool, grid: list[int], settings: dict[str, Any]) -> None:
    where = f"servers[{s}]"
    server = _object(server, where)
    if _get(server, "speculative", where) is not speculative:
        raise _fail(f"{where}.speculative", f"must be {str(speculative).lower()}")
    _text(_get(server, "version", where), f"{where}.version")
    _text(_get(server, "model", where), f"{where}.model")
    if "address" in server:
        _text(server["address"], f"{where}.address")
    if "engine" in server:          # 'vllm 0.32.0', or with SpecViz's CPU sampler fix named (ServerInfo.engine)
        _text(server["engine"], f"{where}.engine")
    if "threads" in server:
        _integer(server["threads"], f"{where}.threads", 1)
    if server.get("k") is not None or (speculative and "k" in server):
        _integer(server["k"], f"{where}.k", 1, MAX_K)
    if server.get("forward_probe") is not None:
        if speculative:
            raise _fail(f"{where}.forward_probe", "must be null on the server with speculation")
        _check_probe(server["forward_probe"], f"{where}.forward_probe")
    levels = _list(_get(server, "levels", where), f"{where}.levels")
    if len(levels) != len(grid):
        raise _fail(f"{where}.levels", f"must hold the {len(grid)} levels of settings.levels"
                    + (" measured before the run stopped" if len(grid) < len(settings["levels"]) else ""))
    for i, (level, concurrency) in enumerate(zip(levels, settings["levels"])):
        _check_level(level, f"{where}.levels[{i}]", concurrency, len(settings["prompts"]), speculative)


def _check_header(data: Any, schema: str) -> tuple[dict[str, Any], dict[str, Any], list[Any]]:
    """The fields both forms share, checked: (the document, its settings, its servers)."""
    data = _object(data, "the load document")
    _check_unicode(data, "")
    if data.get("format") == UNFINISHED_SCHEMA != schema:
        raise _fail("format", "this load run is unfinished (its server without speculation could not be measured: "
                              f"{str(data.get('missing', 'no reason given'))[:300].rstrip('.')}); finish it with `python -m engine "
                              "load --resume FILE`")
    if data.get("format") != schema:
        raise _fail("format", f"must be {schema!r}" + (" (this run is already finished)" if
                                                       data.get("format") == LOAD_SCHEMA else ""))
    for key in ("created", "command", "commit"):
        _text(_get(data, key, ""), key)
    _check_machine(_get(data, "machine", ""))
    _check_pair(_get(data, "pair", ""))
    return data, _check_settings(_get(data, "settings", "")), _list(_get(data, "servers", ""), "servers")


def parse_load(data: Any) -> dict[str, Any]:
    """The document, checked (LoadFormatError naming the first bad field)."""
    data, settings, servers = _check_header(data, LOAD_SCHEMA)
    if len(servers) != 2:
        raise _fail("servers", "must hold exactly two servers: with speculation, then without")
    grid = _grid(servers, settings["levels"])
    for s, (server, speculative) in enumerate(zip(servers, (True, False))):
        _check_server(server, s, speculative, grid, settings)
    return data


def parse_unfinished(data: Any) -> dict[str, Any]:
    """An unfinished run (load_format.unfinished_document), checked as strictly: the speculative server alone, and
    the sentence that says why the other is missing."""
    data, settings, servers = _check_header(data, UNFINISHED_SCHEMA)
    if len(servers) != 1:
        raise _fail("servers", "must hold exactly the server with speculation (the other is missing)")
    _check_server(servers[0], 0, True, _grid(servers, settings["levels"]), settings)
    _text(_get(data, "missing", ""), "missing")
    return data


def read_unfinished(path: str | Path) -> dict[str, Any]:
    """The checked unfinished run in `path` (LoadFormatError: one sentence; OSError when it cannot be read)."""
    return parse_unfinished(parse_json(read_document(path, MAX_LOAD_BYTES, LoadFormatError, "load document"),
                                       MAX_LOAD_BYTES, LoadFormatError, "load document"))


def parse_load_json(text: str | bytes) -> dict[str, Any]:
    return parse_load(parse_json(text, MAX_LOAD_BYTES, LoadFormatError, "load document"))


def read_load(path: str | Path) -> dict[str, Any]:
    """The checked document in `path` (LoadFormatError: one sentence; OSError when it cannot be read)."""
    return parse_load_json(read_document(path, MAX_LOAD_BYTES, LoadFormatError, "load document"))
