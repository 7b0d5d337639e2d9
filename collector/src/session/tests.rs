//! Tests of the session (refused configurations).

use super::*;
use crate::collection_config::{MAX_PROFILE_READS, MAX_RING};

#[test]
fn a_refused_configuration_is_a_refusal() {
    let config = Config {
        ring_capacity: 1,
        ..Config::default()
    };
    let e = collect(&config).unwrap_err();
    assert!(matches!(e, CollectError::Refused(_)), "{e:?}");
    assert_eq!(
        e.line(),
        "--ring 1: give 2 to 67108864 entries per CPU (16 bytes each, touched before the \
         probes start; the largest is 1 GiB per CPU)"
    );
    for config in [
        Config {
            ring_capacity: MAX_RING + 1,
            ..Config::default()
        },
        Config {
            t_min_reads: MAX_PROFILE_READS + 1,
            ..Config::default()
        },
        Config {
            t_min_reads: 0,
            ..Config::default()
        },
    ] {
        let e = collect(&config).unwrap_err();
        assert!(matches!(e, CollectError::Refused(_)), "{e:?}");
    }
    // A drain period beyond a day overflowed the writer's clock (issue 30's sweep:
    // `--drain-ms 18446744073709551615` panicked); a day itself is taken.
    let config = Config {
        drain_period: Some(
            crate::collection_config::MAX_DRAIN_PERIOD + std::time::Duration::from_millis(1),
        ),
        ..Config::default()
    };
    let e = collect(&config).unwrap_err();
    assert!(matches!(e, CollectError::Refused(_)), "{e:?}");
    assert_eq!(
        e.line(),
        "--drain-ms 86400001: give at most 86400000 (a day; 0 drains only at the end)"
    );
}

#[test]
fn a_real_time_collection_needs_a_duration_for_its_watchdog() {
    let config = Config {
        sched: Some((SchedPolicy::Fifo, 1)),
        duration: None,
        max_detours: Some(1000),
        drain_period: Some(std::time::Duration::from_millis(100)),
        ..Config::default()
    };
    let e = collect(&config).unwrap_err();
    assert!(e.line().contains("needs --duration"), "{}", e.line());
}

#[test]
fn an_unwritable_output_names_the_path_and_the_os_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("missing").join("t.jtr");
    let config = Config {
        output: output.clone(),
        lock_memory: false,
        ..Config::default()
    };
    let e = collect(&config).unwrap_err();
    let CollectError::Within { context, source } = &e else {
        panic!("expected the output's context: {e:?}");
    };
    assert_eq!(
        context,
        &format!("cannot create the output {}", output.display())
    );
    assert!(matches!(**source, CollectError::Trace(_)), "{source:?}");
    let os = std::io::Error::from_raw_os_error(libc::ENOENT).to_string();
    let line = e.line();
    assert_eq!(line.matches(&os).count(), 1, "{line}");
    assert!(!output.exists());
}
