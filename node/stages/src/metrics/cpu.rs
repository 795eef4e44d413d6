//! CPU time per stage and the process's resources, read from `/proc/self` when a snapshot is
//! taken (the METRICS line, a scrape), so nothing is added to the path of a transaction.
//!
//! Wall-clock "busy" misleads when nodes share cores: a stage waiting for a core looks busy.
//! The kernel's per-thread CPU time does not, so each thread is attributed to the stage it works
//! for by its name (see [`owner_of`], the one place that maps names to stages).

use super::snapshot::Snapshot;
use super::source::Source;
use std::collections::HashMap;
use std::sync::Mutex;
use thiserror::Error;

/// The name of the tokio runtime threads of a node: consensus, mempool and network tasks.
pub const CONSENSUS_THREADS: &str = "consensus";
/// The names of a durable store's writer threads start with this (`store-batches`, ...).
pub use store::column_writer::THREAD_PREFIX as STORE_THREADS_PREFIX;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ProcError {
    #[error("malformed stat line: {0}")]
    Malformed(&'static str),
}

/// The fields of a `/proc/<pid>/task/<tid>/stat` line this module uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadStat {
    /// `comm`: the thread's name, at most 15 bytes, which may hold spaces and parentheses.
    pub name: String,
    /// User plus system time, in clock ticks.
    pub ticks: u64,
    /// When the thread started (clock ticks after boot): with the tid, it tells a thread from a
    /// later one that got the same tid.
    pub start: u64,
}

/// Parses a stat line. `comm` sits between the first `(` and the *last* `)`: a name may itself
/// hold `)` and spaces, so splitting on whitespace from the start would misread every field.
pub fn parse_stat(line: &str) -> Result<ThreadStat, ProcError> {
    let open = line.find('(').ok_or(ProcError::Malformed("no '('"))?;
    let close = line.rfind(')').ok_or(ProcError::Malformed("no ')'"))?;
    if close < open {
        return Err(ProcError::Malformed("')' before '('"));
    }
    let name = line[open + 1..close].to_string();
    // After the name: field 3 (state) is index 0, so field n is index n - 3.
    let fields: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<u64, ProcError> {
        fields
            .get(n - 3)
            .ok_or(ProcError::Malformed("too few fields"))?
            .parse()
            .map_err(|_| ProcError::Malformed("a numeric field is not a number"))
    };
    Ok(ThreadStat {
        name,
        ticks: field(14)? + field(15)?,
        start: field(22)?,
    })
}

/// What a thread works for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner<'a> {
    /// A pipeline stage (`stages.<name>.cpu_ms`).
    Stage(&'a str),
    /// The node's runtime (`consensus.cpu_ms`).
    Consensus,
    /// A durable store's writer threads (`store.cpu_ms`).
    Store,
}

/// The one map from thread names to what they work for: a stage's thread is named after the
/// stage (`spawn_stage`), its pool threads after the stage with a number (`verifier-3`, named by
/// `crypto::ParallelVerifier`), a node's runtime threads [`CONSENSUS_THREADS`] and its durable
/// store's writers `store-<column>`. Other threads (main, Prometheus, signals, the profiler)
/// count for the process only.
pub fn owner_of<'a>(thread: &str, stages: &'a [String]) -> Option<Owner<'a>> {
    if thread.starts_with(STORE_THREADS_PREFIX) {
        return Some(Owner::Store);
    }
    let base = match thread.rsplit_once('-') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => thread,
    };
    if base == CONSENSUS_THREADS {
        return Some(Owner::Consensus);
    }
    stages
        .iter()
        .find(|stage| stage.as_str() == base)
        .map(|stage| Owner::Stage(stage.as_str()))
}

/// The last reading of threads that have ended, by (tid, start): a stage's thread records it
/// as it ends ([`record_ending_thread`]), since the time it used after the last snapshot would
/// otherwise be lost with its `/proc` entry (standalone `movevm` joins its stages before the
/// final line). Process-wide, like `/proc/self`.
static ENDED: Mutex<Vec<(ThreadKey, ThreadStat)>> = Mutex::new(Vec::new());

/// A thread over the life of the process: (tid, start time).
type ThreadKey = (u64, u64);

/// Records this thread's CPU time as it ends; call it last thing on a stage's thread.
pub fn record_ending_thread() {
    let Ok(line) = std::fs::read_to_string("/proc/thread-self/stat") else {
        return;
    };
    // The first field of a task's stat is its tid.
    let tid = line.split(' ').next().and_then(|tid| tid.parse().ok());
    if let (Some(tid), Ok(stat)) = (tid, parse_stat(&line)) {
        if let Ok(mut ended) = ENDED.lock() {
            ended.push(((tid, stat.start), stat));
        }
    }
}

/// Clock ticks per second of the `stat` times (USER_HZ).
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|hz| *hz > 0).unwrap_or(100)
}

fn page_size() -> u64 {
    // SAFETY: as above.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).ok().filter(|s| *s > 0).unwrap_or(4096)
}

/// Every thread of this process now: `(tid, stat)`. Threads that end while the directory is
/// read are skipped.
pub fn read_threads() -> Vec<(u64, ThreadStat)> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|task| {
            let task = task.ok()?;
            let tid = task.file_name().to_str()?.parse().ok()?;
            let line = std::fs::read_to_string(task.path().join("stat")).ok()?;
            Some((tid, parse_stat(&line).ok()?))
        })
        .collect()
}

/// The process's CPU time in clock ticks (threads that ended included) and resident bytes.
fn read_process() -> (Option<u64>, Option<u64>) {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|line| parse_stat(&line).ok())
        .map(|stat| stat.ticks);
    // statm: size resident shared ... in pages.
    let rss = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * page_size());
    (ticks, rss)
}

/// CPU per stage and for the runtime, and the `process` section (`cpu_ms`, `rss_bytes`,
/// `cores`). Add it after the stages, so their sections come first in the line.
pub struct ProcessSource {
    stages: Vec<String>,
    consensus: bool,
    /// Whether the node writes a durable store (a `store` section).
    store: bool,
    /// Whether to read every thread's CPU time (per stage); off, only the process section.
    per_thread: bool,
    cores: usize,
    ms_per_tick: f64,
    /// Last ticks seen per thread, by (tid, start): a thread that has ended keeps counting for
    /// its stage, so the counters never go back (standalone `movevm` joins its stages before the
    /// final line).
    seen: Mutex<HashMap<ThreadKey, (Option<usize>, u64)>>,
}

impl ProcessSource {
    /// `stages`: the stages whose threads to attribute; `consensus`: whether the process has a
    /// node runtime (a `consensus` section).
    pub fn new(stages: Vec<String>, consensus: bool) -> Self {
        ProcessSource {
            stages,
            consensus,
            store: false,
            per_thread: true,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            ms_per_tick: 1000.0 / ticks_per_second() as f64,
            seen: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the node has a durable store, whose writer threads' CPU goes in a `store`
    /// section (off by default: the in-memory store writes on its callers' threads).
    pub fn with_store(mut self, on: bool) -> Self {
        self.store = on;
        self
    }

    /// The cores to report (`process.cores`) instead of those the process may use: the node's
    /// size (`node run --cores`).
    pub fn with_cores(mut self, cores: usize) -> Self {
        self.cores = cores;
        self
    }

    /// Whether to attribute CPU to stages (on by default); off, a snapshot reads only the
    /// process's own totals, so the cost of reading every thread can be measured.
    pub fn per_thread(mut self, on: bool) -> Self {
        self.per_thread = on;
        self
    }

    /// Milliseconds of CPU per stage (in `stages` order), of the runtime threads and of the
    /// store's writer threads.
    pub fn stage_cpu_ms(&self) -> CpuMs {
        // Slot `stages.len()` is the runtime, the next one the store.
        let runtime = self.stages.len();
        let store = runtime + 1;
        let mut ticks = vec![0u64; store + 1];
        let Ok(mut seen) = self.seen.lock() else {
            return CpuMs {
                stages: vec![0.0; runtime],
                consensus: 0.0,
                store: 0.0,
            };
        };
        let ended = ENDED.lock().map(|e| e.clone()).unwrap_or_default();
        let live = read_threads()
            .into_iter()
            .map(|(tid, stat)| ((tid, stat.start), stat));
        for (key, stat) in ended.into_iter().chain(live) {
            let slot = match owner_of(&stat.name, &self.stages) {
                Some(Owner::Stage(name)) => self.stages.iter().position(|s| s == name),
                Some(Owner::Consensus) => Some(runtime),
                Some(Owner::Store) => Some(store),
                None => None,
            };
            let entry = seen.entry(key).or_insert((slot, 0));
            entry.1 = entry.1.max(stat.ticks);
        }
        for (slot, t) in seen.values() {
            if let Some(slot) = slot {
                ticks[*slot] += t;
            }
        }
        let ms: Vec<f64> = ticks.iter().map(|t| *t as f64 * self.ms_per_tick).collect();
        CpuMs {
            stages: ms[..runtime].to_vec(),
            consensus: ms[runtime],
            store: ms[store],
        }
    }
}

/// What [`ProcessSource::stage_cpu_ms`] reads, in milliseconds of CPU.
pub struct CpuMs {
    /// Per stage, in the source's `stages` order.
    pub stages: Vec<f64>,
    /// The runtime threads.
    pub consensus: f64,
    /// The durable store's writer threads.
    pub store: f64,
}

impl Source for ProcessSource {
    fn collect(&self, snapshot: &mut Snapshot) {
        if self.per_thread {
            let cpu = self.stage_cpu_ms();
            for (stage, ms) in self.stages.iter().zip(cpu.stages) {
                snapshot
                    .member("stages", "stage", stage.clone())
                    .counter("cpu_ms", ms);
            }
            if self.consensus {
                snapshot
                    .section("consensus")
                    .counter("cpu_ms", cpu.consensus);
            }
            if self.store {
                snapshot.section("store").counter("cpu_ms", cpu.store);
            }
        }
        let (ticks, rss) = read_process();
        let mut process = snapshot.section("process");
        if let Some(ticks) = ticks {
            process.counter("cpu_ms", ticks as f64 * self.ms_per_tick);
        }
        if let Some(rss) = rss {
            process.gauge("rss_bytes", rss as f64);
        }
        process.gauge("cores", self.cores as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line with the fields up to starttime (22) and a few after.
    fn line(comm: &str, utime: u64, stime: u64, start: u64) -> String {
        format!(
            "4242 ({comm}) S 1 4242 4242 0 -1 4194368 100 0 0 0 {utime} {stime} 0 0 20 0 9 0 \
             {start} 123456 789 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
        )
    }

    #[test]
    fn parses_names_with_spaces_and_parentheses() {
        let stat = parse_stat(&line("verifier-1", 7, 3, 99)).expect("parse");
        assert_eq!(
            stat,
            ThreadStat {
                name: "verifier-1".into(),
                ticks: 10,
                start: 99
            }
        );
        // A name may close a parenthesis and hold spaces: only the last ')' ends it.
        let stat = parse_stat(&line("a) b (c) 1 2", 5, 6, 7)).expect("parse");
        assert_eq!(stat.name, "a) b (c) 1 2");
        assert_eq!((stat.ticks, stat.start), (11, 7));
        assert_eq!(parse_stat(&line("", 1, 1, 1)).expect("parse").name, "");
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert!(parse_stat("").is_err());
        assert!(parse_stat("1 (x S 1 2").is_err());
        assert!(parse_stat("1 x) S 1 2").is_err());
        assert!(parse_stat("1 (x) S 1 2 3").is_err(), "too few fields");
        let bad = line("x", 1, 1, 1).replace(" 1 1 0 0 20", " 1 zz 0 0 20");
        assert!(parse_stat(&bad).is_err(), "{bad}");
    }

    #[test]
    fn the_own_process_is_readable() {
        let threads = read_threads();
        assert!(!threads.is_empty());
        let (ticks, rss) = read_process();
        assert!(ticks.is_some());
        assert!(rss.is_some_and(|rss| rss > 0));
    }

    #[test]
    fn thread_names_map_to_their_stage() {
        let stages = vec!["verifier".to_string(), "executor".to_string()];
        assert_eq!(
            owner_of("verifier", &stages),
            Some(Owner::Stage("verifier"))
        );
        assert_eq!(
            owner_of("verifier-12", &stages),
            Some(Owner::Stage("verifier"))
        );
        assert_eq!(
            owner_of("executor", &stages),
            Some(Owner::Stage("executor"))
        );
        assert_eq!(owner_of("consensus", &stages), Some(Owner::Consensus));
        assert_eq!(owner_of("consensus-3", &stages), Some(Owner::Consensus));
        for column in store::Column::ALL {
            let writer = store::column_writer::thread_name(column);
            assert_eq!(owner_of(&writer, &stages), Some(Owner::Store), "{writer}");
        }
        for other in [
            "verifier-",
            "verifier-x",
            "node",
            "prometheus",
            "executors",
            "store",
            "",
        ] {
            assert_eq!(owner_of(other, &stages), None, "{other}");
        }
    }
}
