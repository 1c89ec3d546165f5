#!/usr/bin/env bash
# Quick start, command 2: set up .venv with the test tools and run the whole suite,
# real-model and browser tests included (extra arguments go to pytest instead). The passes are below; the
# AVX2-capped one makes a machine with AVX-512 or AMX fail where an AVX2-only CPU would (docs/architecture.md §6).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh dev
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "Installing Debian's chromium for the browser test..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    echo "note: /usr/bin/chromium is missing (install Debian's chromium): the browser test will be skipped" >&2
  fi
fi
# The `vllm` tests run a real vLLM server from its own environment (.venv-vllm, about 3.5 GB once).
bash scripts/vllm.sh install
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_DISABLE_TELEMETRY=1
# Two workers each run torch on every core: OpenMP threads that spin while they wait for work then take the cores
# from the other worker's threads (the AVX2-capped pass took 308 s on two workers, 108 s on one). Passive
# threads sleep instead; the numbers they compute are the same (benchmarks/data/suite-times-2026-11-29.json).
export OMP_WAIT_POLICY=PASSIVE
# The machine the suite ran on, so its time and any CPU-specific failure can be read against it.
.venv/bin/python -c "from engine.cli.machine import describe_machine as d; print('machine:', d())"
# With no arguments the suite runs in three passes:
# 1. every test but the one that needs most of the memory, on two workers (pytest-xdist, one module per worker
#    at a time so a module's browser, app and servers stay with it, and the modules that share a session vLLM
#    server on one worker: tests/conftest.py's groups): the suite waits on browsers, servers and single-threaded
#    Python about half the time, and the second worker fills the idle core (docs/architecture.md §6);
# 2. the tests marked needs_most_memory alone, in a process that holds no other server (tests/memory_room.py);
# 3. the cpu_arithmetic tests again with the CPU capped to AVX2 (ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2).
# --durations prints the slowest tests of each pass, so the next slow one is seen.
# With arguments, one plain pytest run of what they select (every marker included).
pytest=(.venv/bin/python -m pytest -q)
if [ "$#" -gt 0 ]; then
  exec "${pytest[@]}" -m "" --durations=10 "$@"
fi
# Every pass runs even when one fails (its failures are printed); the script fails with the first failed pass.
failed=0
run_pass() {   # run_pass NAME PYTEST-ARGUMENTS...: one pass, timed
  local name=$1 started=$SECONDS status=0
  shift
  "$@" || status=$?
  echo "$name: $((SECONDS - started)) s$([ "$status" = 0 ] || echo ", FAILED (exit $status)")"
  [ "$failed" != 0 ] || failed=$status
}
run_pass "suite on two workers" "${pytest[@]}" -m "not needs_most_memory" -n 2 --dist loadgroup --durations=10
run_pass "tests that need most of the memory" "${pytest[@]}" -m needs_most_memory --durations=3
echo "Portability pass: the cpu_arithmetic tests again with the CPU capped to AVX2..."
run_pass "portability pass" env ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
  "${pytest[@]}" -m cpu_arithmetic -n 2 --dist loadgroup --durations=5
exit "$failed"
