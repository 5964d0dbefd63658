#!/usr/bin/env bash
# buf breaking: the contracts in protos/ (as in the work tree) against the
# contracts as they were just before the newest commit that changed them. So a
# break is caught before it is committed, and it stays caught on every later run
# (CI runs on a clone whose HEAD may be several commits past the change), not
# only while the breaking commit is HEAD. BUF_AGAINST=<git ref> picks another
# baseline (e.g. BUF_AGAINST=HEAD to check only uncommitted edits).
set -euo pipefail
cd "$(dirname "$0")/.."
BUF=$PWD/.venv/bin/buf

fail() { echo "buf breaking: error: $*" >&2; exit 1; }

git rev-parse --git-dir >/dev/null 2>&1 || fail "needs the git history of protos/, and this is not a git checkout"
gitdir=$(git rev-parse --absolute-git-dir)

if [ -n "${BUF_AGAINST:-}" ]; then
  against=$BUF_AGAINST
else
  last=$(git log -1 --format=%H -- protos)
  [ -n "$last" ] || { echo "buf breaking: protos/ has no committed history; nothing to compare"; exit 0; }
  against="$last~1"
fi

if ! base=$(git rev-parse --verify --quiet "$against^{commit}"); then
  if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    fail "the baseline $against is not in this shallow clone; deepen it (git fetch --deepen=50, or --unshallow) or set BUF_AGAINST=<ref>"
  fi
  if [ -z "${BUF_AGAINST:-}" ] && ! git rev-parse --verify --quiet "$last^" >/dev/null; then
    echo "buf breaking: protos/ was created by the root commit; nothing earlier to compare"
    exit 0
  fi
  fail "no commit $against"
fi

echo "buf breaking: protos/ against $(git log -1 --format='%h %s' "$base" | cut -c1-72)"
cd protos
"$BUF" breaking --against "$gitdir#ref=$base,subdir=protos"
