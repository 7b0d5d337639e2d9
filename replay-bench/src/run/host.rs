//! What a rank learns of its host: its online CPUs, its name, and the emulator cost that one
//! rank per host reads (file or per-host cache, measured when missing) and shares.

use jitter_collect::clock::Clock;
use jitter_emulator::TimerKind;

use crate::bench::mpi::Mpi;
use crate::bench::replay::EmulatorCost;
use crate::flags::run::RunArgs;
use jitter_predict::comm::agree;

pub(crate) fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

pub(crate) fn host_name() -> String {
    mpi::environment::processor_name().unwrap_or_else(|_| "unknown".into())
}

/// This host's emulator cost for `timer`: one rank per host reads the calibration (file or
/// per-host cache, measured when missing) and its host's ranks share it.
pub(crate) fn host_cost(
    comm: &Mpi,
    args: &RunArgs,
    clock: &Clock,
    timer: TimerKind,
) -> anyhow::Result<EmulatorCost> {
    let bytes = comm.shared_from_host_root(|| {
        let r = args
            .calibration
            .load(clock)
            .map_err(|e| crate::error_line(&e));
        serde_json::to_vec(&r).unwrap_or_default()
    });
    let shared: anyhow::Result<EmulatorCost> =
        match serde_json::from_slice::<Result<jitter_emulator::Calibration, String>>(&bytes) {
            Ok(Ok(c)) => Ok(EmulatorCost::from_calibration(
                &c,
                timer,
                &args.replay.overrides.into(),
            )),
            Ok(Err(e)) => Err(anyhow::anyhow!(e)),
            Err(e) => Err(anyhow::anyhow!("calibration lost between ranks: {e}")),
        };
    agree(comm, shared)
}
