#!/usr/bin/env bash
# CUDA compiler launcher (CMakeLists.txt): runs the compile command it is given and keeps ptxas's
# resource report (-Xptxas -v: registers, stack, spill stores and loads per kernel and architecture)
# in <object>.ptxas.log, for tests/check_spills.py. The build's output shows everything else.
out=""
prev=""
for arg in "$@"; do
    [ "$prev" = "-o" ] && out="$arg"
    prev="$arg"
done
log="${out:-/dev/null}.ptxas.log"
[ -n "$out" ] || log=/dev/null
tmp=$(mktemp)
"$@" 2>"$tmp"
rc=$?
grep -v -e '^ptxas info' -e '^    [0-9]* bytes stack frame' "$tmp" >&2
[ "$log" = /dev/null ] || cp "$tmp" "$log"
rm -f "$tmp"
exit $rc
