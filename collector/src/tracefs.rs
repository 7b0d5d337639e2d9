//! A private tracefs instance for `--attribute` (`instances/jitterbench-<pid>`): created with the
//! `x86-tsc` clock (the probe's time base), limited to the probed CPUs, with the interrupt,
//! softirq, IPI, NMI, scheduler, workqueue and page-fault events enabled; removed on drop. Also
//! the parser of its per-CPU text buffers.

use std::ffi::CString;
use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use crate::clock::{read_counter, CounterSource};
use crate::cpuset::CpuList;
use crate::error::{refuse, CollectError, Context, Result};

/// Where tracefs is mounted (and mounted by `--attribute` when empty).
pub(crate) const TRACEFS: &str = "/sys/kernel/tracing";

/// Prefix of this tool's instance names; the process id follows.
pub(crate) const INSTANCE_PREFIX: &str = "jitterbench-";

/// The trace clock of an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceClock {
    /// `x86-tsc`: the TSC itself, the probe's time base (preferred).
    X86Tsc,
    /// `mono`: CLOCK_MONOTONIC in ns (printed to the µs), converted to counter ticks by two
    /// (counter, CLOCK_MONOTONIC) pairs taken when tracing starts and stops.
    Mono,
}

impl TraceClock {
    /// Its name in `trace_clock`.
    pub fn name(self) -> &'static str {
        match self {
            TraceClock::X86Tsc => "x86-tsc",
            TraceClock::Mono => "mono",
        }
    }
}

/// A (counter tick, CLOCK_MONOTONIC ns) pair read together: the best of 8 by the width of the
/// counter readings around the clock read.
pub(crate) fn mono_pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let a = crate::clock::read_counter_ordered();
        let m = mono_ns();
        let b = crate::clock::read_counter_ordered();
        if b.saturating_sub(a) < best.0 {
            best = (b.saturating_sub(a), a + (b.saturating_sub(a)) / 2, m);
        }
    }
    (best.1, best.2)
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How the timestamps of an instance become counter ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToTicks {
    /// They are ticks.
    Identity,
    /// Linear between two (tick, mono ns) pairs.
    Mono {
        /// First pair.
        start: (u64, u64),
        /// Second pair.
        end: (u64, u64),
    },
}

impl ToTicks {
    /// The counter tick of a timestamp.
    pub fn ticks(&self, ts: u64) -> u64 {
        match *self {
            ToTicks::Identity => ts,
            ToTicks::Mono {
                start: (t0, m0),
                end: (t1, m1),
            } => {
                let dm = (m1 as i128 - m0 as i128).max(1);
                let dt = t1 as i128 - t0 as i128;
                let t = t0 as i128 + (ts as i128 - m0 as i128) * dt / dm;
                t.clamp(0, u64::MAX as i128) as u64
            }
        }
    }
}

/// The events enabled when the kernel has them (`system/event`).
pub(crate) const EVENTS: &[&str] = &[
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "irq_vectors/call_function_entry",
    "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/call_function_single_exit",
    "irq_vectors/reschedule_entry",
    "irq_vectors/reschedule_exit",
    "irq_vectors/irq_work_entry",
    "irq_vectors/irq_work_exit",
    "irq_vectors/x86_platform_ipi_entry",
    "irq_vectors/x86_platform_ipi_exit",
    "irq_vectors/thermal_apic_entry",
    "irq_vectors/thermal_apic_exit",
    "irq_vectors/error_apic_entry",
    "irq_vectors/error_apic_exit",
    "irq_vectors/spurious_apic_entry",
    "irq_vectors/spurious_apic_exit",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "irq/tasklet_entry",
    "irq/tasklet_exit",
    "nmi/nmi_handler",
    "sched/sched_switch",
    "sched/sched_wakeup",
    "workqueue/workqueue_execute_start",
    "workqueue/workqueue_execute_end",
    "exceptions/page_fault_user",
    "exceptions/page_fault_kernel",
];

/// Events without which attribution means little.
const REQUIRED: &[&str] = &[
    "sched/sched_switch",
    "irq/softirq_entry",
    "irq/softirq_exit",
];

/// Per-CPU ring buffer size for a run of `duration` (`None`: until a signal), KiB: 2 MiB per
/// second (about 50 000 events/s of 40 B), at least 4 MiB, at most 256 MiB and a quarter of the
/// available memory shared by `cpus` CPUs.
pub(crate) fn buffer_kb(duration: Option<Duration>, cpus: usize) -> u64 {
    let want = match duration {
        Some(d) => (d.as_secs_f64().ceil() as u64).saturating_mul(2048),
        None => 64 << 10,
    };
    let avail_kb = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemAvailable:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        })
        .unwrap_or(u64::MAX);
    let cap = (avail_kb / 4 / cpus.max(1) as u64).min(256 << 10);
    want.clamp(4 << 10, cap.max(4 << 10))
}

/// The hex `tracing_cpumask` of a CPU list (32-bit groups, highest first, comma-separated).
pub(crate) fn cpumask(cpus: &[u32]) -> String {
    let top = cpus.iter().copied().max().unwrap_or(0) as usize;
    let mut words = vec![0u32; top / 32 + 1];
    for &c in cpus {
        words[c as usize / 32] |= 1 << (c % 32);
    }
    let mut groups: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    if let Some(first) = groups.first_mut() {
        let trimmed = first.trim_start_matches('0');
        *first = if trimmed.is_empty() {
            "0".into()
        } else {
            trimmed.into()
        };
    }
    groups.join(",")
}

/// The live instance's directory as a C string, for the signal handler (null: none).
static LIVE: AtomicPtr<libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Removes the live instance from a signal handler (the second SIGINT/SIGTERM, which exits at
/// once): one rmdir(2), async-signal-safe; it fails harmlessly while a buffer is being read.
pub(crate) fn remove_in_signal_handler() {
    let p = LIVE.load(Ordering::SeqCst);
    if !p.is_null() {
        // SAFETY: `p` came from CString::into_raw in `Instance::create` and is never freed;
        // rmdir is async-signal-safe.
        unsafe {
            libc::rmdir(p);
        }
    }
}

/// Runs `f` with SIGINT and SIGTERM blocked in the calling thread, so that the second-signal
/// handler (which exits at once) never runs while this thread holds a file of the instance open
/// (rmdir would fail with EBUSY): a signal that arrives meanwhile is delivered when `f` returns.
fn signals_deferred<T>(f: impl FnOnce() -> T) -> T {
    use nix::sys::signal::{pthread_sigmask, SigSet, SigmaskHow, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    let mut old = SigSet::empty();
    let blocked = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), Some(&mut old)).is_ok();
    let r = f();
    if blocked {
        let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
    }
    r
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).with_context(|| format!("cannot write {value:?} to {}", path.display()))
}

fn pid_alive(pid: i32) -> bool {
    // SAFETY: signal 0 checks for existence only; no signal is sent.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// A private tracefs instance; tracing stops and the instance is removed on drop (and tracefs
/// unmounted if this process mounted it).
#[derive(Debug)]
pub(crate) struct Instance {
    dir: PathBuf,
    mounted: bool,
    /// The trace clock in use.
    pub clock: TraceClock,
    mono_start: Option<(u64, u64)>,
    mono_end: Option<(u64, u64)>,
    /// The events enabled (`system/event`).
    pub events: Vec<String>,
    /// Instances of dead jitterbench processes that were removed first.
    pub removed_stale: Vec<String>,
    cpus: Vec<u32>,
}

impl Instance {
    /// Creates and configures the instance for `cpus` with `buffer_kb` KiB per CPU (tracing
    /// off until `start`).
    /// `clock`: `None` chooses `x86-tsc` where the kernel offers it and the probe reads the TSC,
    /// else `mono`.
    pub fn create(cpus: &CpuList, buffer_kb: u64, clock: Option<TraceClock>) -> Result<Instance> {
        signals_deferred(|| Self::create_now(cpus, buffer_kb, clock))
    }

    fn create_now(cpus: &CpuList, buffer_kb: u64, clock: Option<TraceClock>) -> Result<Instance> {
        if clock == Some(TraceClock::X86Tsc) && CounterSource::current() != CounterSource::Tsc {
            refuse!(
                "--trace-clock x86-tsc needs the x86 TSC; the probe reads {}",
                CounterSource::current().name()
            );
        }
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            refuse!("--attribute needs root: it creates a tracefs instance under {TRACEFS}");
        }
        let root = PathBuf::from(TRACEFS);
        let mut mounted = false;
        if !root.join("instances").is_dir() {
            let src = c"nodev";
            let target = c"/sys/kernel/tracing";
            let fstype = c"tracefs";
            // SAFETY: all pointers are valid NUL-terminated strings; data may be null.
            let rc = unsafe {
                libc::mount(
                    src.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    0,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                refuse!(
                    "--attribute needs tracefs: cannot mount it on {TRACEFS} ({e}); run as root"
                );
            }
            mounted = true;
        }
        let mut removed_stale = Vec::new();
        if let Ok(dir) = fs::read_dir(root.join("instances")) {
            for e in dir.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(pid) = name
                    .strip_prefix(INSTANCE_PREFIX)
                    .and_then(|p| p.parse::<i32>().ok())
                else {
                    continue;
                };
                if pid > 0 && !pid_alive(pid) && fs::remove_dir(e.path()).is_ok() {
                    removed_stale.push(name);
                }
            }
        }
        let dir = root
            .join("instances")
            .join(format!("{INSTANCE_PREFIX}{}", std::process::id()));
        if let Err(e) = fs::create_dir(&dir) {
            if mounted {
                // SAFETY: valid NUL-terminated path.
                unsafe { libc::umount(c"/sys/kernel/tracing".as_ptr()) };
            }
            refuse!(
                "cannot create the tracefs instance {} ({e}); --attribute needs root",
                dir.display()
            );
        }
        // Published for the signal handler and never freed (a handler on another thread may
        // still hold it; one path per collection).
        if let Ok(c) = CString::new(dir.as_os_str().as_bytes()) {
            LIVE.store(c.into_raw(), Ordering::SeqCst);
        }
        let mut inst = Instance {
            dir,
            mounted,
            clock: TraceClock::X86Tsc,
            mono_start: None,
            mono_end: None,
            events: Vec::new(),
            removed_stale,
            cpus: cpus.ids().to_vec(),
        };
        inst.configure(buffer_kb, clock)?;
        Ok(inst)
    }

    fn configure(&mut self, buffer_kb: u64, wanted: Option<TraceClock>) -> Result<()> {
        write(&self.dir.join("tracing_on"), "0")?;
        let clocks = fs::read_to_string(self.dir.join("trace_clock")).unwrap_or_default();
        let offered = |c: TraceClock| {
            clocks
                .split_whitespace()
                .any(|o| o.trim_matches(['[', ']']) == c.name())
        };
        let tsc = CounterSource::current() == CounterSource::Tsc;
        self.clock = match wanted {
            Some(c) if offered(c) => c,
            None if tsc && offered(TraceClock::X86Tsc) => TraceClock::X86Tsc,
            None if offered(TraceClock::Mono) => TraceClock::Mono,
            _ => refuse!(
                "--attribute needs the {} trace clock (the probe's time base{}); this kernel \
                 offers: {}",
                wanted.map_or("x86-tsc or mono", TraceClock::name),
                if tsc { "" } else { ", converted" },
                clocks.trim()
            ),
        };
        write(&self.dir.join("trace_clock"), self.clock.name())?;
        write(&self.dir.join("tracing_cpumask"), &cpumask(&self.cpus))?;
        for &c in &self.cpus {
            write(
                &self.dir.join(format!("per_cpu/cpu{c}/buffer_size_kb")),
                &buffer_kb.to_string(),
            )
            .context("cannot size the trace buffer (not enough memory? try a shorter run)")?;
        }
        for ev in EVENTS {
            let enable = self.dir.join("events").join(ev).join("enable");
            if enable.exists() {
                write(&enable, "1")?;
                self.events.push(ev.to_string());
            } else if REQUIRED.contains(ev) {
                refuse!("--attribute needs the kernel event {ev}, which this kernel lacks");
            }
        }
        self.check_clock()?;
        Ok(())
    }

    /// Checks that the instance's clock reads the same counter as the probe: the `now ts` of the
    /// first CPU's stats lies between two counter readings taken around it (1 ms slack).
    fn check_clock(&self) -> Result<()> {
        let cpu = self.cpus.first().copied().unwrap_or(0);
        let path = self.dir.join(format!("per_cpu/cpu{cpu}/stats"));
        let read = || match self.clock {
            TraceClock::X86Tsc => read_counter(),
            TraceClock::Mono => mono_ns(),
        };
        let before = read();
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        let after = read();
        let now: u64 = stat(&text, "now ts")
            .ok_or_else(|| CollectError::Failed(format!("{} has no `now ts`", path.display())))?;
        let slack = match self.clock {
            TraceClock::X86Tsc => crate::clock::kernel_tsc_khz().unwrap_or(5_000_000), // 1 ms
            TraceClock::Mono => 1_000_000,
        };
        if now + slack < before || now > after + slack {
            refuse!(
                "the {} trace clock ({now}) does not read {} ({before}..{after}): cannot \
                 attribute on this kernel",
                self.clock.name(),
                match self.clock {
                    TraceClock::X86Tsc => "the probe's counter",
                    TraceClock::Mono => "CLOCK_MONOTONIC",
                }
            );
        }
        Ok(())
    }

    /// Turns tracing on.
    pub fn start(&mut self) -> Result<()> {
        self.mono_start = Some(mono_pair());
        signals_deferred(|| write(&self.dir.join("tracing_on"), "1"))
    }

    /// Turns tracing off.
    pub fn stop(&mut self) -> Result<()> {
        let r = signals_deferred(|| write(&self.dir.join("tracing_on"), "0"));
        self.mono_end = Some(mono_pair());
        r
    }

    /// How this instance's timestamps become counter ticks (after `start` and `stop`).
    pub(crate) fn to_ticks(&self) -> Result<ToTicks> {
        match (self.clock, self.mono_start, self.mono_end) {
            (TraceClock::X86Tsc, _, _) => Ok(ToTicks::Identity),
            (TraceClock::Mono, Some(start), Some(end)) if end.1 > start.1 => {
                Ok(ToTicks::Mono { start, end })
            }
            _ => Err(CollectError::Failed(
                "the mono trace clock needs a start and a stop to be converted".into(),
            )),
        }
    }

    /// The events of one CPU (time order) and how many the kernel lost (overrun + dropped).
    pub(crate) fn read_cpu(&self, cpu: u32) -> Result<(Vec<Event>, u64)> {
        signals_deferred(|| self.read_cpu_now(cpu))
    }

    fn read_cpu_now(&self, cpu: u32) -> Result<(Vec<Event>, u64)> {
        let stats_path = self.dir.join(format!("per_cpu/cpu{cpu}/stats"));
        let stats = fs::read_to_string(&stats_path)
            .with_context(|| format!("cannot read {}", stats_path.display()))?;
        let lost =
            stat(&stats, "overrun").unwrap_or(0) + stat(&stats, "dropped events").unwrap_or(0);
        let path = self.dir.join(format!("per_cpu/cpu{cpu}/trace"));
        let f = fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut events = Vec::new();
        for line in BufReader::with_capacity(1 << 20, f).lines() {
            let line = line.with_context(|| format!("cannot read {}", path.display()))?;
            if let Some(mut e) = parse_line(&line) {
                // Only the first event's task is needed (the task current when tracing began).
                if !events.is_empty() {
                    e.comm = String::new();
                }
                events.push(e);
            }
        }
        Ok((events, lost))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let p = LIVE.load(Ordering::SeqCst);
        let mine = !p.is_null() && {
            // SAFETY: a non-null LIVE points to a C string from CString::into_raw, never freed.
            let live = unsafe { std::ffi::CStr::from_ptr(p) };
            live.to_bytes() == self.dir.as_os_str().as_bytes()
        };
        if mine {
            let _ =
                LIVE.compare_exchange(p, std::ptr::null_mut(), Ordering::SeqCst, Ordering::SeqCst);
        }
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        // rmdir disables the events and frees the buffers; it fails with EBUSY while a file of
        // the instance is open (only briefly, by a reader).
        for _ in 0..50 {
            if fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if self.mounted {
            // SAFETY: valid NUL-terminated path; unmounts what `create` mounted.
            unsafe { libc::umount(c"/sys/kernel/tracing".as_ptr()) };
        }
    }
}

/// A `key: value` number of a `per_cpu/cpuN/stats` file (a time in seconds gives ns).
fn stat(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| parse_ts(v.trim()))?
    })
}

/// A timestamp: an integer (counter clocks), or seconds with a fraction (ns clocks) as ns.
fn parse_ts(text: &str) -> Option<u64> {
    match text.trim().split_once('.') {
        None => text.trim().parse().ok(),
        Some((s, f)) => {
            let s: u64 = s.trim().parse().ok()?;
            if f.is_empty() || f.len() > 9 || !f.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let f9 = format!("{f:0<9}");
            Some(s * 1_000_000_000 + f9.parse::<u64>().ok()?)
        }
    }
}

/// What a kernel event means for attribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A handler starts: `key` pairs it with its exit, `label` names the source.
    Enter {
        /// Pairs entry and exit (`timer`, `irq:11`, `softirq:1`, `vec:reschedule`, `work`).
        key: String,
        /// Source label (`timer`, `irq:virtio0`, `softirq:TIMER`, `ipi:reschedule`, ...).
        label: String,
    },
    /// A handler ends.
    Exit {
        /// The key of its entry.
        key: String,
    },
    /// A context switch on this CPU.
    Switch {
        /// Task switched out.
        prev: String,
        /// Task switched in.
        next: String,
    },
    /// An exception without an exit event (page fault): it lasts until the next event.
    Fault {
        /// `page_fault:user` or `page_fault:kernel`.
        label: String,
    },
    /// An NMI handler that ended at the event and took `ns`.
    Nmi {
        /// Handler time, ns.
        ns: u64,
    },
    /// An event that marks no time (`sched_wakeup`).
    Other,
}

/// One parsed line of a tracefs text buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// Timestamp in trace-clock units (TSC ticks with `x86-tsc`).
    pub ts: u64,
    /// The task that was current (the line's `comm-pid` without the pid); `read_cpu` keeps it
    /// for the first event only.
    pub comm: String,
    /// What it means.
    pub kind: EventKind,
}

/// The value of `key=` in an event's arguments, up to the next space.
fn arg<'a>(args: &'a str, key: &str) -> Option<&'a str> {
    let mut from = 0;
    while let Some(i) = args[from..].find(key) {
        let at = from + i;
        if at == 0 || args.as_bytes()[at - 1] == b' ' || args.as_bytes()[at - 1] == b'[' {
            let rest = &args[at + key.len()..];
            return Some(rest.split([' ', ']']).next().unwrap_or(""));
        }
        from = at + key.len();
    }
    None
}

/// A comm between `key` and ` end` (comms may hold spaces).
fn comm_between<'a>(args: &'a str, key: &str, end: &str) -> Option<&'a str> {
    let s = args.find(key)? + key.len();
    let e = args[s..].find(end)? + s;
    Some(&args[s..e])
}

/// Parses one line of a tracefs text buffer (`comm-pid [cpu] flags ts: event: args`); `None`
/// for comments and lines that are not events.
pub(crate) fn parse_line(line: &str) -> Option<Event> {
    if line.trim_start().starts_with('#') {
        return None;
    }
    // The CPU field ` [012] ` ends the comm-pid; find it from the left after the comm.
    let bytes = line.as_bytes();
    let mut open = None;
    let mut i = 0;
    while let Some(j) = line[i..].find(" [") {
        let s = i + j + 2;
        let digits = bytes[s..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits > 0 && bytes.get(s + digits) == Some(&b']') {
            open = Some((i + j, s + digits + 1));
            break;
        }
        i = s;
    }
    let (comm_end, after_cpu) = open?;
    let task = line[..comm_end].trim();
    let comm = task.rsplit_once('-').map_or(task, |(c, _)| c).to_string();
    let mut rest = line[after_cpu..].trim_start();
    // Optional flags field, then the timestamp ending in ':'.
    let first = rest.split_whitespace().next()?;
    if !first.ends_with(':') {
        rest = rest[first.len()..].trim_start();
    }
    let (ts_text, rest) = rest.split_once(": ")?;
    // Clocks in seconds (`mono`, `local`) give ns.
    let ts = parse_ts(ts_text)?;
    let (name, args) = rest
        .split_once(": ")
        .unwrap_or((rest.trim_end_matches(':'), ""));
    let kind = event_kind(name.trim(), args);
    Some(Event { ts, comm, kind })
}

fn event_kind(name: &str, args: &str) -> EventKind {
    let enter = |key: String, label: String| EventKind::Enter { key, label };
    match name {
        "local_timer_entry" => enter("timer".into(), "timer".into()),
        "local_timer_exit" => EventKind::Exit {
            key: "timer".into(),
        },
        "irq_handler_entry" => {
            let irq = arg(args, "irq=").unwrap_or("?");
            let dev = arg(args, "name=").unwrap_or(irq);
            enter(format!("irq:{irq}"), format!("irq:{dev}"))
        }
        "irq_handler_exit" => EventKind::Exit {
            key: format!("irq:{}", arg(args, "irq=").unwrap_or("?")),
        },
        "softirq_entry" => {
            let vec = arg(args, "vec=").unwrap_or("?");
            let action = arg(args, "action=").unwrap_or(vec);
            enter(format!("softirq:{vec}"), format!("softirq:{action}"))
        }
        "softirq_exit" => EventKind::Exit {
            key: format!("softirq:{}", arg(args, "vec=").unwrap_or("?")),
        },
        "tasklet_entry" => enter("tasklet".into(), "softirq:TASKLET".into()),
        "tasklet_exit" => EventKind::Exit {
            key: "tasklet".into(),
        },
        "workqueue_execute_start" => {
            let f = args
                .split_once("function ")
                .map_or("?", |(_, f)| f.split_whitespace().next().unwrap_or("?"));
            enter("work".into(), format!("work:{f}"))
        }
        "workqueue_execute_end" => EventKind::Exit { key: "work".into() },
        "sched_switch" => match (
            comm_between(args, "prev_comm=", " prev_pid="),
            comm_between(args, "next_comm=", " next_pid="),
        ) {
            (Some(p), Some(n)) => EventKind::Switch {
                prev: p.to_string(),
                next: n.to_string(),
            },
            _ => EventKind::Other,
        },
        "page_fault_user" => EventKind::Fault {
            label: "page_fault:user".into(),
        },
        "page_fault_kernel" => EventKind::Fault {
            label: "page_fault:kernel".into(),
        },
        "nmi_handler" => match args
            .split_once("delta_ns: ")
            .and_then(|(_, v)| v.split_whitespace().next()?.parse().ok())
        {
            Some(ns) => EventKind::Nmi { ns },
            None => EventKind::Other,
        },
        _ => {
            if let Some(v) = name.strip_suffix("_entry") {
                enter(format!("vec:{v}"), vector_label(v))
            } else if let Some(v) = name.strip_suffix("_exit") {
                EventKind::Exit {
                    key: format!("vec:{v}"),
                }
            } else {
                EventKind::Other
            }
        }
    }
}

fn vector_label(v: &str) -> String {
    match v {
        "irq_work" => "irq_work".into(),
        "reschedule" | "call_function" | "call_function_single" => format!("ipi:{v}"),
        "x86_platform_ipi" => "ipi:x86_platform".into(),
        other => format!("irq:{other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(line: &str) -> EventKind {
        parse_line(line).unwrap().kind
    }

    #[test]
    fn lines_of_the_instance_buffer_parse_exactly() {
        let e = parse_line(
            "          <idle>-0       [000] d.h1. 7810470964961: local_timer_entry: vector=236",
        )
        .unwrap();
        assert_eq!(e.ts, 7_810_470_964_961);
        assert_eq!(e.comm, "<idle>");
        assert_eq!(
            e.kind,
            EventKind::Enter {
                key: "timer".into(),
                label: "timer".into()
            }
        );
        assert_eq!(
            kind(" replay-bench-19737   [000] ..s.. 7810491743771: softirq_entry: vec=7 [action=SCHED]"),
            EventKind::Enter {
                key: "softirq:7".into(),
                label: "softirq:SCHED".into()
            }
        );
        assert_eq!(
            kind("  a-1 [001] ..s.. 5: softirq_exit: vec=7 [action=SCHED]"),
            EventKind::Exit {
                key: "softirq:7".into()
            }
        );
        // A comm with spaces, dashes and a bracket.
        let e = parse_line(
            " my [x] task-a-17859   [001] d..2. 99: sched_switch: prev_comm=my [x] task-a \
             prev_pid=17859 prev_prio=120 prev_state=S ==> next_comm=kworker/1:0 next_pid=5 \
             next_prio=120",
        )
        .unwrap();
        assert_eq!(e.comm, "my [x] task-a");
        assert_eq!(
            e.kind,
            EventKind::Switch {
                prev: "my [x] task-a".into(),
                next: "kworker/1:0".into()
            }
        );
        assert_eq!(
            kind("x-1 [000] d.h.. 7: irq_handler_entry: irq=11 name=virtio0"),
            EventKind::Enter {
                key: "irq:11".into(),
                label: "irq:virtio0".into()
            }
        );
        assert_eq!(
            kind("x-1 [000] d.h.. 7: irq_handler_exit: irq=11 ret=handled"),
            EventKind::Exit {
                key: "irq:11".into()
            }
        );
        assert_eq!(
            kind("x-1 [000] d.h.. 7: call_function_single_entry: vector=251"),
            EventKind::Enter {
                key: "vec:call_function_single".into(),
                label: "ipi:call_function_single".into()
            }
        );
        assert_eq!(
            kind("x-1 [000] d.h.. 7: irq_work_exit: vector=246"),
            EventKind::Exit {
                key: "vec:irq_work".into()
            }
        );
        assert_eq!(
            kind(
                "kworker/0:1-9 [000] ..... 7: workqueue_execute_start: work struct \
                 00000000a1b2c3d4: function vmstat_update"
            ),
            EventKind::Enter {
                key: "work".into(),
                label: "work:vmstat_update".into()
            }
        );
        assert_eq!(
            kind("x-1 [000] d.... 7: page_fault_user: address=0x7f ip=0x55 error_code=0x6"),
            EventKind::Fault {
                label: "page_fault:user".into()
            }
        );
        assert_eq!(
            kind("x-1 [000] d.Z.. 7: nmi_handler: perf_event_nmi_handler() delta_ns: 2345 handled: 1"),
            EventKind::Nmi { ns: 2345 }
        );
        assert_eq!(
            kind("x-1 [000] dNh4. 7: sched_wakeup: comm=a pid=1 prio=120 target_cpu=000"),
            EventKind::Other
        );
        // A clock in seconds gives ns.
        assert_eq!(
            parse_line("x-1 [000] d.h.. 12.000345: local_timer_exit: vector=236")
                .unwrap()
                .ts,
            12_000_345_000
        );
        assert_eq!(parse_line("# tracer: nop"), None);
        assert_eq!(parse_line("garbage without a cpu field"), None);
        assert_eq!(parse_line(""), None);
    }

    #[test]
    fn mono_timestamps_map_linearly_onto_ticks() {
        // 2.5 ticks per ns: (1000 ticks, 0 ns) .. (3500 ticks, 1000 ns).
        let m = ToTicks::Mono {
            start: (1_000, 0),
            end: (3_500, 1_000),
        };
        assert_eq!(m.ticks(0), 1_000);
        assert_eq!(m.ticks(400), 2_000);
        assert_eq!(m.ticks(2_000), 6_000);
        let m = ToTicks::Mono {
            start: (1_000, 500),
            end: (3_500, 1_500),
        };
        assert_eq!(m.ticks(100), 0, "before the counter's 0: clamped");
        assert_eq!(ToTicks::Identity.ticks(77), 77);
        assert_eq!(parse_ts("12.5"), Some(12_500_000_000));
        assert_eq!(parse_ts("12.x"), None);
        assert_eq!(parse_ts("12."), None);
    }

    #[test]
    fn the_cpumask_is_hex_in_32_bit_groups() {
        assert_eq!(cpumask(&[1]), "2");
        assert_eq!(cpumask(&[0, 1]), "3");
        assert_eq!(cpumask(&[4, 35]), "8,00000010");
        assert_eq!(cpumask(&[32]), "1,00000000");
    }

    #[test]
    fn stats_numbers_are_read_by_key() {
        let s = "entries: 254\noverrun: 3\ncommit overrun: 9\nnow ts: 7811277321641\n\
                 dropped events: 2\n";
        assert_eq!(stat(s, "overrun"), Some(3));
        assert_eq!(stat(s, "dropped events"), Some(2));
        assert_eq!(stat(s, "now ts"), Some(7_811_277_321_641));
        assert_eq!(stat(s, "missing"), None);
        assert_eq!(
            stat("now ts:  5432.000123\n", "now ts"),
            Some(5_432_000_123_000)
        );
    }

    #[test]
    fn buffers_grow_with_the_duration_within_bounds() {
        assert_eq!(buffer_kb(Some(Duration::from_secs(1)), 1), 4 << 10);
        assert_eq!(buffer_kb(Some(Duration::from_millis(9_500)), 1), 20 << 10);
        assert!(buffer_kb(Some(Duration::from_secs(100_000)), 1) <= 256 << 10);
    }
}
