#!/usr/bin/env bash
# Quick start, command 1: set up .venv if needed and serve the app on http://127.0.0.1:7860
# (extra arguments go to app.py, e.g. --port 8080 --preset tiny-random).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh runtime
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_DISABLE_TELEMETRY=1
exec .venv/bin/python app.py "$@"
