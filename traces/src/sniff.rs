//! What a file is, by its content: the one input sniffing step, beside [`crate::interop::Format`]'s
//! guess from the name. Every reader that expects one kind of file asks it before (or, for a
//! `.jtr` reader, instead of) failing on another: a `.jtr` trace under a CSV name, a CSV under
//! a `.jtr` name, a prediction report where a run's report belongs, a trace given as a profile.
//! The error names what the file is and what to give instead, in one line, rather than the
//! parser's complaint about its first bytes ("invalid utf-8", "bad magic bytes", "expected
//! value at line 1").
//!
//! Kinds are told by their first bytes (the `.jtr` and rank-record magics, ELF, gzip, zstd,
//! text or binary) and, for JSON, by the fields each jitterbench writer puts at the top level
//! ([`JSON_KINDS`]): the file is read once as a JSON object whose other fields are skipped.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use serde::de::IgnoredAny;
use serde::Deserialize;

use crate::error::TraceError;

/// The first bytes of a `.jtr` trace (`crate::format::MAGIC` is this: told here, where every
/// kind is told, so that the format's reader can ask this module without a circle).
pub(crate) const JTR_MAGIC: [u8; 8] = *b"\x89JTR\r\n\x1a\n";

/// Bytes looked at to tell text from binary data.
const HEAD: usize = 4096;

/// What a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing.
    Empty,
    /// A `.jtr` trace (its magic bytes).
    Jtr,
    /// A rank record of a `JITTER_PROFILE` run (`JBPROF01`).
    RankRecord,
    /// A JSON document, of the kind its fields say.
    Json(JsonKind),
    /// Text that is not JSON (CSV, JSON lines, sysjitter, LogGOPSim: told apart by their
    /// readers).
    Text,
    /// An ELF executable or library.
    Elf,
    /// Compressed data (gzip, zstd, xz, bzip2).
    Compressed,
    /// Other binary data.
    Binary,
}

/// The JSON files jitterbench writes, told apart by their top-level fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// `replay-bench run` (a measurement).
    RunReport,
    /// `replay-bench predict` (a prediction, DES or order statistics).
    PredictionReport,
    /// `replay-bench run --virtual-ranks`.
    VirtualRanksReport,
    /// `replay-bench app`.
    AppReport,
    /// The application profile (`JITTER_PROFILE`).
    Profile,
    /// An emulator calibration (`jitter-emulate calibrate`).
    Calibration,
    /// A trace's attribution sidecar (`<trace>.attr.json`).
    Attribution,
    /// Chrome/Perfetto trace events (`jitter-trace perfetto`).
    TraceEvents,
    /// The preload library's `summary.json` or `rank-<r>.json`.
    PreloadStatistics,
    /// JSON of no kind jitterbench writes (or a damaged one).
    Other,
}

/// The top-level fields a sniff reads; everything else is skipped.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Fields {
    schema: Option<String>,
    kind: Option<String>,
    format: Option<String>,
    command: Option<IgnoredAny>,
    metric: Option<IgnoredAny>,
    counter_khz: Option<IgnoredAny>,
    itimer: Option<IgnoredAny>,
    collection_start_unix_ns: Option<IgnoredAny>,
    trace_clock: Option<IgnoredAny>,
    #[serde(rename = "traceEvents")]
    trace_events: Option<IgnoredAny>,
    noise_share: Option<IgnoredAny>,
    injector: Option<IgnoredAny>,
    offset_ns: Option<IgnoredAny>,
}

impl Fields {
    fn kind(&self) -> JsonKind {
        let report = self
            .schema
            .as_deref()
            .is_some_and(|s| s.starts_with("jitterbench.report/"));
        match self.kind.as_deref() {
            Some("run") if report => return JsonKind::RunReport,
            Some("predict-des" | "predict-order-stats") if report => {
                return JsonKind::PredictionReport
            }
            Some("virtual-ranks") if report => return JsonKind::VirtualRanksReport,
            _ => {}
        }
        if self.format.as_deref() == Some("jitterbench-profile") {
            JsonKind::Profile
        } else if self.command.is_some() && self.metric.is_some() {
            JsonKind::AppReport
        } else if self.counter_khz.is_some() && self.itimer.is_some() {
            JsonKind::Calibration
        } else if self.collection_start_unix_ns.is_some() && self.trace_clock.is_some() {
            JsonKind::Attribution
        } else if self.trace_events.is_some() {
            JsonKind::TraceEvents
        } else if self.noise_share.is_some()
            || (self.offset_ns.is_some() && self.injector.is_some())
        {
            JsonKind::PreloadStatistics
        } else {
            JsonKind::Other
        }
    }
}

impl JsonKind {
    /// The kind in words, with what writes it.
    pub fn described(self) -> &'static str {
        match self {
            JsonKind::RunReport => "a run's report (replay-bench run)",
            JsonKind::PredictionReport => "a prediction report (replay-bench predict)",
            JsonKind::VirtualRanksReport => {
                "a virtual-ranks report (replay-bench run --virtual-ranks)"
            }
            JsonKind::AppReport => "an application study (replay-bench app)",
            JsonKind::Profile => "an application profile (JITTER_PROFILE)",
            JsonKind::Calibration => "an emulator calibration (jitter-emulate calibrate)",
            JsonKind::Attribution => "an attribution sidecar (jitter-collect --attribute)",
            JsonKind::TraceEvents => "Chrome/Perfetto trace events (jitter-trace perfetto)",
            JsonKind::PreloadStatistics => "statistics of libjitter_preload.so (JITTER_STATS_DIR)",
            JsonKind::Other => "JSON",
        }
    }
}

impl Kind {
    /// The kind in words (`a .jtr trace`, `text (CSV, …)`, `a prediction report (…)`).
    pub fn described(self) -> &'static str {
        match self {
            Kind::Empty => "empty",
            Kind::Jtr => "a .jtr trace",
            Kind::RankRecord => {
                "a rank record of a profile (JITTER_PROFILE's <profile>.ranks folder)"
            }
            Kind::Json(j) => j.described(),
            Kind::Text => "text (CSV, JSON lines, sysjitter or LogGOPSim)",
            Kind::Elf => "an ELF executable or library",
            Kind::Compressed => "compressed data",
            Kind::Binary => "binary data",
        }
    }
}

/// The kind of a file whose first bytes are `head` (as many as the file has, up to a few
/// kB); a JSON file is read whole from `path` to learn its kind.
pub(crate) fn kind_of(path: &Path, head: &[u8]) -> Kind {
    let first = head.iter().copied().find(|b| !b.is_ascii_whitespace());
    if head.is_empty() {
        Kind::Empty
    } else if head.starts_with(&JTR_MAGIC) {
        Kind::Jtr
    } else if head.starts_with(b"JBPROF01") {
        Kind::RankRecord
    } else if head.starts_with(b"\x7fELF") {
        Kind::Elf
    } else if [&b"\x1f\x8b"[..], b"\x28\xb5\x2f\xfd", b"\xfd7zXZ\0", b"BZh"]
        .iter()
        .any(|m| head.starts_with(m))
    {
        Kind::Compressed
    } else if !is_text(head) {
        Kind::Binary
    } else if first == Some(b'{') {
        Kind::Json(json_kind(path))
    } else {
        Kind::Text
    }
}

/// The kind of the file at `path` (an unreadable file is an I/O error).
pub fn sniff(path: &Path) -> Result<Kind, TraceError> {
    let shown = path.display();
    let f = File::open(path).map_err(|e| TraceError::io(format!("cannot open {shown}"), e))?;
    let mut head = Vec::with_capacity(HEAD);
    f.take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(format!("cannot read {shown}"), e))?;
    Ok(kind_of(path, &head))
}

/// Printable UTF-8 (a character cut by the end of `head` allowed), no NUL.
fn is_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && head.len() - e.valid_up_to() < 4,
    }
}

/// The kind of a JSON file, read whole with its unknown fields skipped.
fn json_kind(path: &Path) -> JsonKind {
    let Ok(f) = File::open(path) else {
        return JsonKind::Other;
    };
    serde_json::from_reader::<_, Fields>(BufReader::with_capacity(1 << 16, f))
        .map_or(JsonKind::Other, |f| f.kind())
}

/// The error for `path`, given as `wanted` (with `flag`, or `""`), that is of kind `found`;
/// `fix` says what to give instead.
fn mismatch(flag: &str, path: &Path, found: Kind, wanted: &str, fix: &str) -> TraceError {
    let flag = if flag.is_empty() {
        String::new()
    } else {
        format!("{flag} ")
    };
    let fix = if fix.is_empty() {
        String::new()
    } else {
        format!(": {fix}")
    };
    TraceError::Argument(format!(
        "{flag}{}: this is {}, not {wanted}{fix}",
        path.display(),
        found.described()
    ))
}

/// Refuses a JSON input `path` (given with `flag`) that is a file jitterbench knows as
/// another kind than `wanted` (a `.jtr`, a rank record, another writer's JSON) or not text.
/// JSON of no known kind, and a file that cannot be read, pass: their reader says what is
/// wrong. `wanted_words` names the kind wanted (`a run's report`).
pub fn expect_json(
    flag: &str,
    path: &Path,
    wanted: &[JsonKind],
    wanted_words: &str,
) -> Result<(), TraceError> {
    let Ok(found) = sniff(path) else {
        return Ok(());
    };
    match found {
        Kind::Json(k) if wanted.contains(&k) || k == JsonKind::Other => Ok(()),
        Kind::Empty | Kind::Text => Ok(()),
        other => Err(mismatch(flag, path, other, wanted_words, "")),
    }
}

/// The error of a `.jtr` reader for `path`, whose first bytes `head` are not the magic: what
/// the file is instead, and how to make a `.jtr` of a text trace.
pub(crate) fn not_a_trace(path: &Path, head: &[u8]) -> TraceError {
    let found = kind_of(path, head);
    let fix = match found {
        Kind::Text => "jitter-trace convert reads it (--from names its format) and writes a .jtr",
        Kind::RankRecord => "replay-bench profile show reads the folder of rank records",
        _ => "",
    };
    mismatch("", path, found, "a .jtr trace", fix)
}

/// Refuses a trace input read as text format `format` (named by `path` or `--from`) whose
/// content is a `.jtr` trace or no text at all.
pub(crate) fn check_text_input(path: &Path, format: &str) -> Result<(), TraceError> {
    let Ok(found) = sniff(path) else {
        return Ok(());
    };
    match found {
        Kind::Text | Kind::Empty => Ok(()),
        Kind::Jtr => Err(mismatch(
            "",
            path,
            found,
            format,
            "name it .jtr, or give --from jtr",
        )),
        other => Err(mismatch("", path, other, format, "")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn kinds_are_told_by_their_first_bytes_and_json_by_its_fields() {
        let d = tempfile::tempdir().unwrap();
        let mut jtr = JTR_MAGIC.to_vec();
        jtr.extend_from_slice(&[1, 0, 0, 0]);
        let cases: [(&str, &[u8], Kind); 12] = [
            ("e", b"", Kind::Empty),
            ("t.jtr", &jtr, Kind::Jtr),
            ("r.prof", b"JBPROF01\0\0", Kind::RankRecord),
            ("x", b"\x7fELF\x02\x01", Kind::Elf),
            ("g", b"\x1f\x8b\x08\0", Kind::Compressed),
            ("c.csv", b"cpu,start_ns,run_ns\n0,1,2\n", Kind::Text),
            ("b", b"\x01\x02\0\xff", Kind::Binary),
            (
                "p.json",
                br#"{"schema": "jitterbench.report/2", "kind": "predict-des", "x": [1, {"kind": "run"}]}"#,
                Kind::Json(JsonKind::PredictionReport),
            ),
            (
                "r.json",
                br#"{"schema": "jitterbench.report/2", "kind": "run"}"#,
                Kind::Json(JsonKind::RunReport),
            ),
            (
                "a.json",
                br#"{"format": "jitterbench-profile", "version": 1}"#,
                Kind::Json(JsonKind::Profile),
            ),
            ("o.json", br#"{"not": "a report"}"#, Kind::Json(JsonKind::Other)),
            ("cut.json", br#"{"schema": "jitterbench.rep"#, Kind::Json(JsonKind::Other)),
        ];
        for (name, bytes, want) in cases {
            let p = file(d.path(), name, bytes);
            assert_eq!(sniff(&p).unwrap(), want, "{name}");
        }
    }

    #[test]
    fn a_reader_names_the_real_kind_and_what_to_give_instead() {
        let d = tempfile::tempdir().unwrap();
        let p = file(
            d.path(),
            "p.json",
            br#"{"schema": "jitterbench.report/2", "kind": "predict-des"}"#,
        );
        let e =
            expect_json("--baseline", &p, &[JsonKind::RunReport], "a run's report").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "--baseline {}: this is a prediction report (replay-bench predict), not a run's \
                 report",
                p.display()
            )
        );
        expect_json("--baseline", &p, &[JsonKind::PredictionReport], "x").unwrap();
        let other = file(d.path(), "o.json", b"{}");
        expect_json("--baseline", &other, &[JsonKind::RunReport], "x").unwrap();
        let mut jtr = JTR_MAGIC.to_vec();
        jtr.push(1);
        let t = file(d.path(), "t.csv", &jtr);
        let e = check_text_input(&t, "CSV").unwrap_err().to_string();
        assert!(
            e.ends_with("this is a .jtr trace, not CSV: name it .jtr, or give --from jtr"),
            "{e}"
        );
        let c = file(d.path(), "c.jtr", b"cpu,start_ns,run_ns\n");
        let e = not_a_trace(&c, b"cpu,start_ns,run_ns\n").to_string();
        assert!(e.contains("this is text (CSV"), "{e}");
        assert!(e.contains("jitter-trace convert"), "{e}");
    }
}
