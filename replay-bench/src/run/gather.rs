//! Step 6 of a run: rank 0 gathers the ranks' calibrations, sums their emulator totals and
//! collects the windows they replayed.

use anyhow::Context;

use super::host::host_name;
use super::state::{Gathered, Measured, Prepared};
use crate::bench::mpi::Mpi;
use crate::bench::replay::{CallsAccount, ReplayTotals};
use crate::flags::run::RunArgs;
use jitter_predict::comm::{record, Collective};
use jitter_report::report::RankCost;

/// Step 6: gathers calibrations and sums emulator totals on rank 0 (`None` on other ranks).
pub(crate) fn gather(
    comm: &Mpi,
    args: &RunArgs,
    p: &Prepared,
    m: &Measured,
) -> anyhow::Result<Option<Gathered>> {
    let setup = &p.setup;
    let cal = RankCost {
        rank: comm.rank() as i64,
        host: host_name(),
        overhead_ns: setup.cost.cost.overhead_ns,
        overhead_sd_ns: setup.cost.overhead_sd_ns,
        lateness_ns: setup.cost.cost.lateness_ns,
        lateness_sd_ns: setup.cost.lateness_sd_ns,
        min_sleep_ns: setup.cost.cost.min_sleep_ns,
        tsc_khz: setup.clock.khz(),
        platform_noise_ratio: setup.noise.noise_ratio,
        overhead_by_gap: setup.cost.cost.overhead_by_gap.points().to_vec(),
    };
    let cal_json = serde_json::to_vec(&cal)?;
    let cals = comm.gather_records(&record(&cal_json));
    let mut sums = m.totals.to_sums();
    comm.sum_to_root(&mut sums);
    let mut maxes = [m.totals.progress, setup.noise.max_ns as f64];
    comm.all_max(&mut maxes);
    // The windows whose phases were measured (rank 0 holds the outcome): one per complete
    // pair's jitter block, or one for the sequential design's measured phases.
    let (kept, per_window) = match &m.outcome.paired {
        Some(pr) => (pr.pairs.len(), args.block_phases),
        None => (
            usize::from(m.outcome.averages.phases > 0),
            m.outcome.averages.phases,
        ),
    };
    let windows = if p.plan.is_some() && args.virtual_ranks == 1 {
        crate::bench::windows::gather(comm, &m.windows, kept, per_window)
    } else {
        None
    };
    // Paying at calls (every rank or none: one flag): the accounts added up, each rank's shares.
    let payments = m.totals.calls.map(|a| {
        let mut sums = a.to_sums();
        comm.sum_to_root(&mut sums);
        let mut maxes = a.to_maxes();
        comm.all_max(&mut maxes);
        let mine = [a.ledger.detour_share(), a.ledger.time_share()];
        let shares = comm.gather_records(&record(&serde_json::to_vec(&mine).unwrap_or_default()));
        let rank_shares = shares
            .iter()
            .map(|b| serde_json::from_slice(b).unwrap_or([f64::NAN; 2]))
            .collect();
        CallsAccount::to_report(&sums, &maxes, rank_shares)
    });
    if comm.rank() != 0 {
        return Ok(None);
    }
    let calibration: Vec<RankCost> = cals
        .iter()
        .map(|c| serde_json::from_slice(c))
        .collect::<Result<_, _>>()
        .context("a rank sent an unreadable calibration")?;
    Ok(Some(Gathered {
        calibration,
        emulator: ReplayTotals::from_sums(&sums, maxes[0]).to_report(),
        platform_noise_max_ns: maxes[1],
        windows,
        payments,
    }))
}
