"""engine/formats/load_reader.py: the recorded tiny load run (benchmarks/data/load-tiny-*.json, a real
document cut to its first level, with each server's threads and a forward probe added) is accepted, and every
field deleted or set to an odd value is refused in one LoadFormatError naming it, as are documents whose parts
contradict each other; a run that stopped keeps the levels before its stop; an unfinished run (the baseline
missing) is read as strictly by its own reader, and each reader refuses the other's form in one sentence."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Iterator

import pytest

from engine.formats.load_reader import parse_load, parse_load_json, parse_unfinished, read_load
from engine.formats.load_format import LoadFormatError, unfinished_document

ROOT = Path(__file__).resolve().parents[1]
RECORDED = sorted((ROOT / "benchmarks" / "data").glob("load-tiny-*.json"))[-1]
FREE = {"machine", "trace"}                       # machine_record()'s own shape; a trace has its own reader
OPTIONAL = {"first_chunk_tokens", "address", "k", "threads", "forward_probe", "engine"}   # added to the agreed schema (a
# server's k: null without speculation; threads: a server the command started; the probe: the baseline's)
PROBE = {"sizes": [1, 2, 4], "seconds": [[0.1, 0.12, 0.11], [0.1, 0.1, 0.1], [0.2, 0.21, 0.19]]}


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The recorded run cut to its first level, each server's first two requests' traces kept."""
    data = read_load(RECORDED)
    data["settings"]["levels"] = data["settings"]["levels"][:1]
    for server in data["servers"]:
        server["levels"] = server["levels"][:1]
        server["threads"] = 2
        server["engine"] = f"vllm {server['version']}"
    data["servers"][1]["forward_probe"] = copy.deepcopy(PROBE)
    return parse_load(data)


def name(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


def leaves(value: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if path and path[-1] in FREE:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key), item
            yield from leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index), item
            yield from leaves(item, (*path, index))


def changed(document: dict, path: tuple, value: Any = None, delete: bool = False) -> dict:
    data = copy.deepcopy(document)
    holder = data
    for part in path[:-1]:
        holder = holder[part]
    if delete:
        del holder[path[-1]]
    else:
        holder[path[-1]] = value
    return data


def odd(value: Any) -> Any:
    if isinstance(value, bool):
        return "yes"
    if isinstance(value, (int, float)):
        return -1
    if isinstance(value, str):
        return 5
    return "odd"


def test_the_recorded_run_is_accepted(document):
    assert read_load(RECORDED)["format"] == "specviz.load/1"
    assert [s["speculative"] for s in document["servers"]] == [True, False]


def test_each_field_deleted_is_refused_by_name(document):
    paths = [path for path, _ in leaves(document) if isinstance(path[-1], str) and path[-1] not in OPTIONAL]
    assert len(paths) > 60
    for path in paths:
        with pytest.raises(LoadFormatError) as caught:
            parse_load(changed(document, path, delete=True))
        assert name(path) in str(caught.value), (name(path), str(caught.value))


def test_each_field_set_to_an_odd_value_is_refused_by_name(document):
    paths = [(path, value) for path, value in leaves(document)
             if not (isinstance(path[-1], str) and path[-1] in {"address"})]
    for path, value in paths:
        with pytest.raises(LoadFormatError) as caught:
            parse_load(changed(document, path, odd(value)))
        message = str(caught.value)
        assert name(path) in message or (path[-1] == "format" and message.startswith("format")), (name(path), message)


@pytest.mark.parametrize("where, value, says", [
    (("servers", 0, "levels", 0, "aggregate_tokens_per_s"), 1e9, "output_tokens / wall_s"),
    (("servers", 0, "levels", 0, "latency_s", "p50"), 1e9, "percentiles must not fall"),
    (("servers", 1, "levels", 0, "requests", 0, "sent_s"), 1e9, "times must not fall"),
    (("servers", 0, "levels", 0, "acceptance", "accepted"), 10 ** 9, "must not exceed drafted"),
    (("servers", 1, "levels", 0, "requests", 0, "output_tokens"), 10 ** 6, "sum of its requests' output tokens"),
    (("servers", 0, "levels", 0, "concurrency"), 2, "as settings.levels says"),
    (("servers", 0, "speculative"), False, "must be true"),
    (("servers", 1, "levels", 0, "acceptance"), {}, "must be null"),
    (("servers", 1, "levels", 0, "requests", 0, "trace"), {}, "must be null"),
    (("servers", 0, "levels", 0, "requests", 0, "prompt_index"), 99, "one of the"),
    (("servers", 0, "levels", 0, "requests", 0, "first_chunk_tokens"), 10 ** 6, "must not exceed output_tokens"),
    (("servers", 0, "levels", 0, "requests", 0, "trace"), {"format": "specviz.trace/2"}, "not a trace"),
    (("pair", "method"), "medusa", "must be one of"),
    (("settings", "temperature"), 99.0, "between"),
    (("servers", 0, "levels", 0, "wall_s"), float("nan"), "finite"),
    (("servers", 0, "forward_probe"), PROBE, "must be null on the server with speculation"),
    (("servers", 1, "forward_probe", "sizes"), [1, 4, 2], "must rise, each size once"),
    (("servers", 1, "forward_probe", "sizes"), [1, 1, 2], "must rise, each size once"),
    (("servers", 1, "forward_probe", "seconds"), [[0.1]], "one list of timings per size"),
    (("servers", 1, "forward_probe", "seconds", 1), [], "at least 1"),
    (("pair", "k"), 2 ** 64, "from 1 to 32"),
    (("machine", "load_average"), 1.5, "must be a list"),
    (("pair", "target"), "\ud800", "no lone surrogate"),
    (("servers", 0, "threads"), 0, "from 1"),
])
def test_contradictions_are_refused(document, where, value, says):
    with pytest.raises(LoadFormatError) as caught:
        parse_load(changed(document, where, value))
    assert says in str(caught.value) and name(where).split(".")[0] in str(caught.value)


def test_the_server_list_must_hold_two_servers_and_the_text_be_json(document):
    with pytest.raises(LoadFormatError, match="exactly two"):
        parse_load(changed(document, ("servers",), document["servers"][:1]))
    with pytest.raises(LoadFormatError, match="exactly two"):
        parse_load(changed(document, ("servers",), document["servers"] * 2))
    with pytest.raises(LoadFormatError, match="not valid JSON"):
        parse_load_json(json.dumps(document)[:-10])
    with pytest.raises(LoadFormatError, match="levels"):
        parse_load(changed(document, ("settings", "levels"), [1, 2]))


def test_a_run_that_stopped_keeps_the_levels_before_its_stop_and_says_where():
    """A server that failed a level ends the run there: both servers hold the levels before it, one `stopped` names
    the level; anything else contradicts the grid."""
    data = read_load(RECORDED)
    grid = data["settings"]["levels"]
    for server in data["servers"]:
        server["levels"] = server["levels"][:2]
    stop = {"concurrency": grid[2], "why": "The vLLM server at x closed the stream."}
    kept = parse_load(changed(data, ("servers", 0, "stopped"), stop))
    assert [len(server["levels"]) for server in kept["servers"]] == [2, 2]
    assert parse_load(changed(data, ("servers", 1, "stopped"), stop))["servers"][1]["stopped"] == stop
    cases = [(("servers", 0, "stopped"), stop | {"concurrency": grid[3]}, "servers[0].levels"),
             (("servers", 0, "stopped"), stop | {"concurrency": grid[0]}, "servers[0].stopped.concurrency"),
             (("servers", 0, "stopped"), stop | {"concurrency": 999}, "servers[0].stopped.concurrency"),
             (("servers", 0, "stopped"), stop | {"why": 5}, "servers[0].stopped.why"),
             (("servers", 0, "stopped"), "x", "servers[0].stopped")]
    for where, value, named in cases:
        with pytest.raises(LoadFormatError) as caught:
            parse_load(changed(data, where, value))
        assert named in str(caught.value), str(caught.value)
    with pytest.raises(LoadFormatError, match="stops once"):
        parse_load(changed(changed(data, ("servers", 0, "stopped"), stop), ("servers", 1, "stopped"), stop))
    with pytest.raises(LoadFormatError, match="levels of settings.levels"):     # cut short without a stop
        parse_load(data)


def test_an_unfinished_run_is_read_as_strictly_and_refused_where_a_whole_run_is_asked(document):
    """An unfinished run (its second server could not be measured) holds the speculative server alone and why the
    other is missing: its own reader checks every field as the whole run's does, and each reader refuses the other
    form in one sentence that says what to do."""
    unfinished = unfinished_document(document, "No vLLM server answers at http://127.0.0.1:9 (ConnectError).")
    assert parse_unfinished(copy.deepcopy(unfinished))["servers"] == document["servers"][:1]
    paths = [path for path, _ in leaves(unfinished) if isinstance(path[-1], str) and path[-1] not in OPTIONAL]
    assert len(paths) > 30 and ("missing",) in paths
    for path in paths:
        with pytest.raises(LoadFormatError) as caught:
            parse_unfinished(changed(unfinished, path, delete=True))
        assert name(path) in str(caught.value), (name(path), str(caught.value))
    with pytest.raises(LoadFormatError, match="must be true"):
        parse_unfinished(changed(unfinished, ("servers", 0, "speculative"), False))
    with pytest.raises(LoadFormatError, match="exactly the server with speculation"):
        parse_unfinished(changed(unfinished, ("servers",), document["servers"]))
    with pytest.raises(LoadFormatError, match=r"^format: this load run is unfinished \(its server without speculation "
                                              r"could not be measured: No vLLM server answers at http://127.0.0.1:9 "
                                              r"\(ConnectError\)\); finish it with `python -m engine load --resume "
                                              r"FILE`$"):
        parse_load(unfinished)
    with pytest.raises(LoadFormatError, match=r"must be 'specviz.load-unfinished/1' \(this run is already finished\)"):
        parse_unfinished(document)
