#!/usr/bin/env python3
"""Tables of docs/VALIDATION.md "Simulation vs real runs on a 16-core machine" from this folder.

Reads sweep-{a,b,c}/<trace>/run-np*-*.json (measured), predict-<trace>.json (predicted) and
baselines/*.json (no-jitter runs), writes table.txt and baseline-spread.txt. Run it from
anywhere: python3 docs/validation/device-2026-11-22/combine.py
"""
import glob
import json
import os
import statistics as st

HERE = os.path.dirname(os.path.abspath(__file__))
SWEEPS = [("a", "separate baseline run"), ("b", "separate baseline run"),
          ("c", "baseline measured in the same job")]
TRACES = ["device", "synthetic-rl1"]
NPS = [1, 2, 4, 8, 16]
SYNCS = ["none", "once", "phase"]


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(x, w=6, d=2, sign=False):
    return f"{x:{'+' if sign else ''}{w}.{d}f}"


def table():
    out = []
    out.append("Measured vs predicted SD (eq. 2 = AvgMaxQTBT, eq. 3 = AvgMaxQT), in %.")
    out.append("a, b: baseline from a separate no-jitter run just before (--baseline FILE); "
               "c: baseline measured first in the same job (--baseline measured).")
    out.append("noise: platform noise reported by each run's probe, mean over ranks (max over "
               "ranks in brackets), averaged over the three runs.")
    out.append("pass: runs with |measured eq.2 - predicted eq.2| <= 1 pp + that run's noise "
               "(mean over ranks) / (max over ranks).")
    totals = {}
    for trace in TRACES:
        pred = {(r["ranks"], r["sync"]): r
                for r in load(os.path.join(HERE, f"predict-{trace}.json"))["results"]}
        out.append("")
        out.append(f"trace {trace}")
        out.append(" np  sync  | meas eq.2 a / b / c      | mean   sd   | meas eq.3 mean | "
                   "pred eq.2 pred eq.3 | diff (mean) | noise mean (max) | pass mean/max")
        for np_ in NPS:
            for sync in SYNCS:
                e2, e3, nmean, nmax, ok_mean, ok_max = [], [], [], [], 0, 0
                p = pred[(np_, sync)]
                for s, _ in SWEEPS:
                    r = load(os.path.join(HERE, f"sweep-{s}", trace, f"run-np{np_}-{sync}.json"))
                    x = r["results"][0]
                    noise = [c["platform_noise_ratio"] * 100 for c in r["calibration"]]
                    e2.append(x["sd_qtbt_pct"])
                    e3.append(x["sd_qt_pct"])
                    nmean.append(sum(noise) / len(noise))
                    nmax.append(max(noise))
                    d = abs(x["sd_qtbt_pct"] - p["sd_qtbt_pct"])
                    ok_mean += d <= 1 + nmean[-1]
                    ok_max += d <= 1 + nmax[-1]
                key = (trace, sync)
                t = totals.setdefault(key, [0, 0, 0])
                t[0] += ok_mean
                t[1] += ok_max
                t[2] += len(SWEEPS)
                out.append(
                    f"{np_:3d} {sync:6s}| {' / '.join(fmt(v) for v in e2)} | "
                    f"{fmt(st.mean(e2))} {fmt(st.stdev(e2), 4)} | {fmt(st.mean(e3), 14)} | "
                    f"{fmt(p['sd_qtbt_pct'], 9)} {fmt(p['sd_qt_pct'], 9)} | "
                    f"{fmt(st.mean(e2) - p['sd_qtbt_pct'], 11, sign=True)} | "
                    f"{fmt(st.mean(nmean), 8)} ({fmt(st.mean(nmax), 5)}) | "
                    f"{ok_mean}/3 {ok_max}/3")
    out.append("")
    out.append("runs within 1 pp + platform noise (mean over ranks / max over ranks), of all runs:")
    for (trace, sync), (a, b, n) in totals.items():
        out.append(f"  {trace:14s} {sync:6s} {a:2d} / {b:2d} of {n}")
    a = sum(v[0] for v in totals.values())
    b = sum(v[1] for v in totals.values())
    n = sum(v[2] for v in totals.values())
    out.append(f"  all                   {a:2d} / {b:2d} of {n}")
    return "\n".join(out) + "\n"


def emulator_counts():
    out = ["", "Emulator counters, measured (sweep c) vs predicted, trace synthetic-rl1 and "
           "device, np 1:"]
    for trace in TRACES:
        pred = {(r["ranks"], r["sync"]): r
                for r in load(os.path.join(HERE, f"predict-{trace}.json"))["results"]}
        for sync in SYNCS:
            m = load(os.path.join(HERE, "sweep-c", trace, f"run-np1-{sync}.json"))["results"][0]
            p = pred[(1, sync)]
            me, pe = m["emulator"], p["emulator"]
            out.append(
                f"  {trace:14s} {sync:6s} injected {me['injected']:6d} / {pe['injected']:6d}, "
                f"injected_ns {me['injected_ns'] / 1e6:8.2f} / {pe['injected_ns'] / 1e6:8.2f} ms, "
                f"dropped {me['dropped']:5d} / {pe['dropped']:5d}, phases {m['phases']} / "
                f"{p['phases']}")
    return "\n".join(out) + "\n"


def baselines():
    out = ["No-jitter runs (--baseline quanta), 6 of each, interleaved, q = 1 ms, 5 s scaled "
           "wall each; AvgMaxQT in ms; ns/iter: the work rate each run calibrated at its start.",
           " np   S | AvgMaxQT min   mean    max    sd     | ns/iter min  max"]
    for np_ in [1, 16]:
        for s in [2, 20]:
            v, w = [], []
            for f in sorted(glob.glob(os.path.join(HERE, "baselines", f"b-np{np_}-S{s}-*.json"))):
                r = load(f)
                v.append(r["results"][0]["avg_max_qt_ns"] / 1e6)
                w.append(float(r["config"]["extra"]["ns_per_iteration"]))
            out.append(f"{np_:3d} {s:3d} | {min(v):.4f} {st.mean(v):.4f} {max(v):.4f} "
                       f"{st.stdev(v) * 1000:5.1f} us | {min(w):.4f} {max(w):.4f}")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    text = table() + emulator_counts()
    with open(os.path.join(HERE, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(HERE, "baseline-spread.txt"), "w") as f:
        f.write(baselines())
    print(text)
    print(baselines())
