#!/usr/bin/env python3
"""The table and summary.json of scripts/validate-app.sh's output folder (its only caller).

Reads app/NAME.json (`replay-bench app` reports), predict/NAME.json (`replay-bench predict --app`
reports, where made), logs/load.txt and logs/overhead-npN.tsv; prints one table of the studies
and one of the profiling overhead; writes summary.json with every row.

The verdict is the project's rule (replay-bench/src/verdict.rs, `Verdict::judge`): with
d = predicted - measured, h the measured 95 % half-width (the prediction taken as exact) and an
allowance of 1 pp + the platform's own noise (the app report's probe): no verdict unless
h < |measured| or |d| + h <= allowance; then "inside" if |d| <= h, "near" if |d| <= allowance,
else "disagree"; a row whose platform noise exceeds a tenth of the trace's (replay-bench app's
warning) is marked as measured on a busy machine. The paired slowdown and its interval are
metrics::paired_slowdown's.

Seed-matched rule (where predict/NAME.runs.json exists: `predict --app --runs-of`, each measured
run predicted from its own JITTER_SEED and the library's points): per counted pair i, the
measured slowdown s_i = 100 (with_i - without_i) / mean(without) (their mean is the paired
slowdown) minus the prediction p_i of that run; the differences' mean and 95 % t half-width judge
as above (inside: |mean| <= h; else within 1 pp + platform noise; no verdict unless h < |measured|
or |mean| + h <= the allowance). The old rule's verdict stays beside it. Each run's injected noise
share (the library's summary) is set beside the share the same plan injects in its prediction.
"""

import json
import math
import os
import sys

AGREE_PP = 1.0
GOAL_OVERHEAD_PCT = 1.0
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045, 2.042]
Z975 = 1.959963984540054


def t975(df):
    """jitter_trace::summary::t975: the table to 30, the Cornish-Fisher expansion above."""
    if df <= 0:
        return float("nan")
    if df <= 30:
        return T975[df - 1]
    z, v = Z975, float(df)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v * v)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3))


def paired_slowdown(pairs):
    """100 d/a with its 95 % t half-width, as metrics::paired_slowdown."""
    n = len(pairs)
    if n < 2:
        return float("nan"), float("nan")
    a = sum(p[0] for p in pairs) / n
    d = [p[1] - p[0] for p in pairs]
    dm = sum(d) / n
    sd = math.sqrt(sum((x - dm) ** 2 for x in d) / (n - 1))
    return 100 * dm / a, 100 * t975(n - 1) * sd / math.sqrt(n) / a


def judge(measured, h, predicted, platform_pct):
    """verdict.rs Verdict::judge, in the table's words."""
    if h is None or not math.isfinite(h) or not math.isfinite(predicted):
        return "no verdict (no interval)"
    allowance = AGREE_PP + max(platform_pct, 0.0)
    d = abs(predicted - measured)
    if not (h < abs(measured) or d + h <= allowance):
        return "no verdict (interval wider than the effect)"
    if d <= h:
        return "agree (inside)"
    if d <= allowance:
        return f"agree (within {AGREE_PP:g} pp + platform)"
    return "disagree"


def mean_h(xs):
    """Mean and 95 % t half-width of xs (nan with fewer than two)."""
    n = len(xs)
    if n < 2:
        return (xs[0] if xs else float("nan")), float("nan")
    m = sum(xs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return m, t975(n - 1) * sd / math.sqrt(n)


def judge_paired(measured, d, h, platform_pct):
    """The seed-matched rule: the mean paired difference d and its half-width h."""
    if not (math.isfinite(d) and math.isfinite(h)):
        return "no verdict (no interval)"
    allowance = AGREE_PP + max(platform_pct, 0.0)
    if not (h < abs(measured) or abs(d) + h <= allowance):
        return "no verdict (interval wider than the effect)"
    if abs(d) <= h:
        return "agree (inside)"
    if abs(d) <= allowance:
        return f"agree (within {AGREE_PP:g} pp + platform)"
    return "disagree"


def value(run):
    """A run's measured value, as RunRecord::value: the printed metric, else the loop's time,
    else the wall time."""
    for key in ("metric", "loop_ns", "wall_ns"):
        if isinstance(run.get(key), (int, float)):
            return run[key]
    return None


def seed_matched(app, runs_report, measured, platform_pct):
    """The seed-matched columns of a study from its app report and predict --runs-of report."""
    by_pair = {}
    for r in app.get("runs", []):
        if not r.get("warmup") and (r.get("status") or {}).get("ended") == "exited":
            by_pair.setdefault(r["pair"], {})[r["arm"]] = r
    pairs = {k: v for k, v in by_pair.items() if "with" in v and "without" in v}
    base = [value(v["without"]) for v in pairs.values()]
    if not base or not isinstance(measured, (int, float)):
        return {}
    a = sum(base) / len(base)
    predicted = {m["pair"]: m for m in runs_report.get("measured_runs", [])}
    diffs, preds, shares = [], [], []
    for k in sorted(pairs):
        if k not in predicted:
            continue
        v, m = pairs[k], predicted[k]
        s_i = 100 * (value(v["with"]) - value(v["without"])) / a
        diffs.append(s_i - m["sd_qtbt_pct"])
        preds.append(m["sd_qtbt_pct"])
        lib = (v["with"].get("library") or {}).get("noise_share")
        if isinstance(lib, (int, float)):
            shares.append({"pair": k, "seed": m["seed"], "library_pct": 100 * lib,
                           "predicted_pct": 100 * m["noise_share"],
                           "measured_slowdown_pct": s_i, "predicted_slowdown_pct": m["sd_qtbt_pct"]})
    if not diffs:
        return {}
    d, h = mean_h(diffs)
    sd = [x["library_pct"] - x["predicted_pct"] for x in shares]
    sdm, sdh = mean_h(sd)
    return {
        "seed_matched_pairs": len(diffs),
        "seed_matched_predicted_pct": sum(preds) / len(preds),
        # measured - predicted, per pair
        "seed_matched_difference_pp": d, "seed_matched_difference_ci95_pp": h,
        "seed_matched_verdict": judge_paired(measured, d, h, platform_pct),
        "noise_share_library_pct": sum(x["library_pct"] for x in shares) / max(len(shares), 1),
        "noise_share_predicted_pct": sum(x["predicted_pct"] for x in shares) / max(len(shares), 1),
        "noise_share_difference_pp": sdm, "noise_share_difference_ci95_pp": sdh,
        "noise_share_max_abs_difference_pp": max((abs(x) for x in sd), default=float("nan")),
        "noise_share_runs_beyond_1pp": sum(1 for x in sd if abs(x) > 1.0),
        "runs": shares,
    }


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def predicted_of(report):
    """(slowdown %, 95 % half-width or None, [lo, hi] over draws or None, where it was read)."""
    rows = report.get("results") if isinstance(report, dict) else None
    if isinstance(rows, list) and rows and isinstance(rows[0], dict):
        row = rows[0]
        for key in ("sd_qtbt_pct", "slowdown_pct", "sd_pct"):
            if isinstance(row.get(key), (int, float)):
                ci = row.get(key.replace("_pct", "_ci95_pct"))
                draws = row.get("draws") or {}
                rng = draws.get("sd_qtbt_range_pct") if isinstance(draws, dict) else None
                return float(row[key]), ci, rng, f"results[0].{key}"
    return None


def fmt(x, digits=2):
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def study_rows(out):
    loads = {}
    try:
        with open(os.path.join(out, "logs", "load.txt")) as f:
            for line in f:
                name, *avg = line.split()
                loads[name] = " ".join(avg)
    except OSError:
        pass
    rows = []
    app_dir = os.path.join(out, "app")
    for fname in sorted(os.listdir(app_dir)) if os.path.isdir(app_dir) else []:
        if not fname.endswith(".json") or fname.endswith(".runs.json"):
            continue
        name = fname[:-5]
        program, np_, trace, sync = name.split("-", 3)
        app = load(os.path.join(app_dir, fname)) or {}
        res = app.get("result") or {}
        eff = res.get("effect") or {}
        platform_pct = 100 * (app.get("platform_noise") or {}).get("noise_ratio", 0.0)
        row = {
            "program": program, "np": int(np_[2:]), "trace": trace, "sync": sync,
            "load_average_before": loads.get(name),
            "measured_pct": eff.get("slowdown_pct"), "measured_ci95_pp": eff.get("slowdown_ci95_pct"),
            "pairs": eff.get("pairs"), "app_verdict": eff.get("verdict"),
            "pairs_needed": eff.get("pairs_needed"),
            "injected_share": res.get("injected_share"),
            "metric": app.get("metric"),
            "wall_pct": (res.get("wall") or {}).get("slowdown_pct"),
            "wall_ci95_pp": (res.get("wall") or {}).get("slowdown_ci95_pct"),
            "startup_ms": [x / 1e6 for x in res["startup_ns"]] if res.get("startup_ns") else None,
            "outside_loop_s": [x / 1e9 for x in res["outside_loop_ns"]]
            if res.get("outside_loop_ns") else None,
            "trace_noise_ratio": app.get("trace_noise_ratio"),
            "platform_noise_pct": platform_pct, "stopped": app.get("stopped"),
            "warnings": app.get("warnings", []), "app_report": f"app/{fname}",
        }
        pred_path = os.path.join(out, "predict", fname)
        pred = load(pred_path) if os.path.exists(pred_path) else None
        got = predicted_of(pred) if pred is not None else None
        if got is not None:
            p, pci, prange, field = got
            row.update(predicted_pct=p, predicted_ci95_pp=pci, predicted_draw_range_pct=prange,
                       predicted_field=field, predict_report=f"predict/{fname}")
            m = row["measured_pct"]
            if isinstance(m, (int, float)):
                row["difference_pp"] = p - m
                row["verdict"] = judge(m, row["measured_ci95_pp"], p, platform_pct)
                if row["verdict"].startswith("no verdict") and row["pairs_needed"]:
                    row["verdict"] += f"; ~{row['pairs_needed']} pairs would resolve the effect"
            else:
                row["verdict"] = "no measurement (the study stopped)"
            trace_pct = 100 * (row["trace_noise_ratio"] or 0.0)
            if platform_pct > 0.1 * trace_pct:
                # replay-bench app's own threshold: the machine adds more than a tenth of the
                # trace's noise, and the allowance (1 pp + platform) makes "agree" cheap.
                row["verdict"] += " [busy machine: platform noise > 1/10 of the trace's]"
        elif pred is not None:
            row["verdict"] = "no prediction (its report has no slowdown this script knows)"
        else:
            row["verdict"] = "no prediction"
        runs_path = os.path.join(out, "predict", name + ".runs.json")
        runs_report = load(runs_path) if os.path.exists(runs_path) else None
        if runs_report is not None:
            row.update(seed_matched(app, runs_report, row["measured_pct"], platform_pct))
            row["runs_report"] = f"predict/{name}.runs.json"
        rows.append(row)
    rows.sort(key=lambda r: (r["program"], r["np"], r["trace"] != "periodic", r["sync"]))
    return rows


def overhead_rows(out):
    rows = []
    logs = os.path.join(out, "logs")
    for fname in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
        if not (fname.startswith("overhead-np") and fname.endswith(".tsv")):
            continue
        runs = {}
        with open(os.path.join(logs, fname)) as f:
            for line in f:
                fields = line.split("\t")
                if len(fields) != 5:
                    sys.exit(f"validate-app: error: logs/{fname} is not an overhead table of"
                             " this script (pair, arm, mean, median, kind)")
                i, arm, mean_ns, median_ns, kind = fields
                if kind.strip() == "counted":
                    runs.setdefault(int(i), {})[arm] = (float(mean_ns), float(median_ns))
        both = [(r["0"], r["1"]) for _, r in sorted(runs.items()) if "0" in r and "1" in r]
        mean_pct, mean_h = paired_slowdown([(a[0], b[0]) for a, b in both])
        pairs = [(a[1], b[1]) for a, b in both]
        pct, h = paired_slowdown(pairs)
        if not math.isfinite(h):
            verdict = "no interval"
        elif pct + h <= GOAL_OVERHEAD_PCT:
            verdict = f"meets <= {GOAL_OVERHEAD_PCT:g} % (whole interval below)"
        elif pct - h > GOAL_OVERHEAD_PCT:
            verdict = f"exceeds {GOAL_OVERHEAD_PCT:g} % (whole interval above)"
        else:
            verdict = f"undecided (interval straddles {GOAL_OVERHEAD_PCT:g} %)"
        without = [p[0] for p in pairs]
        rows.append({"np": int(fname[len("overhead-np"):-4]), "pairs": len(pairs),
                     "overhead_pct": pct, "overhead_ci95_pp": h, "verdict": verdict,
                     "on_mean_pct": mean_pct, "on_mean_ci95_pp": mean_h,
                     "median_iter_ns_without": sum(without) / len(without) if without else None,
                     "runs": f"logs/{fname}"})
    return rows


def scale_rows(out):
    """predict/PROGRAM-npN-scale.json: each profile predicted at large rank counts."""
    rows = []
    pred_dir = os.path.join(out, "predict")
    for fname in sorted(os.listdir(pred_dir)) if os.path.isdir(pred_dir) else []:
        if not fname.endswith("-scale.json"):
            continue
        program, np_ = fname[:-len("-scale.json")].split("-", 1)
        report = load(os.path.join(pred_dir, fname)) or {}
        for r in report.get("results", []):
            draws = r.get("draws") or {}
            rows.append({"program": program, "profiled_np": int(np_[2:]), "ranks": r.get("ranks"),
                         "sync": r.get("sync"), "predicted_pct": r.get("sd_qtbt_pct"),
                         "predicted_ci95_pp": r.get("sd_qtbt_ci95_pct"),
                         "draw_range_pct": draws.get("sd_qtbt_range_pct"),
                         "report": f"predict/{fname}"})
    return rows


def main():
    out = sys.argv[1]
    rows, overhead, scale = study_rows(out), overhead_rows(out), scale_rows(out)
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"studies": rows, "overhead": overhead, "scale": scale}, f, indent=2)
    if scale:
        print(f"{'predicted at scale':18} {'profiled np':>11} {'ranks':>7} {'sync':6} "
              f"{'slowdown % ± h (95 %)':>22} {'over draws %':>18}")
        for r in scale:
            p = fmt(r["predicted_pct"])
            if isinstance(r.get("predicted_ci95_pp"), (int, float)):
                p += f" ± {fmt(r['predicted_ci95_pp'])}"
            rng = r.get("draw_range_pct")
            rng = f"[{fmt(rng[0])}, {fmt(rng[1])}]" if rng else "-"
            print(f"{r['program']:18} {r['profiled_np']:>11} {r['ranks']:>7} {r['sync']:6} "
                  f"{p:>22} {rng:>18}")
        print()
    if rows:
        head = f"{'program':9} {'np':>3} {'trace':10} {'sync':7} {'measured % ± h (95 %)':>22} " \
               f"{'predicted %':>22} {'diff pp':>8} {'platform %':>10}  verdict"
        print(head)
        for r in rows:
            m = f"{fmt(r['measured_pct'])} ± {fmt(r['measured_ci95_pp'])}"
            p = "-"
            if r.get("predicted_pct") is not None:
                p = fmt(r["predicted_pct"])
                if isinstance(r.get("predicted_ci95_pp"), (int, float)):
                    p += f" ± {fmt(r['predicted_ci95_pp'])}"
                elif r.get("predicted_draw_range_pct"):
                    lo, hi = r["predicted_draw_range_pct"]
                    p += f" [{fmt(lo)}, {fmt(hi)}]"
            print(f"{r['program']:9} {r['np']:>3} {r['trace']:10} {r['sync']:7} {m:>22} {p:>22} "
                  f"{fmt(r.get('difference_pp')):>8} {fmt(r['platform_noise_pct']):>10}  "
                  f"{r['verdict']}")
        metrics = sorted({r.get("metric") or "?" for r in rows})
        print(f"measured: replay-bench app's paired slowdown of: {'; '.join(metrics)}; verdict:"
              " replay-bench/src/verdict.rs (inside the 95 % interval, or within 1 pp + platform"
              " noise)")
        beside = [r for r in rows if r.get("wall_pct") is not None or r.get("startup_ms")]
        if beside:
            print(f"\n{'program':9} {'np':>3} {'trace':10} {'sync':7} {'metric %':>8} "
                  f"{'wall time % ± h':>18} {'start-up ms (without, with)':>28} "
                  f"{'outside the loop s (without, with)':>35}")
            for r in beside:
                w = f"{fmt(r.get('wall_pct'))} ± {fmt(r.get('wall_ci95_pp'))}"
                su = r.get("startup_ms")
                su = f"{fmt(su[0], 1)}, {fmt(su[1], 1)}" if su else "-"
                ol = r.get("outside_loop_s")
                ol = f"{fmt(ol[0], 3)}, {fmt(ol[1], 3)}" if ol else "-"
                print(f"{r['program']:9} {r['np']:>3} {r['trace']:10} {r['sync']:7} "
                      f"{fmt(r['measured_pct']):>8} {w:>18} {su:>28} {ol:>35}")
    matched = [r for r in rows if "seed_matched_verdict" in r]
    if matched:
        print("\nseed-matched (each measured run beside the prediction of its own seed and the"
              " library's points; d = measured - predicted per pair):")
        print(f"{'program':9} {'np':>3} {'trace':10} {'sync':7} {'measured %':>10} "
              f"{'pred % (runs)':>13} {'d pp ± h':>16} {'old rule':>10}  seed-matched verdict")
        for r in matched:
            dd = f"{fmt(r['seed_matched_difference_pp'])} ± {fmt(r['seed_matched_difference_ci95_pp'])}"
            old = r["verdict"].split(" (")[0].split(" [")[0]
            print(f"{r['program']:9} {r['np']:>3} {r['trace']:10} {r['sync']:7} "
                  f"{fmt(r['measured_pct']):>10} {fmt(r['seed_matched_predicted_pct']):>13} "
                  f"{dd:>16} {old:>10}  {r['seed_matched_verdict']}")
        print("\ninjected noise share per run (library's summary vs the same plan in the run's"
              " prediction):")
        print(f"{'program':9} {'np':>3} {'trace':10} {'sync':7} {'library %':>9} {'predicted %':>11}"
              f" {'lib - pred pp ± h':>18} {'max |.| pp':>10} {'runs > 1 pp':>11}")
        for r in matched:
            dd = f"{fmt(r['noise_share_difference_pp'])} ± {fmt(r['noise_share_difference_ci95_pp'])}"
            print(f"{r['program']:9} {r['np']:>3} {r['trace']:10} {r['sync']:7} "
                  f"{fmt(r['noise_share_library_pct']):>9} {fmt(r['noise_share_predicted_pct']):>11}"
                  f" {dd:>18} {fmt(r['noise_share_max_abs_difference_pp']):>10}"
                  f" {r['noise_share_runs_beyond_1pp']:>11}")
    if overhead:
        print(f"\n{'profiling overhead (halo)':26} {'np':>3} {'pairs':>5} {'on the median % ± h':>22}"
              f" {'on the mean % ± h':>22}  verdict (on the median)")
        for r in overhead:
            m = f"{fmt(r['overhead_pct'], 3)} ± {fmt(r['overhead_ci95_pp'], 3)}"
            a = f"{fmt(r['on_mean_pct'], 3)} ± {fmt(r['on_mean_ci95_pp'], 3)}"
            print(f"{'':26} {r['np']:>3} {r['pairs']:>5} {m:>22} {a:>22}  {r['verdict']}")


if __name__ == "__main__":
    main()
