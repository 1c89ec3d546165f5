#!/usr/bin/env bash
# Quick start, command 2: set up .venv with the test tools and run the whole suite,
# real-model and browser tests included (extra arguments go to pytest).
# With no arguments, a second pass runs the tests that depend on the CPU's arithmetic (marker
# cpu_arithmetic) again with the CPU capped to AVX2 (ATEN_CPU_CAPABILITY=avx2, ONEDNN_MAX_CPU_ISA=AVX2),
# so a machine with AVX-512 or AMX fails where an AVX2-only CPU would (docs/architecture.md §6).
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
# The machine the suite ran on, so its time and any CPU-specific failure can be read against it.
.venv/bin/python -c "from engine.cli.machine import describe_machine as d; print('machine:', d())"
# -m "" selects every marker: real models, the browser and the real vLLM server included.
# --durations=10 prints the ten slowest tests, so the next slow one is seen.
started=$SECONDS
.venv/bin/python -m pytest -m "" -q --durations=10 "$@"
echo "suite: $((SECONDS - started)) s"
[ "$#" -eq 0 ] || exit 0
echo "Portability pass: the cpu_arithmetic tests again with the CPU capped to AVX2..."
started=$SECONDS
ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 .venv/bin/python -m pytest -m cpu_arithmetic -q --durations=5
echo "portability pass: $((SECONDS - started)) s"
