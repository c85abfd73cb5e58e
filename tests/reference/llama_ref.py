#!/usr/bin/env python3
"""transformers reference for ctron's Llama parity (issue 25 item 7) -- being written."""
import sys

# The reference's versions, pinned here (scripts/peer_env.sh installs exactly these: --requirements).
PINS = {"torch": "2.15.0", "transformers": "5.24.0", "safetensors": "0.8.0", "numpy": "2.4.6", "peft": "0.21.2"}


def version_mismatches():
    from importlib.metadata import PackageNotFoundError, version
    bad = []
    for pkg, want in PINS.items():
        try:
            have = version(pkg)
        except PackageNotFoundError:
            have = None
        if have != want:
            bad.append(f"{pkg} {have or 'not installed'} (pinned {want})")
    return bad


if __name__ == "__main__" and sys.argv[1:] == ["--requirements"]:
    print("\n".join(f"{k}=={v}" for k, v in PINS.items()))
elif __name__ == "__main__" and sys.argv[1:] == ["--check-versions"]:
    bad = version_mismatches()
    print("llama_ref.py: " + ("; ".join(bad) if bad else "versions are the pins"))
    sys.exit(1 if bad else 0)
