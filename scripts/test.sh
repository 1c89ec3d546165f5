#!/usr/bin/env bash
# Quick start, command 2: set up .venv with the test tools and run the whole suite,
# real-model and browser tests included (extra arguments go to pytest).
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
# -m "" selects every marker: real models, the browser and the real vLLM server included.
exec .venv/bin/python -m pytest -m "" -q "$@"
