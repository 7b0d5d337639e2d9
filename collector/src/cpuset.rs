//! CPU lists (`0,2-5`), the online CPUs and the process's affinity mask, and pinning a thread.

use std::fmt;

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::error::{refuse, CollectError, Context, Result};

/// An ordered set of CPU ids without duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuList(Vec<u32>);

impl CpuList {
    /// Parses a kernel-style CPU list such as `0,2-5` (also accepts an empty string as empty).
    pub fn parse(text: &str) -> Result<Self> {
        Ok(CpuList::from_ids(ids_in(text)?))
    }

    /// [`CpuList::parse`] for a list a user gives: a CPU listed twice (`0,0`, `0-2,1`) is
    /// refused, as `jitter-trace slice --cpus` refuses it, rather than collected once.
    pub fn parse_distinct(text: &str) -> Result<Self> {
        let mut ids = ids_in(text)?;
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            refuse!(
                "CPU {} is listed twice in {text:?}: each CPU is collected once (list every CPU \
                 once)",
                w[0]
            );
        }
        Ok(CpuList::from_ids(ids))
    }

    /// Builds a list from ids in any order (sorted, duplicates dropped).
    pub fn from_ids(mut ids: Vec<u32>) -> Self {
        ids.sort_unstable();
        ids.dedup();
        CpuList(ids)
    }

    /// The CPU ids, ascending.
    pub fn ids(&self) -> &[u32] {
        &self.0
    }

    /// Number of CPUs.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the list is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `cpu` is in the list.
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
}

/// The CPU ids of a kernel-style list, in the order given, duplicates kept.
fn ids_in(text: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let num = |s: &str| -> Result<u32> {
            s.trim().parse::<u32>().map_err(|_| {
                CollectError::Refused(format!("bad CPU list {text:?}: {s:?} is not a CPU number"))
            })
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a {
                    refuse!("bad CPU list {text:?}: range {part} goes backwards");
                }
                if b - a > 1 << 16 {
                    refuse!("bad CPU list {text:?}: range {part} is too large");
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(num(part)?),
        }
    }
    Ok(cpus)
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let mut j = i;
            while j + 1 < self.0.len() && self.0[j + 1] == self.0[j] + 1 {
                j += 1;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if j > i {
                write!(f, "{}-{}", self.0[i], self.0[j])?;
            } else {
                write!(f, "{}", self.0[i])?;
            }
            i = j + 1;
        }
        Ok(())
    }
}

/// CPUs the kernel reports online (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Result<CpuList> {
    let path = "/sys/devices/system/cpu/online";
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    CpuList::parse(&text).with_context(|| format!("cannot parse {path}"))
}

/// CPUs present in the machine, online or not (`/sys/devices/system/cpu/present`).
pub(crate) fn present_cpus() -> Result<CpuList> {
    let path = "/sys/devices/system/cpu/present";
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    CpuList::parse(&text).with_context(|| format!("cannot parse {path}"))
}

/// CPUs the calling thread may run on (its affinity mask).
pub(crate) fn affinity() -> Result<CpuList> {
    let set = sched_getaffinity(Pid::from_raw(0)).context("cannot read the CPU affinity mask")?;
    let ids = (0..CpuSet::count() as u32)
        .filter(|&c| set.is_set(c as usize).unwrap_or(false))
        .collect();
    Ok(CpuList::from_ids(ids))
}

/// Restricts the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &[u32]) -> Result<()> {
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c as usize)
            .with_context(|| format!("CPU {c} is beyond the largest CPU set"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).with_context(|| {
        format!(
            "cannot pin thread to CPU {}",
            CpuList::from_ids(cpus.to_vec())
        )
    })
}

/// Checks a requested CPU list against the machine: every CPU must exist, be online and be in
/// the affinity mask. `None` selects every CPU of the affinity mask that is online.
pub fn select(requested: Option<&CpuList>) -> Result<CpuList> {
    let online = online_cpus()?;
    let mask = affinity()?;
    select_from(
        requested,
        &online,
        &present_cpus().unwrap_or_else(|_| online.clone()),
        &mask,
    )
}

/// `select` against given online, present and affinity sets (testable).
pub(crate) fn select_from(
    requested: Option<&CpuList>,
    online: &CpuList,
    present: &CpuList,
    mask: &CpuList,
) -> Result<CpuList> {
    let Some(req) = requested else {
        let ids: Vec<u32> = mask
            .ids()
            .iter()
            .copied()
            .filter(|&c| online.contains(c))
            .collect();
        if ids.is_empty() {
            refuse!("no online CPU in the affinity mask {mask}");
        }
        return Ok(CpuList::from_ids(ids));
    };
    if req.is_empty() {
        refuse!("the CPU list is empty");
    }
    for &c in req.ids() {
        if !present.contains(c) && !online.contains(c) {
            refuse!("CPU {c} does not exist (this machine has CPUs {present})");
        }
        if !online.contains(c) {
            refuse!("CPU {c} is offline (online CPUs: {online})");
        }
        if !mask.contains(c) {
            refuse!("CPU {c} is outside this process's affinity mask {mask}");
        }
    }
    Ok(req.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_kernel_lists() {
        let l = CpuList::parse("0,2-5, 9 ,3").unwrap();
        assert_eq!(l.ids(), &[0, 2, 3, 4, 5, 9]);
        assert_eq!(l.to_string(), "0,2-5,9");
        assert_eq!(CpuList::parse("0-1\n").unwrap().ids(), &[0, 1]);
        assert!(CpuList::parse("").unwrap().is_empty());
        for bad in ["a", "3-1", "-1", "1-", "0,,x"] {
            assert!(CpuList::parse(bad).is_err(), "{bad}");
        }
    }

    /// A user's list naming a CPU twice is refused (issue 30's sweep: `--cpus 0,0` collected
    /// CPU 0 once, where `jitter-trace slice --cpus 0,0` refuses); a kernel's list is a set.
    #[test]
    fn a_user_list_naming_a_cpu_twice_is_refused() {
        for twice in ["0,0", "0-2,1", "3, 1-3"] {
            let e = CpuList::parse_distinct(twice).unwrap_err().to_string();
            assert!(
                e.contains("is listed twice") && e.contains("list every CPU once"),
                "{e}"
            );
        }
        let e = CpuList::parse_distinct("0-2,1").unwrap_err().to_string();
        assert!(e.starts_with("CPU 1 is listed twice"), "{e}");
        let e = CpuList::parse_distinct("3, 1-3").unwrap_err().to_string();
        assert!(e.starts_with("CPU 3 is listed twice"), "{e}");
        assert_eq!(CpuList::parse_distinct("2,0-1").unwrap().ids(), &[0, 1, 2]);
        assert_eq!(CpuList::parse("0,0").unwrap().ids(), &[0]);
    }

    #[test]
    fn selection_names_the_offending_cpu() {
        let online = CpuList::parse("0-2").unwrap();
        let present = CpuList::parse("0-3").unwrap();
        let mask = CpuList::parse("0-1").unwrap();
        let sel =
            |s: &str| select_from(Some(&CpuList::parse(s).unwrap()), &online, &present, &mask);
        assert_eq!(sel("1").unwrap().ids(), &[1]);
        let e = sel("7").unwrap_err().to_string();
        assert!(e.contains("CPU 7 does not exist"), "{e}");
        let e = sel("3").unwrap_err().to_string();
        assert!(e.contains("CPU 3 is offline"), "{e}");
        let e = sel("0,2").unwrap_err().to_string();
        assert!(e.contains("CPU 2 is outside"), "{e}");
        assert_eq!(
            select_from(None, &online, &present, &mask).unwrap().ids(),
            &[0, 1]
        );
    }

    #[test]
    fn the_current_machine_has_a_usable_default() {
        let all = select(None).unwrap();
        assert!(!all.is_empty());
        assert!(affinity().unwrap().contains(all.ids()[0]));
    }
}
