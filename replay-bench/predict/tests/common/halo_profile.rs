//! A profile the `predict --app` tests share: a halo and allreduces, profiled at 2 ranks.

#![allow(dead_code)]

use jitter_profile::profile::{FORMAT, VERSION};
use jitter_profile::{Call, MainLoop, Profile, Site, Slot};

pub fn slot(site: Site, mean_ns: f64) -> Slot {
    Slot::constant(site, mean_ns).unwrap()
}

/// A halo (Sendrecv both ways) and allreduces after `allreduces_ns` of compute each, profiled
/// at 2 ranks.
pub fn profile(main_loop: bool, allreduces_ns: &[f64]) -> Profile {
    let on = |call| Site {
        comm_size: 2,
        bytes: 8,
        ..Site::of(call)
    };
    let sr = Site {
        peer: 1,
        root: 1,
        ..on(Call::Sendrecv)
    };
    Profile {
        format: FORMAT.into(),
        version: VERSION,
        program: "./halo".into(),
        job: "j".into(),
        ranks: 2,
        reported: Vec::new(),
        missing: Vec::new(),
        cartesian: None,
        structure: None,
        main_loop: main_loop.then(|| MainLoop {
            iterations: 100,
            ranks: vec![0, 1],
            compute_share: 1.0,
            kinds: Vec::new(),
            order: Vec::new(),
            slots: [slot(sr, 500_000.0), slot(sr, 0.0)]
                .into_iter()
                .chain(
                    allreduces_ns
                        .iter()
                        .map(|&ns| slot(on(Call::Allreduce), ns)),
                )
                .collect(),
        }),
    }
}
