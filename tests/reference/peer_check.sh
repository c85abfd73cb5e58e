#!/usr/bin/env bash
# Runs a test that needs the transformers peer (scripts/peer_env.sh), once that peer is there:
#   peer_check.sh PEER_PYTHON COMMAND [ARGS...]
# Without the peer (no venv, or not the versions pinned in llama_ref.py) the test fails saying why
# and what the installer logged, as in CI (.ci/run); CTRON_PEER_SKIP=1, a local choice, skips it
# instead (exit 77, with the same reason).
set -u
[ $# -ge 2 ] || { echo "usage: $0 PEER_PYTHON COMMAND [ARGS...]" >&2; exit 2; }
PY="$1"
shift
REF="$(cd "$(dirname "$0")" && pwd)/llama_ref.py"
reason=""
if [ ! -x "$PY" ]; then
    reason="no peer python at $PY"
elif ! reason="$("$PY" "$REF" --check-versions 2>&1)"; then
    reason="${reason:-$PY cannot run $REF}"
else
    exec "$@"
fi
log="$(dirname "$(dirname "$PY")")/peer_env.log"
if [ -s "$log" ]; then
    echo "scripts/peer_env.sh's log $log ends:"
    tail -n 5 "$log"
fi
if [ "${CTRON_PEER_SKIP:-0}" = 1 ]; then
    echo "SKIPPED (CTRON_PEER_SKIP=1): the transformers peer is missing: $reason"
    exit 77
fi
echo "FAIL: the transformers peer is missing: $reason."
echo "      Make it with: bash scripts/peer_env.sh (make test does; ~3 min, 5.6 GB once);"
echo "      or skip the tests that need it locally with CTRON_PEER_SKIP=1."
exit 1
