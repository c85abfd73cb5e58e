#!/bin/bash
# Installs the newest PyTorch from PyPI into bench/.venv for the benchmark peer (make bench runs
# this first). Idempotent: a second run only asks PyPI whether a newer torch exists.
#
# PyPI's Linux torch wheel is a CUDA build; its own dependencies would pull gigabytes of nvidia-*
# wheels. On a CPU machine it imports with far less (bench/README.md, "The PyTorch 2.x peer"):
#   - torch itself with --no-deps;
#   - the pure-Python requirements of torch's metadata (typing-extensions, sympy, networkx, ...),
#     and numpy (optional; without it torch warns at import);
#   - the CUDA toolkit's own libraries (libcudart, cublas, cufft, cusparse, cudnn, nvrtc, ...),
#     found through ld.so.conf or the LD_LIBRARY_PATH the wrapper below sets;
#   - the four libraries the toolkit lacks or has too old, at the versions torch's metadata pins:
#     nvidia-cufile (through cuda-toolkit[cufile]==V, which pins it), nvidia-cusparselt-cu13,
#     nvidia-nvshmem-cu13 and nvidia-nccl-cu13 (the toolkit's libnccl lacks ncclCommResume).
# It writes bench/.venv/bin/peer-python, which sets LD_LIBRARY_PATH and runs the venv's Python;
# bench/run_bench.py uses that. On any failure (offline, no toolkit) it says so and exits 0: the
# benchmark then runs Debian's PyTorch 1.13 peer alone and says so too.
#
# Environment: PEER_VENV (default bench/.venv), PEER_CUDA (default /usr/local/cuda-13.0),
# PEER_TORCH (the pip requirement, default torch: the newest).
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="${PEER_VENV:-$HERE/.venv}"
CUDA="${PEER_CUDA:-/usr/local/cuda-13.0}"
TORCH_REQ="${PEER_TORCH:-torch}"
PY="$VENV/bin/python"
WRAP="$VENV/bin/peer-python"
# pip's defaults here (180 s timeout, 5 retries) would hang for many minutes when offline
PIP=("$PY" -m pip --disable-pip-version-check --timeout 30 --retries 1)
LOG="$VENV/setup.log"     # pip's output; shown when a step fails

note() { echo "setup_peer.sh: $*" >&2; }

give_up() {
    note "$1"
    if [ -x "$WRAP" ] && "$WRAP" -c 'import torch' >/dev/null 2>&1; then
        note "keeping the PyTorch $("$WRAP" -c 'import torch; print(torch.__version__)') already in $VENV"
    else
        note "no PyTorch 2.x peer: make bench runs Debian's PyTorch 1.13 peer alone"
    fi
    exit 0
}

make_venv() {
    [ -x "$PY" ] && return 0
    /usr/bin/python3 -m venv "$VENV" || give_up "cannot create $VENV (python3-venv missing?)"
}

# pip "$@" with its output in $LOG (its resolver lists the CUDA packages left out as conflicts:
# expected); the log's tail on failure.
pip_quiet() {
    if ! "${PIP[@]}" "$@" >> "$LOG" 2>&1; then
        tail -n 5 "$LOG" >&2
        return 1
    fi
}

write_wrapper() {
    cat > "$WRAP" <<EOF
#!/bin/sh
# Written by bench/setup_peer.sh: the venv's Python with the CUDA toolkit's libraries on the
# loader path (PyPI's torch links them even on a CPU machine; no GPU is used).
LD_LIBRARY_PATH="$CUDA/lib64\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
exec "$PY" "\$@"
EOF
    chmod +x "$WRAP"
}

# torch's Requires-Dist, one "KIND SPEC" line each: "py" (pure Python, installed with its own
# dependencies), "nodeps" (nvidia-* libraries the toolkit lacks or has too old: --no-deps) and
# "extra" (cuda-toolkit[cufile]==V: an empty package whose extra pins nvidia-cufile). Skipped:
# the CUDA pieces the toolkit provides (cuda-toolkit's other extras, cudnn), cuda-bindings,
# triton, and torch's own extras.
requirements() {
    "$PY" - <<'EOF'
import re
from importlib.metadata import requires
from packaging.requirements import Requirement  # pip vendors packaging; venv has it via pip? no
EOF
}

requirements() {
    "$PY" - <<'EOF'
import re
from importlib.metadata import requires
SKIP = ("cuda-bindings", "triton", "nvidia-cudnn")      # not needed to import and train on CPU
NODEPS = ("nvidia-cusparselt", "nvidia-nccl", "nvidia-nvshmem")
for req in requires("torch") or []:
    spec, _, marker = req.partition(";")
    spec = spec.strip()
    name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower()
    if "extra ==" in marker or name.startswith(SKIP):
        continue
    if name.startswith(NODEPS):
        print("nodeps", spec.replace(" ", ""))
    elif name == "cuda-toolkit":
        version = spec.split("==", 1)[1]
        print("extra", f"cuda-toolkit[cufile]=={version}")
    elif not marker.strip():
        print("py", spec.replace(" ", ""))
EOF
}

install_torch() {
    note "pip install --no-deps --upgrade $TORCH_REQ (the wheel is about 540 MB) ..."
    pip_quiet install --no-deps --upgrade "$TORCH_REQ" \
        || give_up "pip could not install $TORCH_REQ from PyPI"
    local reqs py=() nodeps=() extra=()
    reqs="$(requirements)" || give_up "cannot read torch's requirements"
    while read -r kind spec; do
        case "$kind" in
            py) py+=("$spec") ;;
            nodeps) nodeps+=("$spec") ;;
            extra) extra+=("$spec") ;;
        esac
    done <<< "$reqs"
    note "torch's requirements: ${py[*]} ${extra[*]} ${nodeps[*]}"
    pip_quiet install "${py[@]}" numpy "${extra[@]}" \
        || give_up "pip could not install ${py[*]} ${extra[*]}"
    pip_quiet install --no-deps "${nodeps[@]}" \
        || give_up "pip could not install ${nodeps[*]}"
}

main() {
    [ -d "$CUDA/lib64" ] || note "warning: no CUDA toolkit at $CUDA (PEER_CUDA=DIR); torch may not import"
    make_venv
    : > "$LOG"
    write_wrapper
    install_torch
    local v
    v="$("$WRAP" -c 'import torch; print(torch.__version__)' 2>>"$LOG")" \
        || give_up "torch does not import: $(tail -n 1 "$LOG")"
    note "PyTorch $v ready in $VENV (run it with $WRAP)"
}

main "$@"
