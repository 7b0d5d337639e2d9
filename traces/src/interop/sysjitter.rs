//! **sysjitter `--raw`** (import only; one file per core, named `<prefix>.<n>`): `#` comment
//! lines, among them `# cpu_mhz: <MHz>`, `# threshold: <n>ns` and `# total_runtime: <x>
//! seconds`, then one line per interruption. Unsorted files (the default) have four columns
//! `<timestamp ns> <delta us> <interruption cycles> <interruption ns>`, files written with
//! `--sort` three: `<timestamp ns> <interruption cycles> <interruption ns>`. The timestamp is
//! when the thread got the CPU back (the *end* of the interruption) relative to the start of the
//! run, so a detour is `start = timestamp − ns, run = ns`. Lines are sorted by time on import
//! (in bounded memory, on disk where they come out of order: [`super::spill`]).
//! Truncation to ns in sysjitter can make a detour start up to a few ns before the previous one
//! ends; such a start is moved to the previous end (and the run shortened by as much). The
//! stream window is `[0, total_runtime]` (or `[0, last end]` without that line); the CPU id is
//! the number after the last `.` of the file name, else the file's position.

use std::path::{Path, PathBuf};

use super::codec::{assemble, int, lines, parse_err, Codec, Part};
use super::spill::{cap, Rows, Spilled, Store};
use crate::error::TraceError;
#[cfg(test)]
use crate::load::read_trace;
use crate::model::Detour;
#[cfg(test)]
use crate::model::Trace;

/// The sysjitter `--raw` codec (import only).
pub(super) struct Sysjitter;

impl Codec for Sysjitter {
    fn name(&self) -> &'static str {
        "sysjitter raw output"
    }

    fn spill(&self, paths: &[PathBuf]) -> Result<Spilled, TraceError> {
        spill_sysjitter(paths)
    }
}

/// Reads sysjitter `--raw` files, one stream per file.
#[cfg(test)]
pub(crate) fn read_sysjitter(paths: &[PathBuf]) -> Result<Trace, TraceError> {
    Ok(read_trace(spill_sysjitter(paths)?.path())?.trace)
}

/// [`read_sysjitter`] into a temporary `.jtr`, in bounded memory ([`super::spill`]).
fn spill_sysjitter(paths: &[PathBuf]) -> Result<Spilled, TraceError> {
    let store = Store::new()?;
    let mut parts = Vec::new();
    let mut mhz = None;
    let mut threshold = None;
    for (i, path) in paths.iter().enumerate() {
        let cpu = path
            .extension()
            .and_then(|e| e.to_str())
            .and_then(|e| e.parse::<u32>().ok())
            .unwrap_or(i as u32);
        let mut runtime_ns: Option<u64> = None;
        let mut rows = Rows::default();
        let mut columns = None;
        for (n, line) in lines(path)? {
            let line = line?;
            let l = line.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(c) = l.strip_prefix('#') {
                let c = c.trim();
                if let Some(v) = c.strip_prefix("cpu_mhz:") {
                    mhz = v.trim().parse::<u64>().ok().or(mhz);
                } else if let Some(v) = c.strip_prefix("threshold:") {
                    threshold = v
                        .trim()
                        .trim_end_matches("ns")
                        .parse::<f64>()
                        .ok()
                        .or(threshold);
                } else if let Some(v) = c.strip_prefix("total_runtime:") {
                    if let Some(secs) = v.trim().strip_suffix("seconds") {
                        let s: f64 = secs.trim().parse().map_err(|_| {
                            parse_err(
                                path,
                                n,
                                format!("total_runtime `{}` is not a number", secs.trim()),
                            )
                        })?;
                        if !(s.is_finite() && s >= 0.0) {
                            return Err(parse_err(path, n, "total_runtime is negative"));
                        }
                        runtime_ns = Some((s * 1e9).round() as u64);
                    }
                }
                continue;
            }
            let cols: Vec<&str> = l.split_whitespace().collect();
            match columns {
                None if cols.len() == 3 || cols.len() == 4 => columns = Some(cols.len()),
                Some(k) if k == cols.len() => {}
                _ => {
                    return Err(parse_err(
                        path,
                        n,
                        format!(
                            "expected 4 columns (timestamp, delta, cycles, ns) or 3 (--sort), \
                             found {}",
                            cols.len()
                        ),
                    ))
                }
            }
            let ts = int(path, n, cols[0], "timestamp")?;
            let ns = int(path, n, cols[cols.len() - 1], "interruption ns")?;
            int(path, n, cols[cols.len() - 2], "interruption cycles")?;
            if cols.len() == 4 {
                let delta = cols[1];
                if !delta
                    .parse::<f64>()
                    .is_ok_and(|d| d.is_finite() && d >= 0.0)
                {
                    return Err(parse_err(
                        path,
                        n,
                        format!("delta `{delta}` is not a number ≥ 0"),
                    ));
                }
            }
            let d = Detour {
                start_ns: ts.saturating_sub(ns),
                run_ns: ns.min(ts),
            };
            rows.push(&store, (d, n), cap(1))?;
        }
        let (kept, last_end) = settle(path, rows, &store)?;
        parts.push(Part {
            cpu,
            window: Some((0, runtime_ns.unwrap_or(0).max(last_end))),
            detours: kept,
            path: path.clone(),
        });
    }
    assemble(parts, store, "sysjitter", |h| {
        if let Some(m) = mhz {
            h.tsc_khz = m * 1000;
        }
        if let Some(th) = threshold {
            h.threshold_ns = th;
        }
    })
}

/// The interruptions of one file in order of start, each moved to start at the end of the one
/// before where sysjitter's separate truncations make them overlap by a few ns (at most
/// 1 µs); a duplicate or a larger overlap is an error naming its line. Returns them with the
/// last one's end.
fn settle(path: &Path, rows: Rows, store: &Store) -> Result<(Rows, u64), TraceError> {
    // sysjitter truncates cycles to ns separately for the timestamp and the interruption, so
    // a start may fall a few ns before the previous end: move it to that end.
    let mut kept = Rows::default();
    let mut last_kept: Option<(Detour, usize)> = None;
    rows.for_each_sorted(store, &mut |(mut d, n)| {
        if let Some((last, m)) = last_kept {
            if d == last {
                return Err(parse_err(path, n, format!("duplicates line {m}")));
            }
            let end = last.end_ns();
            if d.start_ns < end {
                let shift = end - d.start_ns;
                if shift > 1_000 {
                    return Err(parse_err(
                        path,
                        n,
                        format!("interruption overlaps the previous one by {shift} ns"),
                    ));
                }
                if shift >= d.run_ns {
                    return Err(parse_err(
                        path,
                        n,
                        format!("interruption lies within the one of line {m}"),
                    ));
                }
                d.run_ns -= shift;
                d.start_ns = end;
            }
            if d.start_ns <= last.start_ns {
                return Ok(());
            }
        }
        kept.push(store, (d, n), cap(1))?;
        last_kept = Some((d, n));
        Ok(())
    })?;
    kept.seal(store)?;
    Ok((kept, last_kept.map_or(0, |(d, _)| d.end_ns())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interop::tests::write;

    const SYSJITTER: &str = "# cpu_mhz: 2445
# threshold: 200ns
# n_interruptions: 3
# interruption: 0.001000%
# total_interruption: 24450 cycles
# total_runtime: 2445000000 cycles
# total_interruption: 0.000010000 seconds
# total_runtime: 1.000000000 seconds
#
#      Timestamp      delta   <== interruption =>
#         (nsec)     (usec)   (cycles)     (nsec)
           10000          0       4890       2000
          500000        490      12225       5000
          900003        400       7335       3001
";

    #[test]
    fn sysjitter_refuses_a_duplicated_line_and_a_non_numeric_delta() {
        let dir = tempfile::tempdir().unwrap();
        let last = SYSJITTER.lines().last().unwrap();
        let dup = format!("{SYSJITTER}{last}\n");
        let p = write(dir.path(), "dup.0", &dup);
        let e = read_sysjitter(&[p]).unwrap_err().to_string();
        assert!(e.contains("dup.0:15: duplicates line 14"), "{e}");
        let bad = SYSJITTER.replace("    490  ", "    4x0  ");
        assert_ne!(bad, SYSJITTER);
        let p = write(dir.path(), "delta.0", &bad);
        let e = read_sysjitter(&[p]).unwrap_err().to_string();
        assert!(e.contains("delta.0:13: delta `4x0` is not a number"), "{e}");
    }

    #[test]
    fn sysjitter_raw_becomes_detours_ending_at_the_timestamp() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "raw.3", SYSJITTER);
        let t = read_sysjitter(&[p]).unwrap();
        let s = &t.streams[0];
        assert_eq!(s.cpu, 3);
        assert_eq!((s.begin_ns, s.end_ns), (0, 1_000_000_000));
        let d: Vec<(u64, u64)> = s.records.iter().map(|r| (r.start_ns, r.run_ns)).collect();
        assert_eq!(d, vec![(8000, 2000), (495_000, 5000), (897_002, 3001)]);
        assert_eq!(t.header.tsc_khz, 2_445_000);
        assert_eq!(t.header.threshold_ns, 200.0);
    }

    #[test]
    fn sysjitter_sorted_output_is_resorted_by_time() {
        let dir = tempfile::tempdir().unwrap();
        let text = "# cpu_mhz: 1000\n 500000 5000 5000\n 10000 2000 2000\n";
        let p = write(dir.path(), "raw.0", text);
        let t = read_sysjitter(&[p]).unwrap();
        assert_eq!(t.streams[0].records[0].start_ns, 8000);
        assert_eq!(t.streams[0].end_ns, 500_000);
    }
}
