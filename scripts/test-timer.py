#!/usr/bin/env python3
"""Cargo's runner for the test binaries of scripts/test.sh (CARGO_TARGET_<triple>_RUNNER): runs
one binary with its arguments, passes its output through line by line, and appends how long it
took to the file named by $JB_TEST_TIMES, one tab-separated line per entry:

    binary  <seconds>  <package> <test file>
    test    <seconds>  <package> <test file>::<test name>

A test's time is known when its binary runs its tests one at a time and prints them one line
each (libtest without --quiet, `--test-threads=1`): from the line's `test NAME ... ` (printed when
the test starts) to its result. A harness that prints `test NAME ... ok (12.3 s)` itself (the
emulator's injector tests) is taken at its word. Each such result line is printed with its time.
`--summary FILE [N]` prints the N (10) longest binaries and tests of FILE instead.

A binary of a package named in $JB_SERIAL_PACKAGES runs its tests one at a time
(RUST_TEST_THREADS=1; libtest's own `--test-threads` still wins where given).

Exits with the binary's status (or 128 + the signal that ended it); never fails on its own.
"""
import os
import re
import signal
import subprocess
import sys
import time

RESULT = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)(.*)$")
OWN_TIME = re.compile(r"\((\d+(?:\.\d+)?) s\)")


def label(binary):
    """`<package> <file>` for a test binary `target/debug/deps/<file>-<hash>`."""
    name = re.sub(r"-[0-9a-f]{16}$", "", os.path.basename(binary))
    package = os.environ.get("CARGO_PKG_NAME", "?")
    tests = os.path.join(os.environ.get("CARGO_MANIFEST_DIR", "."), "tests", f"{name}.rs")
    if os.path.exists(tests):
        return f"{package} tests/{name}.rs"
    return f"{package} (unit tests of {name})"


def record(kind, seconds, what):
    path = os.environ.get("JB_TEST_TIMES")
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(f"{kind}\t{seconds:.2f}\t{what}\n")
    except OSError:
        pass


def run(argv):
    binary, who = argv[0], label(argv[0])
    t0 = time.monotonic()
    env = dict(os.environ)
    serial = os.environ.get("CARGO_PKG_NAME") in os.environ.get("JB_SERIAL_PACKAGES", "").split()
    if serial:
        env["RUST_TEST_THREADS"] = "1"
    # Tests that run side by side print their line when they end: no time of their own.
    serial = serial or "--test-threads=1" in argv or env.get("RUST_TEST_THREADS") == "1"
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    out = sys.stdout.buffer
    line, started = b"", None
    while True:
        chunk = os.read(child.stdout.fileno(), 65536)
        if not chunk:
            break
        line += chunk
        # A test that starts prints "test NAME ... " and flushes before it runs.
        if serial and started is None and line.startswith(b"test ") and line.endswith(b" ... "):
            started = time.monotonic()
        while b"\n" in line:
            whole, line = line.split(b"\n", 1)
            text = whole.decode("utf-8", "replace")
            m = RESULT.match(text)
            if m and m.group(2) != "ignored":
                own = OWN_TIME.search(m.group(3))
                if own:
                    seconds = float(own.group(1))
                elif started is not None:
                    seconds = time.monotonic() - started
                    whole += f" ({seconds:.1f} s)".encode()
                else:
                    seconds = None
                if seconds is not None:
                    record("test", seconds, f"{who}::{m.group(1)}")
            if m or not text.startswith("test "):
                started = None
            out.write(whole + b"\n")
            out.flush()
            if serial and started is None and line.startswith(b"test ") and line.endswith(b" ... "):
                started = time.monotonic()
    if line:
        out.write(line)
        out.flush()
    rc = child.wait()
    record("binary", time.monotonic() - t0, who)
    return rc if rc >= 0 else 128 - rc


def summary(path, n):
    rows = {"binary": [], "test": []}
    try:
        with open(path, encoding="utf-8") as f:
            for row in f:
                kind, seconds, what = row.rstrip("\n").split("\t", 2)
                rows[kind].append((float(seconds), what))
    except (OSError, ValueError, KeyError) as e:
        print(f"no test times ({e})")
        return 0
    total = sum(s for s, _ in rows["binary"])
    print(f"{len(rows['binary'])} test binaries ran for {total:.0f} s in all")
    for kind, title in (("binary", "longest test binaries"), ("test", "longest tests run one at a time")):
        print(f"{title}:")
        for seconds, what in sorted(rows[kind], reverse=True)[:n]:
            print(f"  {seconds:7.1f} s  {what}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--summary":
        sys.exit(summary(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 10))
    if len(sys.argv) < 2:
        print("usage: test-timer.py BINARY [ARG…] | --summary FILE [N]", file=sys.stderr)
        sys.exit(2)
    sys.exit(run(sys.argv[1:]))
