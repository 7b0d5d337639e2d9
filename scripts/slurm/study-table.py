#!/usr/bin/env python3
"""The table of a scaling study (scripts/scaling-study.sh): one row per process count and sync
mode with both slowdowns and their 95 % intervals, the platform noise, and a status:

  ok        the numbers pass the checks below
  invalid   a number fails a check; the reason is given
  failed    the run did not finish (from failed.tsv, written by scaling-study.sh)

Checks: a slowdown below zero by more than its 95 % half-width (the jitter run was faster than
its own interleaved baseline: something other than the trace drove the timings); a platform noise
above 50 % of a CPU's time on any rank (the probe ran beside other work: the limit is
jitter_trace::sanity::BUSY_NOISE_RATIO); a paired run without an interval (fewer than two block
pairs finished). A slowdown of the sequential design has no interval: `unchecked`.

usage: study-table.py DIR     exit 0 when every row is ok, 3 otherwise
       study-table.py --self-test
"""

import glob
import json
import os
import sys

BUSY_NOISE_RATIO = 0.5  # jitter_trace::sanity::BUSY_NOISE_RATIO


def interval(sd, ci):
    return f"{sd:8.2f} % ± {ci:5.2f}" if ci is not None else f"{sd:8.2f} %  (no CI)"


def ci_missing(row):
    return row.get("sd_qtbt_ci95_pct") is None or row.get("sd_qt_ci95_pct") is None


def checks(row, report):
    """Reasons why the row's numbers cannot be taken as measured slowdowns."""
    why = []
    for eq, sd, ci in (("eq.2", row["sd_qtbt_pct"], row.get("sd_qtbt_ci95_pct")),
                       ("eq.3", row["sd_qt_pct"], row.get("sd_qt_ci95_pct"))):
        if ci is not None and sd + ci < 0:
            why.append(f"SD {eq} {sd:.2f} % is negative beyond its ±{ci:.2f} interval")
    if ci_missing(row) and (report.get("config", {}).get("run") or {}).get("design") == "paired":
        pairs = [w for w in report.get("warnings", []) if "confidence interval" in w]
        why.append("no 95 % interval" + (f" ({pairs[0]})" if pairs else ""))
    noisy = [c for c in report.get("calibration", [])
             if c.get("platform_noise_ratio", 0) > BUSY_NOISE_RATIO]
    if noisy:
        worst = max(noisy, key=lambda c: c["platform_noise_ratio"])
        why.append(f"platform noise {worst['platform_noise_ratio'] * 100:.1f} % on rank "
                   f"{worst['rank']} ({worst['host']}) is above {BUSY_NOISE_RATIO * 100:.0f} %: "
                   "other work ran on the CPUs")
    return why


def self_test():
    """The checks on made-up rows: each verdict, and its reason."""
    def report(sd, ci, noise, design="paired", warnings=()):
        row = {"sd_qtbt_pct": sd, "sd_qt_pct": sd, "sd_qtbt_ci95_pct": ci, "sd_qt_ci95_pct": ci}
        rep = {"config": {"run": {"design": design}}, "warnings": list(warnings),
               "calibration": [{"rank": 1, "host": "n1", "platform_noise_ratio": noise}]}
        return row, rep
    assert checks(*report(3.0, 0.2, 0.01)) == []
    assert checks(*report(-0.1, 0.2, 0.01)) == []  # negative within its interval
    why = checks(*report(-42.9, 1.0, 0.01))
    assert len(why) == 2 and "SD eq.2 -42.90 % is negative beyond its ±1.00" in why[0], why
    why = checks(*report(3.0, 0.2, 0.998))
    assert why == ["platform noise 99.8 % on rank 1 (n1) is above 50 %: other work ran on the "
                   "CPUs"], why
    why = checks(*report(3.0, None, 0.01, warnings=["only 1 complete block pair(s): no confidence interval"]))
    assert why == ["no 95 % interval (only 1 complete block pair(s): no confidence "
                   "interval)"], why
    assert checks(*report(3.0, None, 0.01, design="sequential")) == []
    print("study-table: self-test passed")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        print("usage: study-table.py DIR", file=sys.stderr)
        return 2
    d = sys.argv[1]
    rows = []
    for path in sorted(glob.glob(os.path.join(d, "*-np*.json"))):
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            rows.append((0, os.path.basename(path), None, f"failed: unreadable report: {e}"))
            continue
        plat = [c.get("platform_noise_ratio", 0) for c in report.get("calibration", [])]
        for r in report.get("results", []):
            why = checks(r, report)
            ci2, ci3 = r.get("sd_qtbt_ci95_pct"), r.get("sd_qt_ci95_pct")
            if why:
                status = "invalid: " + "; ".join(why)
            elif ci_missing(r):
                status = "unchecked: no interval (sequential design)"
            else:
                status = "ok"
            cells = (interval(r["sd_qtbt_pct"], ci2), interval(r["sd_qt_pct"], ci3),
                     f"{max(plat) * 100:6.2f} %" if plat else "     -")
            rows.append((r["ranks"], r["sync"], cells, status))
    failed = os.path.join(d, "failed.tsv")
    if os.path.exists(failed):
        with open(failed) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t", 2)
                if len(parts) == 3:
                    rows.append((int(parts[0]), parts[1], None, "failed: " + parts[2]))
    rows.sort(key=lambda r: (r[0], r[1]))
    print(f"{'procs':>5}  {'sync':<9} {'SD eq.2 (95 % CI)':>20} {'SD eq.3 (95 % CI)':>20} "
          f"{'platform':>9}  status")
    for ranks, sync, cells, status in rows:
        c = cells or ("-", "-", "-")
        print(f"{ranks:>5}  {sync:<9} {c[0]:>20} {c[1]:>20} {c[2]:>9}  {status}")
    bad = [r for r in rows if r[3] != "ok"]
    print(f"{len(rows)} rows: {len(rows) - len(bad)} ok, "
          f"{sum(r[3].startswith('invalid') for r in rows)} invalid, "
          f"{sum(r[3].startswith('failed') for r in rows)} failed, "
          f"{sum(r[3].startswith('unchecked') for r in rows)} unchecked")
    return 3 if bad or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
