#!/usr/bin/env bash
# Writes the default corpus, the King James Bible (Debian's bible-kjv), to data/kjv.txt.
set -euo pipefail
mkdir -p data
if [ ! -s data/kjv.txt ]; then
  if ! command -v bible > /dev/null; then
    echo "data: cannot make data/kjv.txt: the 'bible' command (Debian's bible-kjv) is missing; run make setup" >&2
    exit 1
  fi
  bible Gen1:1-Rev22:21 > data/kjv.txt.tmp
  mv data/kjv.txt.tmp data/kjv.txt
  echo "data: wrote data/kjv.txt ($(wc -c < data/kjv.txt) bytes)"
fi
