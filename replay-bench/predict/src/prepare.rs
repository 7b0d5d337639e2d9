//! A request resolved into traces and a spec (`prepare`): the platform and its
//! overrides, the barrier and collective costs, every trace read, checked and planned (a
//! node-trace set as one more input, the platform's noise beside), the phase count; nothing
//! simulated. Also why the simulation walks where the index was asked for (`walk_note`).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use jitter_emulator::TimerKind;
use jitter_trace::facts::Facts;

use super::background;
use super::collective::CommModel;
use super::des::{BarrierModel, DesConfig};
use super::input::TraceInput;
use super::platform::PlatformChoice;
use super::platform::{self, barrier_stage_from_report, Platform};
use super::request::{check_sync_modes, PredictRequest};
use super::simulation::{index_allowed, Engine};
use super::spec::Model;
use super::spec::PredictSpec;

/// Why the simulation walks every detour although the index was asked for, and how to get
/// the index: timer errors (itimer drift) are drawn per injection, which no index holds.
pub fn walk_note(spec: &PredictSpec) -> Option<String> {
    let simulates = matches!(spec.model, Model::Des | Model::Both);
    // The index asked for, and refused for the timer errors alone.
    let refused = spec.engine == Engine::Indexed && !index_allowed(spec.engine, &spec.des);
    (simulates && refused).then(|| {
        format!(
            "timer itimer (errors of sd {} drawn per injection): the simulation walks every \
             detour, at a cost that grows with the trace's density; --timer abstime replays \
             without timer errors on the index (cost independent of density)",
            jitter_trace::units::format_ns(spec.des.drift_sd_ns)
        )
    })
}

/// Refuses a trace whose CPUs spent more than half their time in detours
/// ([`jitter_trace::sanity::BUSY_NOISE_RATIO`]): it recorded other work, not the operating
/// system's jitter, and its prediction would be that work's slowdown; `force` predicts anyway.
fn refuse_busy(facts: &Facts, what: &str, force: bool) -> anyhow::Result<()> {
    if force {
        return Ok(());
    }
    match facts.busy() {
        Some(why) => anyhow::bail!(
            "{what}: {why}; a prediction from it would be that work's slowdown (--force \
             predicts anyway)"
        ),
        None => Ok(()),
    }
}

/// Resolves a request into traces and a complete spec (reads every file; simulates nothing):
/// nothing edits the spec after this.
pub fn prepare(args: &PredictRequest) -> anyhow::Result<(Vec<TraceInput>, PredictSpec)> {
    super::decode::register();
    let ranks = args.ranks.clone();
    let modes = args.modes.clone();
    check_sync_modes(&modes)?;
    anyhow::ensure!(args.phases >= 1, "--phases must be at least 1");
    let quanta = args.quanta_ns;
    let platform = platform_of(args)?;
    let (stage, comm) = costs_of(args)?;
    let mut traces = load_traces(args, &platform)?;
    if let Some(path) = &args.platform_noise {
        traces = with_platform_noise(args, path, &platform, traces)?;
    }
    let phases = if args.whole_trace {
        let longest = (traces.iter().flat_map(|t| &t.plans))
            .map(|p| p.period_ns())
            .max()
            .unwrap_or(0);
        longest.div_ceil(quanta.max(1)).max(1)
    } else {
        args.phases
    };
    let spec = PredictSpec {
        ranks,
        modes,
        model: args.model,
        des: DesConfig {
            quanta_ns: quanta,
            phases,
            ranks_per_node: args.ranks_per_node,
            barrier: BarrierModel { stage_ns: stage },
            comm,
            drift_sd_ns: platform.lateness_sd_ns,
            seed: args.seed,
            window: None,
        },
        platform,
        engine: args.engine,
        draws: args.draws,
        precision: args.precision,
    };
    Ok((traces, spec))
}

/// The platform `--platform` names, with `--timer`, the replay flags and `--lateness-sd` laid
/// over it, checked.
fn platform_of(args: &PredictRequest) -> anyhow::Result<Platform> {
    let requested_timer = args.replay.timer;
    let mut platform = match &args.platform {
        PlatformChoice::Ideal => Platform::ideal(),
        PlatformChoice::This => Platform::this(requested_timer.unwrap_or_default())?,
        PlatformChoice::File(file) => Platform::load(file, requested_timer)?,
    };
    let is_ideal = args.platform == PlatformChoice::Ideal;
    // The ideal platform replays every detour as recorded (abstime, no timer errors) unless
    // an emulation's timer is asked for (`--timer itimer`: errors of --lateness-sd).
    platform.setup = args.replay.setup_over(&platform.setup);
    let timer = platform.setup.cost.timer;
    platform.options().validate()?;
    let sd = match (args.lateness_sd_ns, is_ideal) {
        (Some(s), _) => s as f64,
        (None, true) => platform::DEFAULT_LATENESS_SD_NS,
        (None, false) => platform.lateness_sd_ns,
    };
    platform.lateness_sd_ns = if timer == TimerKind::Abstime { 0.0 } else { sd };
    Ok(platform)
}

/// The barrier stage (given, calibrated from a run's report, or the default) and the
/// collective's costs (LogP o and l: a third of the stage unless given).
fn costs_of(args: &PredictRequest) -> anyhow::Result<(f64, CommModel)> {
    let stage = match (args.barrier_stage_ns, &args.calibrate_from) {
        (Some(x), _) => {
            anyhow::ensure!(
                x.is_finite() && (0.0..=1e9).contains(&x),
                "--barrier-stage-ns must be in 0..=1e9 (1 s), got {x}"
            );
            x
        }
        (None, Some(p)) => barrier_stage_from_report(p)?,
        (None, None) => platform::DEFAULT_BARRIER_STAGE_NS,
    };
    let logp = |flag: &str, v: Option<f64>| -> anyhow::Result<f64> {
        let x = v.unwrap_or(stage / 3.0);
        anyhow::ensure!(
            x.is_finite() && (0.0..=1e9).contains(&x),
            "--{flag} must be in 0..=1e9 (1 s), got {x}"
        );
        Ok(x)
    };
    let comm = CommModel {
        algorithm: args.collective,
        shape: args.loop_shape,
        o_ns: logp("logp-o-ns", args.logp_o_ns)?,
        l_ns: logp("logp-l-ns", args.logp_l_ns)?,
    }
    .resolved();
    Ok((stage, comm))
}

/// The file stem of a trace: its default label.
fn stem(path: &Path) -> String {
    path.file_stem()
        .map_or_else(|| "trace".to_string(), |s| s.to_string_lossy().into_owned())
}

/// Every `--trace` (labelled by its stem, numbered where two share one) and the node-trace
/// set as one more input, each read, accepted, checked and planned.
fn load_traces(args: &PredictRequest, platform: &Platform) -> anyhow::Result<Vec<TraceInput>> {
    // Only the streams the ranks replay are kept; the digest, the pooled ratios, the
    // integrity and the sanity checks are the whole trace's, from the same pass.
    let k = args.ranks_per_node;
    let load = |path: &PathBuf, label: &str| -> anyhow::Result<TraceInput> {
        let read = jitter_trace::read_replayed(path, |i, _| (i as u64) < k)
            .with_context(|| format!("cannot read trace {}", path.display()))?;
        let integrity = (read.facts).accept(&path.display().to_string(), args.salvage)?;
        let name = path.display().to_string();
        let input = TraceInput::replayed(&read, &name, label, platform.options(), k);
        for w in read.facts.warnings() {
            eprintln!("warning: {}: {w}", path.display());
        }
        refuse_busy(
            &read.facts,
            &format!("trace {}", path.display()),
            args.force,
        )?;
        let mut input = input?;
        input.info.integrity = (!integrity.is_whole()).then_some(integrity);
        Ok(input)
    };
    let mut traces: Vec<TraceInput> = Vec::new();
    for path in &args.traces {
        let stem = stem(path);
        let label = if traces.iter().any(|t| t.label == stem) {
            format!("{stem}#{}", traces.len() + 1)
        } else {
            stem
        };
        traces.push(load(path, &label)?);
    }
    if !args.node_traces.is_empty() {
        let nodes = (args.node_traces.iter())
            .map(|p| load(p, &stem(p)))
            .collect::<anyhow::Result<Vec<_>>>()?;
        // A set's node traces each hold k streams (copies are for a single trace).
        for (t, path) in nodes.iter().zip(&args.node_traces) {
            anyhow::ensure!(
                t.plans.len() as u64 == args.ranks_per_node,
                "node trace {} has {} streams, fewer than --ranks-per-node {}: every trace of \
                 a set needs k",
                path.display(),
                t.plans.len(),
                args.ranks_per_node
            );
        }
        traces.push(TraceInput::node_set(nodes)?);
    }
    Ok(traces)
}

/// The inputs united with the platform's own noise (`--platform-noise`), read from `path`.
fn with_platform_noise(
    args: &PredictRequest,
    path: &Path,
    platform: &Platform,
    mut traces: Vec<TraceInput>,
) -> anyhow::Result<Vec<TraceInput>> {
    anyhow::ensure!(
        args.model == Model::Des,
        "--platform-noise is modelled by the simulation only (--model des)"
    );
    background::check_setup(&platform.options(), platform.lateness_sd_ns > 0.0)?;
    let read = background::read_platform(path)
        .with_context(|| format!("cannot read platform-noise trace {}", path.display()))?;
    (read.facts).accept(&path.display().to_string(), args.salvage)?;
    // The platform's own noise is held to the rule of the traces it joins.
    let what = format!("--platform-noise {}", path.display());
    refuse_busy(&read.facts, &what, args.force)?;
    for w in read.facts.warnings() {
        eprintln!("warning: {}: {w}", path.display());
    }
    let bg = background::Background::of_read(read, &stem(path))?;
    // The platform's streams are laid out as further node traces of k streams each: a
    // trace of fewer streams than k (replayed in copies) has no such layout yet.
    for t in &traces {
        anyhow::ensure!(
            t.plans.len() as u64 >= args.ranks_per_node,
            "--platform-noise needs a trace of at least --ranks-per-node {} streams; {} has {}",
            args.ranks_per_node,
            t.label,
            t.plans.len()
        );
    }
    traces = traces
        .into_iter()
        .map(|t| t.with_background(&bg))
        .collect::<anyhow::Result<_>>()?;
    Ok(traces)
}
