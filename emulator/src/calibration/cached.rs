//! This host's calibration kept in the cache (`crate::cache`): where it is kept, when a cached
//! one is reused (the same machine key, not taken on a busy machine), and measured and kept
//! when not (`Calibration::load_or_measure`).

use std::path::{Path, PathBuf};

use jitter_collect::clock::Clock;

use super::calibration_progress::Progress;
use super::cost_measurement::Settings;
use super::cost_model::Calibration;
use crate::cache::{
    busy_warning, cache_dir, decide, file_name_part, host_and_kernel, read_json, write_json,
    Decision, MachineKey,
};

impl Calibration {
    /// Default cache file: `cache::cache_dir()`/`calibration-<host>-<kernel>.json`.
    pub fn cache_path() -> PathBuf {
        let (host, kernel) = host_and_kernel();
        cache_dir().join(format!(
            "calibration-{}-{}.json",
            file_name_part(&host),
            file_name_part(&kernel)
        ))
    }

    /// Reads a calibration file; `Ok(None)` when it does not exist. A file of another kind
    /// (a trace, a report) is named as what it is (`jitter_trace::sniff`).
    pub fn load(path: &Path) -> anyhow::Result<Option<Calibration>> {
        use jitter_trace::sniff::{expect_json, JsonKind};
        if path.exists() {
            expect_json(
                "",
                path,
                &[JsonKind::Calibration],
                "an emulator calibration (jitter-emulate calibrate)",
            )?;
        }
        read_json(path)
    }

    /// Writes the calibration as JSON (creating the directory).
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        write_json(self, path)
    }

    /// Reuse `cached` on `now` unless missing, stale, `refresh`, or taken on a busy machine
    /// (its O, L and M include other work's time: measured again, never silently reused).
    pub(crate) fn decide(
        cached: Option<&Calibration>,
        now: &MachineKey,
        refresh: bool,
    ) -> Decision {
        match decide(cached.map(Calibration::key).as_ref(), now, refresh) {
            Decision::Reuse => match cached.and_then(Calibration::busy) {
                Some(why) => Decision::Measure(format!(
                    "the cached calibration was taken on a busy machine ({why})"
                )),
                None => Decision::Reuse,
            },
            measure => measure,
        }
    }

    /// The cached calibration for this host, kernel and CPU model, measured and cached if
    /// missing, stale, taken on a busy machine or `refresh` (saying why on stderr; `progress`
    /// hears how far a measurement is).
    pub fn load_or_measure(
        clock: &Clock,
        refresh: bool,
        progress: &dyn Progress,
    ) -> anyhow::Result<Calibration> {
        let path = Calibration::cache_path();
        let now = MachineKey::current(None);
        let cached = if refresh {
            None
        } else {
            Calibration::load(&path)?
        };
        match Calibration::decide(cached.as_ref(), &now, refresh) {
            Decision::Reuse => {
                if let Some(c) = cached {
                    return Ok(c);
                }
            }
            Decision::Measure(why) => eprintln!("calibrating the emulator: {why}"),
        }
        let c = Calibration::measure(clock, &Settings::default(), progress)?;
        c.save(&path)?;
        if let Some(why) = c.busy() {
            eprintln!("warning: {}", busy_warning(&why, &path));
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> MachineKey {
        MachineKey {
            host: "node1".into(),
            kernel: "6.1.0-18-amd64".into(),
            cpu_model: "AMD EPYC".into(),
            cpu: Some(1),
            simulated_signal_ns: 0,
        }
    }

    #[test]
    fn a_calibration_taken_on_a_busy_machine_is_measured_again_not_reused() {
        let now = key();
        let quiet = Calibration {
            host: now.host.clone(),
            kernel: now.kernel.clone(),
            cpu_model: now.cpu_model.clone(),
            load: Some(crate::calibration::machine_load::MachineLoad {
                others_busy_share: 0.1,
                cpus: 2,
                seconds: 20.0,
                ..Default::default()
            }),
            ..Calibration::default()
        };
        let now = MachineKey { cpu: None, ..now };
        assert_eq!(
            Calibration::decide(Some(&quiet), &now, false),
            Decision::Reuse
        );
        // Cached before the load was recorded: no evidence against it.
        let old = Calibration {
            load: None,
            ..quiet.clone()
        };
        assert_eq!(
            Calibration::decide(Some(&old), &now, false),
            Decision::Reuse
        );
        let mut busy = quiet.clone();
        busy.load.as_mut().unwrap().others_busy_share = 0.8;
        match Calibration::decide(Some(&busy), &now, false) {
            Decision::Measure(why) => assert!(
                why.starts_with(
                    "the cached calibration was taken on a busy machine (other work took 80 %"
                ),
                "{why}"
            ),
            Decision::Reuse => panic!("a busy machine's calibration was reused"),
        }
        // Round trip keeps the evidence.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("busy.json");
        busy.save(&path).unwrap();
        assert_eq!(Calibration::load(&path).unwrap().unwrap(), busy);
    }

    #[test]
    fn the_cache_round_trips_and_is_keyed_by_host_and_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/cal.json");
        assert!(Calibration::load(&path).unwrap().is_none());
        let mut c = Calibration {
            host: "h".into(),
            ..Calibration::default()
        };
        c.itimer
            .sweep
            .push(crate::calibration::SweepPoint::default());
        c.save(&path).unwrap();
        assert_eq!(Calibration::load(&path).unwrap().unwrap(), c);
        std::fs::write(&path, "{").unwrap();
        let e = format!("{:#}", Calibration::load(&path).unwrap_err());
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.contains("is unreadable (EOF while parsing")
                && e.ends_with(
                    "measure it again with `jitter-emulate calibrate --refresh` \
                     (`--recalibrate` in replay-bench run and jitter-inject), or delete the file"
                ),
            "{e}"
        );
        let p = Calibration::cache_path();
        let (host, _) = crate::calibration::host_and_kernel();
        assert!(p.to_string_lossy().contains(&host), "{}", p.display());
    }
}
