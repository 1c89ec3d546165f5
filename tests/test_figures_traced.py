"""Every measured figure in README.md and docs/ traces to a saved run (issue 37).

Three ways a figure may stand in a document, each checked here or in tests/test_gpu_figures.py:
- inside a generated block, which must equal what scripts/benchmark_doc.py renders from
  benchmarks/data (a changed digit, or a saved run replaced without the docs, fails);
- in a GPU quote that tests/test_gpu_figures.py checks against docs/gpu/;
- as a verbatim quote of a saved printout (QUOTES below: the text must be in that file).
Anything else that looks like a measurement (a decimal, or a number with x, %, ms, s, GB, tok/s)
fails `test_no_figure_stands_without_a_saved_source`, unless NOT_MEASURED says what it is instead
(a version, a setting, a threshold, a definition)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from functools import cache
from pathlib import Path

import pytest

from test_gpu_figures import FIGURES, bench_table, gpu_section, quoted

ROOT = Path(__file__).resolve().parent.parent
DOCS = ("README.md", *sorted(f"docs/{path.name}" for path in (ROOT / "docs").glob("*.md")))   # a new page is checked too
DATA = "benchmarks/data/"

# (document, verbatim text, saved file that must contain it)
QUOTES = [
    ("docs/benchmark.md", "step 6, token 10: 'B' (id 41) (recovered): p = 7.9e-18; the target's top: 'C' 0.857, "
     "'<bos>' 0.0628, 'J' 0.0483", DATA + "vllm-tiny-audit.txt"),
    ("docs/benchmark.md", "[0.0, 244.00001525878906, 0.0]", DATA + "vllm-cpu-expand-repro.txt"),
    ("docs/benchmark.md", "[1562320208, 32719, 1562320208]", DATA + "vllm-cpu-expand-repro.txt"),
    ("docs/benchmark.md", "TV 0.501", DATA + "vllm-tiny-law-notes.txt"),
    ("docs/benchmark.md", "total-variation distance 0.010", DATA + "vllm-tiny-law-notes.txt"),
    ("docs/benchmark.md", "The run took 8 min 12 s, both servers' start-up", DATA + "load-qwen-coder-2026-11-29.txt"),
    ("docs/benchmark.md", "\n".join((ROOT / DATA / "load-qwen-coder-2026-11-29.txt").read_text().splitlines()[2:]),
     DATA + "load-qwen-coder-2026-11-29.txt"),
    *(("docs/benchmark.md", line, DATA + "prepacked-alternation-2026-11-29.txt")
      for line in ("T=0 tok=157 wall=41.16 tok/s=3.81", "T=0.7 tok=154 wall=41.45 tok/s=3.72",
                   "T=0 tok=157 wall=43.67 tok/s=3.60", "T=0.7 tok=154 wall=36.93 tok/s=4.17")),
    ("docs/benchmark.md", "2.279 ms each", DATA + "prepacked-sampling-check-2026-11-28.txt"),
    ("docs/benchmark.md", "141.4 ms/token after the first", DATA + "prepacked-sampling-check-2026-11-28.txt"),
    ("docs/benchmark.md", "aggregate speedup N=1: 1.79x  N=2: 1.47x  N=4: 0.92x  N=8: 0.79x  N=16: 0.65x; "
     "speculation stops paying at N=4", DATA + "load-qwen-coder-2026-11-29-first.txt"),
]

# (document, text with {} where the figure sits, saved run in benchmarks/data, path in it, format spec)
DATA_FIGURES = [
    ("docs/architecture.md", "sent as dicts, in {} s (", "suite-times-2026-11-30.json", "clean_clone_32aad64_total_s", "d"),
    ("docs/architecture.md", "in 1632 s ({} s, 241 s", "suite-times-2026-11-30.json", "runs/10/wall_s", "d"),
    ("docs/architecture.md", "(1106 s, {} s and 130 s)", "suite-times-2026-11-30.json", "runs/11/wall_s", "d"),
    ("docs/architecture.md", "241 s and {} s), the machine", "suite-times-2026-11-30.json", "runs/12/wall_s", "d"),
    ("docs/architecture.md", "alone\nran in {} s instead", "figure-send-2026-11-30.json", "upload_walk/after/wall_s", ".1f"),
    ("docs/architecture.md", "s instead of {} s, one run", "figure-send-2026-11-30.json", "upload_walk/before/wall_s", ".1f"),
    ("docs/architecture.md", "figures took {} ms a redraw validated", "figure-send-2026-11-30.json", "rows/18/validated_ms", ".2f"),
    ("docs/architecture.md", "validated and {} ms as dicts", "figure-send-2026-11-30.json", "rows/18/dicts_ms", ".2f"),
    ("docs/architecture.md", "as dicts\n({}x; from", "figure-send-2026-11-30.json", "rows/18/validated_over_dicts", ".1f"),
    ("docs/architecture.md", "x; from {}x to", "figure-send-2026-11-30.json", "lowest_ratio", ".1f"),
    ("docs/architecture.md", "x to {}x over every bundled trace", "figure-send-2026-11-30.json", "highest_ratio", ".1f"),
    ("docs/architecture.md", "a9429ee then ran the README's test command in {} s with", "suite-times-2026-11-30.json", "clean_clone_a9429ee_total_s", "d"),
    ("docs/architecture.md", "with installs ({} s, 235 s", "suite-times-2026-11-30.json", "runs/4/wall_s", "d"),
    ("docs/architecture.md", "s, {} s and 127 s for", "suite-times-2026-11-30.json", "runs/5/wall_s", "d"),
    ("docs/architecture.md", "s and {} s for the three passes),", "suite-times-2026-11-30.json", "runs/6/wall_s", "d"),
    ("docs/architecture.md", "pass 1 took {} s, 2608", "suite-times-2026-11-30.json", "runs/0/wall_s", ".1f"),
    ("docs/architecture.md", "s, {} s of test time summed", "suite-times-2026-11-30.json", "runs/0/test_seconds_summed", ".1f"),
    ("docs/architecture.md", "workers, {} s of that in the", "suite-times-2026-11-30.json", "runs/0/browser_modules_s", ".1f"),
    ("docs/architecture.md", "in the {} browser\nmodules", "suite-times-2026-11-30.json", "runs/0/browser_modules", "d"),
    ("docs/architecture.md", "upright test ran {} s\nalone", "suite-times-2026-11-30.json", "browser_test_cpu/wall_s", ".1f"),
    ("docs/architecture.md", "renderer used {} s of CPU", "suite-times-2026-11-30.json", "browser_test_cpu/cpu_s/chromium_renderer", ".1f"),
    ("docs/architecture.md", "the test process {} s (reduced", "suite-times-2026-11-30.json", "browser_test_cpu/cpu_s/test_process", ".1f"),
    ("docs/architecture.md", "figures took {} s of 87.8", "suite-times-2026-11-30.json", "upload_walk_load_case_profile/plotly_figure_construction_s", ".1f"),
    ("docs/architecture.md", "s of {} s under cProfile", "suite-times-2026-11-30.json", "upload_walk_load_case_profile/wall_s", ".1f"),
    ("docs/architecture.md", "the pass took {} s instead", "suite-times-2026-11-30.json", "runs/2/wall_s", ".1f"),
    ("docs/architecture.md", "s instead of {} s.", "suite-times-2026-11-30.json", "runs/1/wall_s", ".1f"),
    ("docs/architecture.md", "the int4 draft {} accepted", "draft-acceptance-2026-11-30.json", "rows/0/temperatures/0/acceptance", ".1%"),
    ("docs/architecture.md", "accepted, int8 {}, the", "draft-acceptance-2026-11-30.json", "rows/1/temperatures/0/acceptance", ".1%"),
    ("docs/architecture.md", "float32 draft {};", "draft-acceptance-2026-11-30.json", "rows/2/temperatures/0/acceptance", ".1%"),
    ("docs/architecture.md", "at T = 0.7, {}, ", "draft-acceptance-2026-11-30.json", "rows/0/temperatures/1/acceptance", ".1%"),
    ("docs/architecture.md", "0.7, 69.2%, {} and", "draft-acceptance-2026-11-30.json", "rows/1/temperatures/1/acceptance", ".1%"),
    ("docs/architecture.md", " and {} (benchmarks/data/draft-acc", "draft-acceptance-2026-11-30.json", "rows/2/temperatures/1/acceptance", ".1%"),
    ("docs/benchmark.md", "(`scripts/draft_kernels.py`): int8 {} ms", "draft-kernels-avx512-2026-11-29.json",
     "kernels/int8/total_ms", ".1f"),
    ("docs/benchmark.md", "ms, int4 {} ms with AVX-512", "draft-kernels-avx512-2026-11-29.json", "kernels/int4/total_ms", ".1f"),
    ("docs/benchmark.md", "same machine int8 {} ms", "draft-kernels-avx2-cap-2026-11-29.json", "kernels/int8/total_ms", ".1f"),
    ("docs/benchmark.md", "ms, int4 {} ms (`benchmarks", "draft-kernels-avx2-cap-2026-11-29.json", "kernels/int4/total_ms",
     ".1f"),
    ("docs/architecture.md", "drawn a median {} s after the server", "vllm-first-step.json",
     "first_chunk_to_first_step_s/median", ".2f"),
    ("docs/architecture.md", "(at most {} s, the process's first run", "vllm-first-step.json",
     "first_chunk_to_first_step_s/max", ".2f"),
    ("docs/architecture.md", "first run; {} runs on a loaded", "vllm-first-step.json", "first_chunk_to_first_step_s/n", "d"),
    ("docs/architecture.md", "({} % of two cores idle over", "suite-times-2026-11-29.json", "runs/2/idle_cpu_percent",
     ".1f"),
    ("docs/architecture.md", "one worker ran the suite in {} s", "suite-times-2026-11-29.json", "runs/0/wall_s", ".1f"),
    ("docs/architecture.md", "({} s of\nit the default pair's", "suite-times-2026-11-29.json", "needs_most_memory_module_s",
     ".1f"),
    ("docs/architecture.md", "two workers ran the other {} tests", "suite-times-2026-11-29.json", "runs/1/passed", "d"),
    ("docs/architecture.md", "tests in {} s, with", "suite-times-2026-11-29.json", "runs/1/wall_s", ".1f"),
    ("docs/architecture.md", "\n{} % of the CPU idle", "suite-times-2026-11-29.json", "runs/1/idle_cpu_percent", ".1f"),
    ("docs/architecture.md", "the capped pass took {} s on two spinning", "suite-times-2026-11-29.json",
     "runs/5/wall_s", ".1f"),
    ("docs/architecture.md", "workers, {} s on two\npassive ones", "suite-times-2026-11-29.json", "runs/6/wall_s", ".1f"),
    ("docs/architecture.md", "passive ones and {} s on one", "suite-times-2026-11-29.json", "runs/7/wall_s", ".1f"),
    ("docs/architecture.md", "README's test command in {} s, installs", "suite-times-2026-11-29.json",
     "clean_clone_9afded4_total_s", "d"),
    ("docs/architecture.md", "installs included: {} s on two", "suite-times-2026-11-29.json", "runs/8/wall_s", ".1f"),
    ("docs/architecture.md", "workers, {} s for the default pair's", "suite-times-2026-11-29.json", "runs/9/wall_s",
     ".1f"),
    ("docs/architecture.md", "vLLM modules and {} s capped", "suite-times-2026-11-29.json", "runs/10/wall_s", ".1f"),
    ("docs/architecture.md", "a clean\nclone of 1cae127 in {} s with installs", "suite-times-2026-11-29.json",
     "clean_clone_1cae127_total_s", "d"),
    ("docs/architecture.md", "with installs ({} s, ", "suite-times-2026-11-29.json", "runs/11/wall_s", ".1f"),
    ("docs/architecture.md", "s, {} s and ", "suite-times-2026-11-29.json", "runs/12/wall_s", ".1f"),
    ("docs/architecture.md", "s and {} s for the three passes", "suite-times-2026-11-29.json", "runs/13/wall_s", ".1f"),
    ("docs/benchmark.md", 'after "abc" at T = {}, 3000', "vllm-cpu-sampler-fix-law.json", "temperature", "g"),
    ("docs/benchmark.md", "a total variation of {} from the exact law as shipped", "vllm-cpu-sampler-fix-law.json",
     "rows/1/total_variation", ".3f"),
    ("docs/benchmark.md", "as shipped, {} with the fix", "vllm-cpu-sampler-fix-law.json", "rows/0/total_variation",
     ".3f"),
    ("docs/benchmark.md", "with the fix and {} sampling the target", "vllm-cpu-sampler-fix-law.json",
     "rows/2/total_variation", ".4f"),
    ("docs/benchmark.md", "sampling noise alone gives {}, so", "vllm-cpu-sampler-fix-law.json",
     "sampling_noise_total_variation", ".3f"),
]

# Numbers that are not measurements, by the words around them (a regex matched at the figure's line).
NOT_MEASURED = [
    r"T = 0\.[78]\b", r"T > 0", r"temperature of 0\.7", r"audited at 0\.7", r"at T = 1\.5",
    r"[Qq]wen2\.5", r"0\.5B|1\.5B|7B", r"Python 3\.11", r"python_version", r"vLLM 0\.32|vllm-cpu 0\.32",
    r"sdk_version", r"torch\s+2\.1[13]", r"transformers 5\.23",
    r"1e-6|1e-06",                                    # the audit's threshold
    r"15 % are said|within 15 %",                     # the batch cost model's threshold (batch_model.DISAGREE)
    r"goal <= 1 ms|goal 1\.5x|10 % at every level|within 10 points",   # goals the reports judge against
    r"noise of 0\.02|--perturbation",                 # gpu_check's setting
    r"top-k of 40|top_k 40",                          # the repro's setting
    r"k up to 8|128 new tokens|trees of 16 nodes|20 MB|32 waiting|three hours",   # hosted limits (settings)
    r"1440 px|1280 x|390 x|1440 x",                   # window sizes the docs name
    r"0\.1 s",                                        # a UI polling interval (a setting)
    r"finish within 30 minutes",                      # the house's limit on the test command (a rule)
    r"gpu_seconds|can make at worst|hosted mode's limits",   # ZeroGPU allowances the code sets, said to be so
    r"silent for 60 s|read timeout \(60 s\)",        # a time-out (a setting)
    r"most every 3 s",                                # a redraw interval (a setting)
    r"torch >= 2\.10", r"server \(0\.32",             # versions
    r"margin < 0\.5",                                 # the near-tie threshold
    r"probability_text",                              # how a number is printed, by example
    r"specviz\.\w+/\d",                               # schema names
]
FIGURE = re.compile(r"(?<![\w.#/])[~≈]?\d+(?:\.\d+)*(?:\s?(?:x|%|ms|s|GB|GiB|MB|tok/s|minutes?|seconds?))?(?!\w|\.\d)")
BLOCK = re.compile(r"<!-- generated: ([\w-]+) -->.*?<!-- end generated: \1 -->", re.S)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]+`")


@cache
def doc_module():
    spec = importlib.util.spec_from_file_location("benchmark_doc", ROOT / "scripts" / "benchmark_doc.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module                    # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@cache
def text(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def saved(name: str, path: str):
    node = json.loads(text(DATA + name))
    for part in path.split("/"):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def data_quoted(entry_text: str, name: str, path: str, spec: str) -> str:
    return entry_text.format(format(saved(name, path), spec))


def is_figure(token: str) -> bool:
    """A measurement-looking token: a decimal or a number with a unit (not a version such as 2.13.0)."""
    body = token.lstrip("~≈")
    number = re.match(r"\d+(?:\.\d+)*", body).group()
    if number.count(".") > 1:
        return False
    return "." in number or body[len(number):].strip() != ""


def unsourced(name: str, document: str) -> list[str]:
    """The figures in `document` that no saved run, checked quote or NOT_MEASURED entry covers."""
    covered = [match.span() for match in BLOCK.finditer(document)]
    covered += [match.span() for match in FENCE.finditer(document)]
    covered += [match.span() for match in CODE.finditer(document)]
    for doc, entry_text, report_name, path, spec in FIGURES:
        if doc == name and spec is not None:
            covered += [match.span() for match in re.finditer(re.escape(quoted(entry_text, report_name, path, spec)), document)]
    for doc, entry_text, data_name, path, spec in DATA_FIGURES:
        if doc == name:
            expected = data_quoted(entry_text, data_name, path, spec)
            covered += [match.span() for match in re.finditer(re.escape(expected), document)]
    for doc, quote, _file in QUOTES:
        if doc == name:
            covered += [match.span() for match in re.finditer(re.escape(quote), document)]
    if name == "docs/benchmark.md":
        section = gpu_section()
        start = document.index(section)
        offset = 0
        names = [row[0] for row in bench_table()]
        for line in section.splitlines(keepends=True):     # the bench table, checked row by row
            if line.startswith("| ") and any(row_name in line for row_name in names):
                covered.append((start + offset, start + offset + len(line)))
            offset += len(line)
    found = []
    for match in FIGURE.finditer(document):
        if not is_figure(match.group()) or any(a <= match.start() and match.end() <= b for a, b in covered):
            continue
        line = document[document.rfind("\n", 0, match.start()) + 1:document.find("\n", match.start())]
        if any(re.search(pattern, line) for pattern in NOT_MEASURED):
            continue
        found.append(f"{match.group()!r} in: {line.strip()[:140]}")
    return found


def test_the_generated_blocks_are_the_saved_runs():
    """README.md and docs/benchmark.md hold exactly what scripts/benchmark_doc.py renders from benchmarks/data."""
    module = doc_module()
    rendered = module.blocks()
    for path in (module.README, module.BENCH):
        document = path.read_text(encoding="utf-8")
        assert module.render(document, rendered) == document, \
            f"{path.name} differs from the saved runs: run python scripts/benchmark_doc.py --write"
    names = {match.group(1) for path in (module.README, module.BENCH) for match in BLOCK.finditer(path.read_text(encoding="utf-8"))}
    assert names == set(rendered), f"blocks rendered but not placed, or placed twice: {sorted(set(rendered) ^ names)}"


def test_the_figure_is_the_saved_run():
    module = doc_module()
    assert module.SVG.read_text(encoding="utf-8") == module.figure()


@pytest.mark.parametrize("doc, entry_text, name, path, spec", DATA_FIGURES, ids=[entry[3] for entry in DATA_FIGURES])
def test_each_quoted_figure_is_its_saved_runs(doc, entry_text, name, path, spec):
    expected = data_quoted(entry_text, name, path, spec)
    assert expected in text(doc), f"{doc} should say {expected!r} ({name} {path} = {saved(name, path)!r})"


@pytest.mark.parametrize("doc, quote, source", QUOTES, ids=[entry[1][:30] for entry in QUOTES])
def test_each_quote_is_in_its_saved_printout(doc, quote, source):
    assert quote in text(doc), f"{doc} no longer quotes {quote!r}: drop it from QUOTES"
    assert quote in text(source), f"{source} does not say {quote!r}"


@pytest.mark.parametrize("name", DOCS)
def test_no_figure_stands_without_a_saved_source(name):
    found = unsourced(name, text(name))
    assert not found, f"{name}: figures with no saved source (render them from a saved run, quote one, or drop them):\n" \
        + "\n".join(found)


def test_a_planted_digit_is_caught_in_a_block_and_in_prose():
    """The checks above are not vacuous: one digit changed inside the README's table, or a figure added
    to its prose, each fails."""
    module = doc_module()
    readme = text("README.md")
    block = BLOCK.search(readme)
    cell = re.search(r"\| \d+\.(\d) \|", block.group())          # the first tok/s cell of the table
    digit = block.start() + cell.start(1)
    inside = readme[:digit] + str((int(readme[digit]) + 1) % 10) + readme[digit + 1:]
    assert module.render(inside, module.blocks()) == readme != inside
    prose = readme.replace("## Speed\n", "## Speed\n\nSpecViz runs 2.5x faster.\n", 1)
    assert unsourced("README.md", prose) == ["'2.5x' in: SpecViz runs 2.5x faster."]


def test_a_run_that_names_its_machine_is_quoted_with_it():
    """A saved run with a machine record (engine/cli/machine.py: bench.py's "cpu", gpu_check's
    "environment.cpu") is described by its CPU model, cores, flags, caps and load average, and its recorded
    class heads its rows; an older run's one-line description is quoted as it is."""
    module = doc_module()
    record = {"cpu_model": "AMD EPYC 9B14", "arch": "x86_64", "cpu_class": "AVX2", "cores": 2,
              "flags": {"avx2": True, "avx512f": False, "amx_tile": False}, "caps": {"ONEDNN_MAX_CPU_ISA": "AVX2"},
              "load_average": [0.5, 0.25, 1.0]}
    described = "AMD EPYC 9B14, 2 cores, flags avx2, ONEDNN_MAX_CPU_ISA=AVX2, load average 0.50 / 0.25 / 1.00"
    assert module.machine_of({"cpu": record, "machine": "one line"}) == described
    assert module.machine_of({"environment": {"cpu": record}}) == described
    assert module.cpu_class_of(module.RUNS[0], {"cpu": record}) == "AVX2"
    assert module.cpu_class_of(module.RUNS[0], {"machine": "one line"}) == module.RUNS[0].cpu_class
    assert module.machine_of({"machine": "AMD EPYC (x86_64, AVX2), 2 threads"}) == "AMD EPYC (x86_64, AVX2), 2 threads"
    assert module.machine_of({}) == "machine not recorded"
