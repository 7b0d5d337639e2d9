//! The sidecar written detour by detour: the bytes `serde_json::to_vec` makes of a whole
//! [`Attribution`] (what [`Attribution::write`] writes), emitted CPU by CPU as the detours come,
//! in the memory of one detour. The frame's fields are serde's own output for the attribution
//! and each CPU without detours, cut where the detours go, so that a field added to either
//! struct is written in the same place by both writers.

use std::io::Write;

use crate::error::TraceError;
use crate::sidecar::{AttributedDetour, Attribution, CpuAttribution};

/// Where the detours go in a CPU without them: its encoding ends with this.
const NO_DETOURS: &str = "[]}";
/// Where the CPUs go in an attribution without them.
const NO_CPUS: &str = ",\"cpus\":[]";

/// A sidecar being written: [`SidecarWriter::cpu`] opens each CPU, [`SidecarWriter::detour`]
/// appends to it, [`SidecarWriter::finish`] closes the file's JSON.
pub(crate) struct SidecarWriter<'w> {
    out: &'w mut dyn Write,
    /// What follows the CPUs (`],"notes":{…}}`).
    tail: String,
    cpus: u64,
    /// Detours of the open CPU, `None` when none is open.
    detours: Option<u64>,
}

impl std::fmt::Debug for SidecarWriter<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SidecarWriter")
            .field("cpus", &self.cpus)
            .field("detours", &self.detours)
            .finish_non_exhaustive()
    }
}

fn encoded<T: serde::Serialize>(v: &T) -> Result<String, TraceError> {
    serde_json::to_string(v)
        .map_err(|e| TraceError::Argument(format!("cannot encode the attribution: {e}")))
}

fn written(e: std::io::Error) -> TraceError {
    TraceError::io("cannot write the attribution", e)
}

impl<'w> SidecarWriter<'w> {
    /// Starts the sidecar of `head` (its `cpus` are ignored) on `out`.
    pub fn begin(out: &'w mut dyn Write, head: &Attribution) -> Result<Self, TraceError> {
        let frame = Attribution {
            cpus: Vec::new(),
            ..head.clone()
        };
        let text = encoded(&frame)?;
        // The fields before `cpus` are numbers, one string and strings, whose quotes are
        // escaped: the first match is the field itself.
        let at = (text.find(NO_CPUS)).ok_or_else(|| {
            TraceError::Argument("the attribution's encoding has no `cpus` field".into())
        })?;
        let cut = at + NO_CPUS.len() - 1;
        out.write_all(&text.as_bytes()[..cut]).map_err(written)?;
        Ok(SidecarWriter {
            out,
            tail: text[cut..].to_string(),
            cpus: 0,
            detours: None,
        })
    }

    /// Closes the open CPU, if any, and opens `head` (its `detours` are ignored).
    pub fn cpu(&mut self, head: &CpuAttribution) -> Result<(), TraceError> {
        self.close_cpu()?;
        let text = encoded(&head.clone_head())?;
        let open = (text.strip_suffix(NO_DETOURS)).ok_or_else(|| {
            TraceError::Argument("a CPU's encoding does not end with its detours".into())
        })?;
        if self.cpus > 0 {
            self.out.write_all(b",").map_err(written)?;
        }
        self.out.write_all(open.as_bytes()).map_err(written)?;
        self.out.write_all(b"[").map_err(written)?;
        self.cpus += 1;
        self.detours = Some(0);
        Ok(())
    }

    /// Appends a detour to the open CPU.
    pub fn detour(&mut self, d: &AttributedDetour) -> Result<(), TraceError> {
        let n = (self.detours.as_mut())
            .ok_or_else(|| TraceError::Argument("a detour written before its CPU".into()))?;
        if *n > 0 {
            self.out.write_all(b",").map_err(written)?;
        }
        *n += 1;
        serde_json::to_writer(&mut *self.out, d)
            .map_err(|e| TraceError::Argument(format!("cannot write the attribution: {e}")))
    }

    fn close_cpu(&mut self) -> Result<(), TraceError> {
        if self.detours.take().is_some() {
            self.out.write_all(b"]}").map_err(written)?;
        }
        Ok(())
    }

    /// Closes the open CPU and the sidecar.
    pub fn finish(mut self) -> Result<(), TraceError> {
        self.close_cpu()?;
        self.out.write_all(self.tail.as_bytes()).map_err(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sidecar::{Part, Steal};

    fn detour(start_ns: u64, source: &str) -> AttributedDetour {
        AttributedDetour {
            start_ns,
            run_ns: 700,
            source: source.into(),
            combination: format!("{source}+x\"y"),
            explained_ns: 600,
            parts: vec![Part {
                source: source.into(),
                start_ns,
                ns: 600,
            }],
        }
    }

    /// Attributions with no CPU, CPUs without detours, strings that need escaping (a quote
    /// spelling `"cpus":[]` inside the clock's name) and a steal or none: the written bytes are
    /// `serde_json::to_vec`'s.
    #[test]
    fn detour_by_detour_is_the_bytes_of_the_whole() {
        let mut a = Attribution {
            version: 1,
            collection_start_unix_ns: 7,
            trace_clock: "x86-tsc,\"cpus\":[]".into(),
            events: vec!["irq:\"a\"".into(), "b\\".into()],
            cpus: Vec::new(),
            notes: [("hypervisor".to_string(), "kvm\n".to_string())].into(),
        };
        let mut cases = vec![a.clone()];
        let cpu = |n: u32, detours: Vec<AttributedDetour>, steal| CpuAttribution {
            cpu: n,
            begin_ns: 1,
            end_ns: 2_000,
            events: 9,
            events_lost: 1,
            entries_checked: 3,
            entries_outside: 0,
            steal,
            detours,
        };
        let steal = Some(Steal {
            ticks: 3,
            tick_ns: 10_000_000,
            window_ns: 5,
        });
        a.cpus = vec![cpu(2, vec![], None)];
        cases.push(a.clone());
        a.cpus = vec![
            cpu(
                0,
                vec![detour(10, "timer"), detour(900, "task:k/0:1")],
                steal,
            ),
            cpu(5, vec![], None),
            cpu(1, vec![detour(5, "irq:virtio0")], steal),
        ];
        a.notes.clear();
        cases.push(a);
        for a in cases {
            let mut out = Vec::new();
            let mut w = SidecarWriter::begin(&mut out, &a).unwrap();
            for c in &a.cpus {
                w.cpu(c).unwrap();
                for d in &c.detours {
                    w.detour(d).unwrap();
                }
            }
            w.finish().unwrap();
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&a).unwrap()
            );
        }
    }

    #[test]
    fn a_detour_before_its_cpu_is_refused() {
        let mut out = Vec::new();
        let mut w = SidecarWriter::begin(&mut out, &Attribution::default()).unwrap();
        assert!(w.detour(&detour(1, "timer")).is_err());
    }
}
