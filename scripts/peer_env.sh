#!/usr/bin/env bash
# The transformers peer of the Llama parity tests (issue 25 item 7): a Python venv with the torch,
# transformers, safetensors, numpy and peft versions pinned in tests/reference/llama_ref.py (PINS),
# from PyPI, at a cache path outside the repository that every checkout on the machine shares:
#   $CTRON_PEER_VENV, default ${XDG_CACHE_HOME:-$HOME/.cache}/ctron/peer-venv
# (a user path: no sudo; about 5.6 GB, PyPI's Linux torch brings the CUDA libraries).
# Prints the venv's python on stdout. Idempotent: when the installed versions are the pins it only
# reads their metadata (well under a second). make test and make sanitize run it first.
#   scripts/peer_env.sh           install what is missing, print the python
#   scripts/peer_env.sh --path    print the python's path only (CMake's CTRON_PEER_PYTHON default)
# On failure (offline, no python3-venv) it says why on stderr, keeps pip's output in
# $VENV/peer_env.log, and exits 1; the peer tests then fail with that reason (tests/reference/peer_check.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
REF="$ROOT/tests/reference/llama_ref.py"
VENV="${CTRON_PEER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/ctron/peer-venv}"
PY="$VENV/bin/python"
LOG="$VENV/peer_env.log"

if [ "${1:-}" = "--path" ]; then echo "$PY"; exit 0; fi
[ $# -eq 0 ] || { echo "usage: $0 [--path]" >&2; exit 2; }

note() { echo "peer_env.sh: $*" >&2; }
fail() {
    note "FAILED: $1"
    [ -d "$VENV" ] && echo "peer_env.sh: FAILED: $1" >> "$LOG"
    exit 1
}
pinned() { [ -x "$PY" ] && "$PY" "$REF" --check-versions >/dev/null 2>&1; }

if pinned; then echo "$PY"; exit 0; fi

mkdir -p "$VENV" || fail "cannot create $VENV (set CTRON_PEER_VENV to a writable path)"
# One installer at a time: several checkouts' make test may start together.
exec 9> "$VENV.lock"
flock 9
if pinned; then echo "$PY"; exit 0; fi      # another one finished while we waited

mapfile -t REQS < <(/usr/bin/python3 "$REF" --requirements)
[ ${#REQS[@]} -gt 0 ] || fail "no pins from $REF --requirements"
: > "$LOG"
if [ ! -x "$PY" ]; then
    /usr/bin/python3 -m venv "$VENV" >> "$LOG" 2>&1 \
        || fail "python3 -m venv $VENV failed (scripts/setup.sh installs python3-venv): $(tail -n 1 "$LOG")"
fi
note "installing ${REQS[*]} into $VENV (PyPI's torch brings CUDA libraries: ~5.6 GB, minutes) ..."
start=$SECONDS
# pip's defaults here (180 s timeout, 5 retries) would hang for many minutes offline; no pip cache:
# the venv is the cache.
if ! "$PY" -m pip install --disable-pip-version-check --no-cache-dir --timeout 30 --retries 2 \
        "${REQS[@]}" >> "$LOG" 2>&1; then
    tail -n 5 "$LOG" >&2
    fail "pip install ${REQS[*]} failed (offline? log: $LOG)"
fi
pinned || fail "installed, but $REF --check-versions disagrees: $("$PY" "$REF" --check-versions 2>&1 | tail -n 1)"
note "ready in $((SECONDS - start)) s, $(du -sh "$VENV" | cut -f1) at $VENV"
echo "$PY"
