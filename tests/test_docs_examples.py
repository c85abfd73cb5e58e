#!/usr/bin/env python3
"""The docs' examples come from the commands (issue 17): every "`ctron ...`:" line followed by a
fenced block in the given Markdown files is run, and its output must equal the block line for line
(trailing spaces ignored). A stale figure fails with the line that differs.
usage: test_docs_examples.py CTRON DOC.md..."""
import re, shlex, subprocess, sys

ctron, docs = sys.argv[1], sys.argv[2:]
passed = failed = 0
for doc in docs:
    lines = open(doc, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        m = re.fullmatch(r"`(ctron [^`]+)`:", line.strip())
        if not m:
            continue
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j >= len(lines) or lines[j].strip() != "```":
            continue
        end = lines.index("```", j + 1)
        want = [l.rstrip() for l in lines[j + 1:end]]
        args = shlex.split(m.group(1))[1:]
        run = subprocess.run([ctron] + args, capture_output=True, text=True, timeout=120)
        got = [l.rstrip() for l in run.stdout.rstrip("\n").split("\n")]
        if run.returncode != 0:
            failed += 1
            print(f"FAIL: {doc}:{i + 1}: `{m.group(1)}` exited {run.returncode}: {run.stderr.strip()}")
        elif got != want:
            failed += 1
            k = next((k for k in range(max(len(got), len(want))) if k >= len(got) or k >= len(want) or got[k] != want[k]))
            print(f"FAIL: {doc}:{j + 2 + k}: `{m.group(1)}` prints\n  {got[k] if k < len(got) else '(nothing)'}\n"
                  f"but the doc shows\n  {want[k] if k < len(want) else '(nothing)'}")
        else:
            passed += 1
if passed + failed == 0:
    print("FAIL: no example found")
    failed = 1
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
