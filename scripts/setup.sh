#!/usr/bin/env bash
# Create .venv (Python 3.11) and install SpecViz's pinned requirements into it.
# Usage: scripts/setup.sh [runtime|dev]. Re-running is cheap: a stamp file keyed by the
# requirement files' hash skips pip when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:-runtime}"
req=requirements.txt
[ "$kind" = dev ] && req=requirements-dev.txt

python_bin="${PYTHON:-}"
if [ -z "$python_bin" ]; then
  for candidate in python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
      python_bin="$candidate"; break
    fi
  done
fi
[ -n "$python_bin" ] || { echo "SpecViz needs Python 3.11 (transformers 5 and the pinned torch wheel); set PYTHON=/path/to/python3.11" >&2; exit 1; }

[ -x .venv/bin/python ] || "$python_bin" -m venv .venv
stamp=.venv/.specviz-$kind-$(cat requirements*.txt | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "Installing $req into .venv (first run downloads about 2 GB of packages, model weights included)..."
  .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
  # torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
  # Everything every preset needs, smollm2-ngram's weights included: the same file a Space installs.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$req"
  touch "$stamp"
fi
