"""One load run from its servers to its document (docs/architecture.md §11): the server with speculation measured,
then the one without, either two running servers or a pair started here one after the other (memory is short for
two), checked to be what they claim, and written as a specviz.load/1 dict. `python -m engine load` and
`bench.py --load` both run it. When the second server cannot be measured the first one's record is kept
(`BaselineMissing`), for an unfinished document that `--resume` completes. Torch-free."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from engine.config import SpecConfig
from engine.formats.load_format import load_document
from engine.load.runner import run_server
from engine.vllm.transport import VllmError

EAGER = ("--compilation-config", '{"mode": 0}')
DEFAULT_PROMPTS = ("Write a Python function that returns the n-th Fibonacci number.",
                   "Explain in two sentences what a hash table is.",
                   "List three uses of a binary search.",
                   "def quicksort(items):")


@dataclass(frozen=True)
class Served:
    """A pair to serve: the speculative server (`method`, k) and then the target alone, each in `dtype`."""

    target: str
    draft: str | None
    method: str = "draft_model"
    k: int = 3
    dtype: str = "float32"
    eager: bool = False
    fix_cpu_sampler: bool = False   # both servers run SpecViz's fix of vLLM 0.32's CPU sampler (vLLM #55005)


def _started(served: Served, method: str, measure: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """Serve the pair by `method` ("none": target only), measure it, stop it; the record names its threads."""
    from engine.vllm.server import ServerSpec, start_server
    spec = ServerSpec(target=served.target, draft=served.draft if method == "draft_model" else None, method=method,
                      k=served.k, dtype=served.dtype, extra_args=EAGER if served.eager else (),
                      fix_cpu_sampler=served.fix_cpu_sampler)
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(spec, Path(folder) / "server.log")
        try:
            return {**measure(str(server.address)), "threads": spec.threads}
        finally:
            server.stop()


class BaselineMissing(VllmError):
    """The server with speculation was measured but the one without could not be (it did not start, did not answer,
    failed its first level, or is not what its place says): `measured` is the first server's record, which an
    unfinished document keeps so that `--resume` measures only the missing server."""

    def __init__(self, why: str, measured: dict[str, Any]):
        super().__init__(why)
        self.measured = measured


def measure_servers(urls: tuple[str, str] | None, served: Served | None, method: str, prompts: Sequence[str],
                    levels: Sequence[int], config: SpecConfig, report: Callable[[str], None],
                    measured: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The two servers' records, speculative first (the forward probe runs on the second, up to the largest verify);
    VllmError in one sentence when a server is not what its place says or the two serve different models, and
    BaselineMissing when that happens after the first was measured. `measured`: the first server's record from an
    unfinished run (then only the second is measured; `urls[0]` is not asked)."""
    records: list[dict[str, Any]] = [measured] if measured is not None else []
    for kind, url in ((method, urls[0] if urls else None), ("none", urls[1] if urls else None))[len(records):]:
        grid = levels[:len(records[0]["levels"])] if records else levels     # the baseline runs what was measured

        def measure(address: str) -> dict[str, Any]:
            probe = max(grid) * (records[0]["k"] + 1) if records and records[0].get("k") else 0
            return run_server(address, prompts, grid, config, method, report, probe)
        try:
            records.append(_measured(kind, urls, url, served, measure))
        except VllmError as error:
            if records:
                raise BaselineMissing(str(error), records[0]) from None
            raise
    if records[0]["model"] != records[1]["model"]:
        raise BaselineMissing(f"The two servers serve different models ({records[0]['model']!r}, "
                              f"{records[1]['model']!r}).", records[0])
    return _common_levels(records)


def _measured(kind: str, urls: tuple[str, str] | None, url: str | None, served: Served | None,
              measure: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """One server's record, checked to be what its place in the run says and to have measured its first level."""
    if urls:
        record = measure(url or "")
    elif served is not None:
        record = _started(served, kind, measure)
    else:
        raise VllmError("The load run needs two server URLs or a pair to serve.")
    if record["speculative"] != (kind != "none"):
        raise VllmError(f"The server at {record['address']} runs {'with' if record['speculative'] else 'without'} "
                        f"speculation: the {'second' if kind == 'none' else 'first'} server must run "
                        f"{'without' if kind == 'none' else 'with'} it.")
    if not record["levels"]:
        raise VllmError(f"The server at {record['address']} failed the first level, so nothing was measured: "
                        f"{record['stopped']['why']}")
    return record


def _common_levels(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Both servers cut to the levels both measured (a level is a pair of points): a record cut shorter loses its
    own stop, so the one left names the level where the run ended."""
    measured = min(len(record["levels"]) for record in records)
    for record in records:
        if len(record["levels"]) > measured:
            del record["levels"][measured:]
            record.pop("stopped", None)
    return records


def stopped(document: dict[str, Any]) -> tuple[str, int, str] | None:
    """(which server, the N where the run stopped, why) for a run that ended early; None for a whole one."""
    for server in document["servers"]:
        if server.get("stopped"):
            which = "the server with speculation" if server["speculative"] else "the server without speculation"
            return which, server["stopped"]["concurrency"], server["stopped"]["why"]
    return None


def sweep_document(records: list[dict[str, Any]], target: str | None, draft: str | None, method: str, dtype: str,
                   prompts: Sequence[str], levels: Sequence[int], config: SpecConfig, machine: dict[str, Any],
                   provenance: dict[str, str]) -> dict[str, Any]:
    """The specviz.load/1 document of the two records, the machine they ran on and the command that ran them."""
    pair = {"target": target or records[0]["model"], "draft": draft if method == "draft_model" else None,
            "method": method, "k": records[0]["k"], "dtype": dtype}
    settings = {"temperature": config.temperature, "max_tokens": config.max_new_tokens, "levels": list(levels),
                "prompts": list(prompts)}
    return load_document(pair, settings, records, machine, provenance)
