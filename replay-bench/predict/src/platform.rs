//! The platform a prediction assumes: `ideal` (every detour exactly as recorded) or the
//! calibrated overhead, lateness and minimum sleep of a machine, from a calibration file or from
//! the report of a real `replay-bench run`; and the barrier stage latency calibrated from such a
//! report.

use std::path::Path;

use jitter_emulator::{
    Fraction, InjectionCost, Overrides, PlanOptions, ReplaySetup, Scale, TimerKind,
};
use serde::{Deserialize, Serialize};

use jitter_trace::units::format_ns;

use super::collective::CommModel;
use jitter_report::report::{Report, ReportKind};

/// Barrier stage latency used when nothing is calibrated, ns: about one network round trip of a
/// low-latency interconnect (a dissemination barrier of N ranks takes ceil(log2 N) of them).
pub(crate) const DEFAULT_BARRIER_STAGE_NS: f64 = 1_000.0;

/// Timer error (sd per re-arm) assumed for `--timer itimer` on the ideal platform, ns: the
/// Blue Gene/L figure of paper 001 §V-C (timer resolution 130 µs, standard deviation 20 µs).
pub(crate) const DEFAULT_LATENESS_SD_NS: f64 = 20_000.0;

/// A calibration file: what the emulator costs on some machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlatformFile {
    /// Overhead O per injection, ns.
    pub overhead_ns: u64,
    /// Timer lateness L (median), ns.
    #[serde(default)]
    pub lateness_ns: u64,
    /// Spread of L (sd), ns.
    #[serde(default)]
    pub lateness_sd_ns: f64,
    /// Minimum sleep M, ns.
    #[serde(default)]
    pub min_sleep_ns: u64,
    /// Scale factor S (1 when absent).
    #[serde(default)]
    pub scale: Scale,
    /// Timer of the injector (`itimer` or `abstime`; `abstime` when absent).
    #[serde(default)]
    pub timer: TimerKind,
    /// Fraction f of the stream after which replay stops (1 when absent).
    #[serde(default)]
    pub fraction: Fraction,
}

/// The platform resolved: the replay setup and the timer error of one re-arm.
#[derive(Debug, Clone, PartialEq)]
pub struct Platform {
    /// `ideal` or the file it came from.
    pub name: String,
    /// S, f and the injection cost every plan is built with.
    pub setup: ReplaySetup,
    /// Standard deviation of one timer error, ns (0 for `abstime`).
    pub lateness_sd_ns: f64,
}

impl Platform {
    /// The ideal platform: every detour as recorded, no timer error.
    pub fn ideal() -> Self {
        Platform {
            name: "ideal".into(),
            setup: ReplaySetup::ideal(TimerKind::Abstime),
            lateness_sd_ns: 0.0,
        }
    }

    /// The options every plan is built with.
    pub fn options(&self) -> PlanOptions {
        self.setup.plan_options()
    }

    /// Reads a calibration file ([`PlatformFile`]), a saved emulator calibration
    /// (`jitter_emulator::Calibration`, for `timer`: `abstime` when `None`) or a run report (its
    /// median calibration over ranks, its scale, fraction and timer).
    pub fn load(path: &Path, timer: Option<TimerKind>) -> anyhow::Result<Self> {
        use jitter_trace::sniff::{expect_json, JsonKind};
        expect_json(
            "--platform",
            path,
            &[
                JsonKind::RunReport,
                JsonKind::PredictionReport,
                JsonKind::VirtualRanksReport,
                JsonKind::Calibration,
            ],
            "a platform file, an emulator calibration or a run's report",
        )?;
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read platform file {}: {e}", path.display()))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| anyhow::anyhow!("platform file {} is not JSON: {e}", path.display()))?;
        let name = path.display().to_string();
        if value.get("schema").is_some() {
            let r = Report::load(path)?;
            return Platform::from_report(&r, name);
        }
        if value.get("itimer").is_some() && value.get("abstime").is_some() {
            let c: jitter_emulator::Calibration = serde_json::from_value(value).map_err(|e| {
                anyhow::anyhow!("{} is not an emulator calibration: {e}", path.display())
            })?;
            return Ok(Platform::from_calibration(
                &c,
                timer.unwrap_or_default(),
                name,
            ));
        }
        let f: PlatformFile = serde_json::from_value(value).map_err(|e| {
            anyhow::anyhow!(
                "platform file {} is not a calibration (overhead_ns, lateness_ns, \
                 lateness_sd_ns, min_sleep_ns, scale, timer, fraction): {e}",
                path.display()
            )
        })?;
        let setup = ReplaySetup {
            scale: f.scale,
            fraction: f.fraction,
            cost: InjectionCost {
                overhead_ns: f.overhead_ns,
                min_sleep_ns: f.min_sleep_ns,
                lateness_ns: f.lateness_ns,
                ..InjectionCost::ideal(f.timer)
            },
        };
        setup
            .plan_options()
            .validate()
            .map_err(|e| anyhow::anyhow!("platform file {}: {e}", path.display()))?;
        anyhow::ensure!(
            f.lateness_sd_ns.is_finite() && f.lateness_sd_ns >= 0.0,
            "platform file {}: lateness_sd_ns must be finite and >= 0",
            path.display()
        );
        Ok(Platform {
            name,
            setup,
            lateness_sd_ns: f.lateness_sd_ns,
        })
    }

    /// This machine: the emulator's cached calibration for this host and kernel, measured now
    /// (several seconds) when there is none.
    pub fn this(timer: TimerKind) -> anyhow::Result<Self> {
        let clock = jitter_collect::clock::Clock::for_tools()
            .map_err(|e| anyhow::anyhow!("cannot calibrate the cycle counter: {e}"))?;
        let c = jitter_emulator::Calibration::load_or_measure(
            &clock,
            false,
            &jitter_emulator::calibration::StartLine,
        )?;
        Ok(Platform::from_calibration(&c, timer, "this".into()))
    }

    /// The platform of an emulator calibration for `timer` (S = 1, f = 1).
    pub fn from_calibration(
        c: &jitter_emulator::Calibration,
        timer: TimerKind,
        name: String,
    ) -> Self {
        Platform {
            name,
            setup: ReplaySetup {
                cost: c.cost(timer, &Overrides::default()),
                ..ReplaySetup::default()
            },
            lateness_sd_ns: c.timer(timer).lateness.sd_ns,
        }
    }

    fn from_report(r: &Report, name: String) -> anyhow::Result<Self> {
        anyhow::ensure!(
            r.kind == ReportKind::Run,
            "{name} is a {} report; a platform comes from a real run",
            r.kind
        );
        anyhow::ensure!(!r.calibration.is_empty(), "{name} holds no calibration");
        let med = |f: &dyn Fn(&jitter_report::report::RankCost) -> f64| -> f64 {
            let mut v: Vec<f64> = r.calibration.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let timer = r.config.timer;
        let setup = ReplaySetup {
            scale: Scale::new(r.config.scale).map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
            fraction: Fraction::new(r.config.fraction)
                .map_err(|e| anyhow::anyhow!("{name}: {e}"))?,
            cost: InjectionCost {
                timer,
                overhead_ns: med(&|c| c.overhead_ns as f64) as u64,
                min_sleep_ns: med(&|c| c.min_sleep_ns as f64) as u64,
                lateness_ns: med(&|c| c.lateness_ns as f64) as u64,
                // The first rank's curve: ranks on one host share the host's calibration.
                overhead_by_gap: r
                    .calibration
                    .first()
                    .and_then(|c| jitter_emulator::OverheadByGap::new(&c.overhead_by_gap).ok())
                    .unwrap_or_default(),
            },
        };
        setup
            .plan_options()
            .validate()
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        Ok(Platform {
            name,
            setup,
            lateness_sd_ns: med(&|c| c.lateness_sd_ns),
        })
    }
}

impl Platform {
    /// Whether the platform replays every detour as recorded (no O, L, M, O-after-a-gap curve
    /// or timer errors): a prediction of the trace itself, not of an emulation of it. S may
    /// differ from 1 (a scaled trace is still replayed without injector artefacts).
    pub(crate) fn as_recorded(&self) -> bool {
        let o = self.options();
        o.overhead_ns == 0
            && o.lateness_ns == 0
            && o.min_sleep_ns == 0
            && o.overhead_by_gap.points().is_empty()
            && (o.timer == TimerKind::Abstime || self.lateness_sd_ns == 0.0)
    }

    /// What a prediction on this platform predicts, for the model line: the trace as recorded,
    /// or an emulation of it with the injector's costs and timer errors.
    pub fn predicted(&self) -> String {
        let o = self.options();
        let scale = if o.scale == 1.0 {
            String::new()
        } else {
            format!(", scaled by S = {}", o.scale)
        };
        if self.as_recorded() {
            return format!(
                "predicted: the trace as recorded (platform {}: every detour replayed as \
                 collected, no injector artefacts{scale})",
                self.name
            );
        }
        let errors = if o.timer == TimerKind::Itimer && self.lateness_sd_ns > 0.0 {
            format!(
                "errors of sd {} per injection",
                format_ns(self.lateness_sd_ns)
            )
        } else {
            "no errors".to_string()
        };
        format!(
            "predicted: an emulation on platform {} (timer {}, {errors}; O = {}, L = {}, M = {}{}{scale})",
            self.name,
            o.timer,
            format_ns(o.overhead_ns as f64),
            format_ns(o.lateness_ns as f64),
            format_ns(o.min_sleep_ns as f64),
            if o.overhead_by_gap.points().is_empty() {
                ""
            } else {
                ", O by gap"
            },
        )
    }
}

/// The model line of a prediction (terminal and report): the communication model of `comm`
/// (barrier stage `stage_ns`) and what was predicted on `platform`.
pub fn model_line(comm: &CommModel, stage_ns: f64, platform: &Platform) -> String {
    format!("{}; {}", comm.describe(stage_ns), platform.predicted())
}

/// Barrier stage latency from a real run's report: the median over its rows with ≥ 2 ranks of
/// (baseline AvgMaxQTBT − baseline AvgMaxQT) / ceil(log2 ranks), ns (unscaled).
pub(crate) fn barrier_stage_from_report(path: &Path) -> anyhow::Result<f64> {
    let r = Report::load(path)?;
    anyhow::ensure!(
        r.kind == ReportKind::Run,
        "{} is not the report of a real run: cannot calibrate the barrier from it",
        path.display()
    );
    let mut stages: Vec<f64> = r
        .results
        .iter()
        .filter(|row| row.ranks >= 2)
        .filter_map(|row| {
            let bt = row.baseline_avg_max_qtbt_ns - row.baseline_avg_max_qt_ns;
            (bt.is_finite() && bt > 0.0).then(|| bt / f64::from(super::ranks::ceil_log2(row.ranks)))
        })
        .collect();
    anyhow::ensure!(
        !stages.is_empty(),
        "{} has no row with >= 2 ranks and a measured baseline barrier time",
        path.display()
    );
    stages.sort_by(f64::total_cmp);
    Ok(stages[stages.len() / 2])
}

/// The platform a prediction assumes, as `--platform` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlatformChoice {
    /// Every detour exactly as recorded.
    Ideal,
    /// This machine's emulator calibration (measured when not cached).
    This,
    /// A calibration file, a saved emulator calibration or the report of a real run.
    File(std::path::PathBuf),
}

impl std::str::FromStr for PlatformChoice {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<PlatformChoice, Self::Err> {
        Ok(match s {
            "ideal" => PlatformChoice::Ideal,
            "this" => PlatformChoice::This,
            file => PlatformChoice::File(std::path::PathBuf::from(file)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jitter_report::report::{Config, RankCost, ResultRow};

    #[test]
    fn calibration_files_parse_and_bad_ones_say_why() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("p.json");
        std::fs::write(
            &p,
            r#"{"overhead_ns": 900, "lateness_ns": 3000, "lateness_sd_ns": 1500.5,
                "min_sleep_ns": 20000, "scale": 6, "timer": "itimer"}"#,
        )
        .unwrap();
        let pl = Platform::load(&p, None).unwrap();
        assert_eq!(pl.options().overhead_ns, 900);
        assert_eq!(pl.options().scale, 6.0);
        assert_eq!(pl.options().timer, TimerKind::Itimer);
        assert_eq!(pl.options().fraction, 1.0);
        assert_eq!(pl.lateness_sd_ns, 1500.5);
        for (text, what) in [
            ("{not json", "is not JSON"),
            (r#"{"overhead": 1}"#, "is not a calibration"),
            (r#"{"overhead_ns": 1, "scale": 0}"#, "scale must be"),
        ] {
            std::fs::write(&p, text).unwrap();
            let e = format!("{:#}", Platform::load(&p, None).unwrap_err());
            assert!(e.contains(what), "{e}");
        }
        let e = Platform::load(&dir.path().join("missing.json"), None).unwrap_err();
        assert!(e.to_string().contains("cannot read"));
    }

    /// The model line says what was predicted: the trace as recorded on the ideal platform
    /// (scaled or not), an emulation wherever an injector artefact enters.
    #[test]
    fn the_model_line_says_whether_the_trace_or_an_emulation_was_predicted() {
        let comm = CommModel::OFFLOADED;
        let ideal = Platform::ideal();
        assert!(ideal.as_recorded());
        let line = model_line(&comm, 1000.0, &ideal);
        assert!(line.starts_with(&comm.describe(1000.0)), "{line}");
        assert!(
            line.ends_with(
                "; predicted: the trace as recorded (platform ideal: every \
             detour replayed as collected, no injector artefacts)"
            ),
            "{line}"
        );
        let mut scaled = Platform::ideal();
        scaled.setup.scale = Scale::new(3.0).unwrap();
        assert!(scaled.predicted().contains("as recorded") && scaled.predicted().contains("S = 3"));
        // itimer with its errors (the old default of the ideal platform), or any O, L, M.
        let mut itimer = Platform::ideal();
        itimer.setup.cost.timer = TimerKind::Itimer;
        itimer.lateness_sd_ns = DEFAULT_LATENESS_SD_NS;
        assert!(!itimer.as_recorded());
        assert_eq!(
            itimer.predicted(),
            "predicted: an emulation on platform ideal (timer itimer, errors of sd 20.00 us \
             per injection; O = 0 ns, L = 0 ns, M = 0 ns)"
        );
        for cost in [
            InjectionCost {
                overhead_ns: 900,
                ..InjectionCost::ideal(TimerKind::Abstime)
            },
            InjectionCost {
                lateness_ns: 1,
                ..InjectionCost::ideal(TimerKind::Abstime)
            },
            InjectionCost {
                min_sleep_ns: 5,
                ..InjectionCost::ideal(TimerKind::Abstime)
            },
        ] {
            let mut p = Platform::ideal();
            p.setup.cost = cost;
            assert!(
                !p.as_recorded() && p.predicted().contains("an emulation"),
                "{cost:?}"
            );
        }
        // itimer without errors injects exactly as recorded.
        itimer.lateness_sd_ns = 0.0;
        assert!(itimer.as_recorded());
    }

    #[test]
    fn emulator_calibrations_give_the_chosen_timer() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cal.json");
        let mut c = jitter_emulator::Calibration::default();
        c.itimer.overhead.median_ns = 1_500.4;
        c.itimer.lateness.median_ns = 4_000.0;
        c.itimer.lateness.sd_ns = 900.0;
        c.itimer.min_sleep_ns = 30_000;
        c.abstime.overhead.median_ns = 1_200.0;
        std::fs::write(&p, serde_json::to_string(&c).unwrap()).unwrap();
        let it = Platform::load(&p, Some(TimerKind::Itimer)).unwrap();
        assert_eq!(
            (
                it.options().overhead_ns,
                it.options().lateness_ns,
                it.options().min_sleep_ns
            ),
            (1_500, 4_000, 30_000)
        );
        assert_eq!(
            (it.lateness_sd_ns, it.options().timer),
            (900.0, TimerKind::Itimer)
        );
        let ab = Platform::load(&p, None).unwrap();
        assert_eq!(
            (ab.options().overhead_ns, ab.options().timer),
            (1_200, TimerKind::Abstime)
        );
    }

    #[test]
    fn run_reports_give_platform_and_barrier_stage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("run.json");
        let mut r = Report::new(
            ReportKind::Run,
            Config {
                scale: 4.0,
                fraction: 0.9,
                timer: TimerKind::Itimer,
                ..Config::default()
            },
        );
        for (rank, o) in [(0, 800), (1, 1000), (2, 900)] {
            r.calibration.push(RankCost {
                rank,
                overhead_ns: o,
                lateness_sd_ns: o as f64,
                ..RankCost::default()
            });
        }
        for (ranks, bt) in [(2, 3_000.0), (4, 6_400.0), (8, 8_700.0), (1, 0.0)] {
            r.results.push(ResultRow {
                ranks,
                baseline_avg_max_qt_ns: 1e6,
                baseline_avg_max_qtbt_ns: 1e6 + bt,
                ..ResultRow::default()
            });
        }
        r.save(&p).unwrap();
        let pl = Platform::load(&p, None).unwrap();
        assert_eq!(pl.options().overhead_ns, 900);
        assert_eq!((pl.options().scale, pl.options().fraction), (4.0, 0.9));
        assert_eq!(pl.lateness_sd_ns, 900.0);
        // Stages 3000, 3200, 2900: median 3000.
        assert_eq!(barrier_stage_from_report(&p).unwrap(), 3_000.0);
        r.kind = ReportKind::PredictDes;
        r.save(&p).unwrap();
        assert!(barrier_stage_from_report(&p).is_err());
        assert!(Platform::load(&p, None).is_err());
    }
}
