#!/usr/bin/env bash
# Installs the Debian packages ctron needs, only those that are missing.
set -euo pipefail
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in cmake gcc make libopenblas-openmp-dev libdnnl-dev libcjson-dev libpcre2-dev libutf8proc-dev zlib1g-dev libomp-dev libopenmpi-dev openmpi-bin bible-kjv python3-torch python3-numpy python3-venv \
           clang libclang-rt-14-dev valgrind; do
  have "$pkg" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${need[@]}"
fi
# Python's safetensors package, for the checkpoint interop test (tests/test_interop.py). Optional:
# without it (offline, no pip) that test reads and writes the format with its own numpy code.
if ! /usr/bin/python3 -c "import safetensors" 2>/dev/null && /usr/bin/python3 -m pip --version >/dev/null 2>&1; then
  echo "setup: pip-installing safetensors (optional)"
  /usr/bin/python3 -m pip install -q --retries 0 --timeout 15 --break-system-packages safetensors >/dev/null 2>&1 \
    || echo "setup: safetensors not installed (offline?); tests/test_interop.py falls back to numpy"
fi
