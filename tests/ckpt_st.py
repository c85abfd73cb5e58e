"""Reads and rewrites ctron checkpoint files for tests/test_ckpt_base16.sh (numpy only: /usr/bin/python3).

  ckpt_st.py dtypes FILE                 one line per tensor: name dtype bytes (file order); last line:
                                         "header H data D total T" (T == 8 + H + D for a well-formed file)
  ckpt_st.py widen STEP_DIR              every BF16 tensor of model.safetensors rewritten as F32 (exactly:
                                         its bits are a float's top half), in the order ctron's writer used
                                         before the base was stored BF16 (the frozen base first); checksums.txt
                                         updated: a checkpoint as an older ctron wrote it
  ckpt_st.py retype STEP_DIR FILE NAME   tensor NAME of FILE (F32) rewritten as BF16 (round to nearest even),
                                         checksums.txt updated: bad input that verifies
  ckpt_st.py same FILE_A FILE_B NAME...  exit 0 when each NAME has the same dtype, shape and bytes in both
"""
import json
import os
import struct
import sys
import zlib

import numpy as np


def read(path):
    blob = open(path, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    hdr = json.loads(blob[8:8 + n])
    meta = hdr.pop("__metadata__", None)
    data = blob[8 + n:]
    order = sorted(hdr, key=lambda k: hdr[k]["data_offsets"][0])
    raw = {k: data[hdr[k]["data_offsets"][0]:hdr[k]["data_offsets"][1]] for k in order}
    return hdr, meta, order, raw, n, len(data)


def write(path, hdr, meta, order, raw):
    out, off = {}, 0
    if meta is not None:
        out["__metadata__"] = meta
    for k in order:
        out[k] = {"dtype": hdr[k]["dtype"], "shape": hdr[k]["shape"], "data_offsets": [off, off + len(raw[k])]}
        off += len(raw[k])
    h = json.dumps(out, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(raw[k] for k in order))


def resum(step_dir):
    path = os.path.join(step_dir, "checksums.txt")
    lines = open(path).read().splitlines()
    out = []
    for line in lines:
        p = line.split()
        if len(p) == 4 and p[0] == "crc32":
            data = open(os.path.join(step_dir, p[3]), "rb").read()
            line = "crc32 %08x %d %s" % (zlib.crc32(data) & 0xFFFFFFFF, len(data), p[3])
        out.append(line)
    open(path, "w").write("\n".join(out) + "\n")


def widen16(b):
    return (np.frombuffer(b, dtype="<u2").astype(np.uint32) << 16).astype("<u4").tobytes()


def round16(b):
    u = np.frombuffer(b, dtype="<u4").astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()


def main():
    cmd = sys.argv[1]
    if cmd == "dtypes":
        hdr, _, order, raw, n, d = read(sys.argv[2])
        for k in order:
            print(k, hdr[k]["dtype"], len(raw[k]))
        print("header", n, "data", d, "total", os.path.getsize(sys.argv[2]))
    elif cmd == "widen":
        path = os.path.join(sys.argv[2], "model.safetensors")
        hdr, meta, order, raw, _, _ = read(path)
        b16 = [k for k in order if hdr[k]["dtype"] == "BF16"]
        for k in b16:
            hdr[k]["dtype"], raw[k] = "F32", widen16(raw[k])
        write(path, hdr, meta, b16 + [k for k in order if k not in b16], raw)
        resum(sys.argv[2])
    elif cmd == "retype":
        path = os.path.join(sys.argv[2], sys.argv[3])
        hdr, meta, order, raw, _, _ = read(path)
        k = sys.argv[4]
        assert hdr[k]["dtype"] == "F32", k
        hdr[k]["dtype"], raw[k] = "BF16", round16(raw[k])
        write(path, hdr, meta, order, raw)
        resum(sys.argv[2])
    elif cmd == "same":
        a, b = read(sys.argv[2]), read(sys.argv[3])
        for k in sys.argv[4:]:
            if (a[0][k]["dtype"], a[0][k]["shape"], a[3][k]) != (b[0][k]["dtype"], b[0][k]["shape"], b[3][k]):
                print("differs:", k)
                sys.exit(1)
    else:
        sys.exit("unknown command " + cmd)


main()
