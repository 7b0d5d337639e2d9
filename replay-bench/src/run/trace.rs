//! This rank's trace: `--trace`, or its node group's of a `--node-traces` set, read under the
//! one policy on what a trace lacks (`jitter_trace::integrity`), with what the report says
//! about it. A rank keeps the records of the one stream it replays
//! (`jitter_trace::read_replayed`); what the report says of the whole trace (digest, integrity,
//! warnings, the pooled ratios of a node's streams) comes from the same pass.

use std::path::PathBuf;

use anyhow::{bail, Context};
use jitter_trace::{Salvage, Trace};

use jitter_predict::rank_layout::{self, Placement};
use jitter_report::report::TraceInfo;

/// The trace, checked, with what the report says about it.
pub(crate) struct LoadedTrace {
    /// Every stream's window; the records of the replayed stream only.
    pub(crate) trace: Trace,
    /// The stream of it this rank replays.
    pub(crate) stream: usize,
    /// Its timeline in the sync schedule (`jitter_emulator::placement::slot`).
    pub(crate) timeline: u64,
    /// Its file, for errors.
    pub(crate) file: String,
    pub(crate) info: TraceInfo,
    pub(crate) warnings: Vec<String>,
}

/// This rank's trace: `--trace` (`is_set` false, one path) or its node group's of the
/// `--node-traces` set, by [`Placement`]. With a set, rank 0 also checks every other trace (so
/// that a bad one anywhere stops every rank before the run, by [`agree`]) and holds the set's
/// description (`nodes(n)` unless labelled) and the warnings of all, each named by its file.
pub(crate) fn load_rank_trace(
    set: &[PathBuf],
    is_set: bool,
    label: Option<&str>,
    rank: usize,
    (k, salvage): (u64, Salvage),
) -> anyhow::Result<LoadedTrace> {
    let place = Placement::new(k, set.len() * k as usize)?;
    let rank = rank as u64;
    let mine = place.trace(rank);
    if let ([path], false) = (set, is_set) {
        let slot = |s: usize| jitter_emulator::placement::slot(rank / k, rank % k, s as u64);
        let t = load_trace(path, label, (k, salvage), |i, s| slot(s).stream == i)?;
        let slot = slot(t.info.streams);
        return Ok(LoadedTrace {
            stream: slot.stream,
            timeline: slot.timeline,
            ..t
        });
    }
    let mut own: Option<LoadedTrace> = None;
    let (mut infos, mut warnings) = (Vec::new(), Vec::new());
    for (i, path) in set.iter().enumerate() {
        if rank != 0 && i != mine {
            continue;
        }
        let replayed = place.stream(rank);
        let t = load_trace(path, None, (k, salvage), |j, _| i == mine && j == replayed)?;
        if (t.info.streams as u64) < k {
            bail!(
                "node trace {} has {} streams, fewer than --ranks-per-node {k}: every trace of \
                 a set needs k",
                path.display(),
                t.info.streams
            );
        }
        infos.push(t.info.clone());
        warnings.extend(
            t.warnings
                .iter()
                .map(|w| format!("{}: {w}", path.display())),
        );
        if i == mine {
            own = Some(t);
        }
    }
    let own = own.ok_or_else(|| anyhow::anyhow!("no node trace for rank {rank}"))?;
    let label = label.map_or_else(|| rank_layout::set_label(set.len()), str::to_string);
    Ok(LoadedTrace {
        trace: own.trace,
        file: own.file,
        stream: place.stream(rank),
        timeline: place.timeline(rank),
        info: TraceInfo::node_set(&label, infos),
        warnings,
    })
}

/// Reads one trace under the one policy on what it lacks ([`jitter_trace::integrity`]): refused
/// unless `salvage`; what was kept goes into the warnings and the report's trace description.
/// Only the records of the streams `keep(index, streams)` selects are kept.
pub(crate) fn load_trace(
    path: &std::path::Path,
    label: Option<&str>,
    (k, salvage): (u64, Salvage),
    keep: impl Fn(usize, usize) -> bool,
) -> anyhow::Result<LoadedTrace> {
    let read = jitter_trace::read_replayed(path, keep)
        .with_context(|| format!("cannot use trace {}", path.display()))?;
    let facts = read.facts;
    let integrity = facts.accept(&path.display().to_string(), salvage)?;
    let warnings = facts.warnings().to_vec();
    let trace = read.trace;
    trace
        .validate()
        .with_context(|| format!("trace {} is invalid", path.display()))?;
    if trace.streams.is_empty() {
        bail!("trace {} has no streams", path.display());
    }
    // The streams the ranks of a node replay (all of them when k exceeds them: copies).
    let (noise_ratio, detours_per_s) = facts.pooled(0..k as usize);
    let info = TraceInfo {
        path: path.display().to_string(),
        label: label.map(str::to_string).unwrap_or_else(|| {
            path.file_stem()
                .map_or_else(|| "trace".into(), |s| s.to_string_lossy().into_owned())
        }),
        host: trace.header.host.clone(),
        kernel: trace.header.kernel_release.clone(),
        streams: trace.streams.len(),
        noise_ratio,
        detours_per_s,
        nodes: Vec::new(),
        integrity: (!integrity.is_whole()).then_some(integrity),
        digest: Some(facts.digest),
    };
    Ok(LoadedTrace {
        warnings,
        trace,
        stream: 0,
        timeline: 0,
        file: path.display().to_string(),
        info,
    })
}
