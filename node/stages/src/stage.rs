//! A pipeline stage and the one loop that runs every stage: take a batch from the metered input
//! channel, time it, count it, hand the result to the next stage, and do the stage's periodic
//! work between batches and once input pauses.
//!
//! A stage only says what to do with one batch ([`Stage::process`]); what the runner measures
//! is therefore measured the same way for every stage, in a node and in standalone `movevm`.

use crate::metrics::{Snapshot, Source, Value};
use plumbing::clock::{self, Instant};
use plumbing::metered::{MeteredReceiver, MeteredSender};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;
use tracing::{error, info};

/// A batch of transactions travelling between stages.
pub trait Counted {
    /// Transactions in the batch.
    fn items(&self) -> u64;
}

pub trait Stage {
    type Input: Counted + Send + 'static;
    type Output: Send + 'static;

    /// Handles one batch; returns what the next stage gets, if anything. Outcome counters
    /// (invalid, executed, ...) go to `metrics`.
    fn process(&mut self, input: Self::Input, metrics: &StageMetrics) -> Option<Self::Output>;

    /// How often, at most, [`Stage::tick`] runs while batches flow; it also runs once input
    /// pauses, so the last state is published. `None`: the stage has no periodic work.
    fn tick_interval(&self) -> Option<Duration> {
        None
    }

    /// Periodic work kept off the per-batch path (the executor's state digest). Also called
    /// once before the first batch and once after the last.
    fn tick(&mut self, _metrics: &StageMetrics) {}
}

/// Starts `name` on a thread of its own. The stage is built by `make` on that thread (the Move
/// VM stays on the thread that uses it); this returns once it is built, or with its error.
pub fn spawn_stage<S, F>(
    make: F,
    input: MeteredReceiver<S::Input>,
    output: Option<MeteredSender<S::Output>>,
    metrics: Arc<StageMetrics>,
) -> anyhow::Result<JoinHandle<()>>
where
    S: Stage,
    F: FnOnce() -> anyhow::Result<S> + Send + 'static,
{
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let name = metrics.name.clone();
    let handle = std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let stage = match make() {
                Ok(stage) => {
                    let _ = ready_tx.send(Ok(()));
                    stage
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let runner = Runner {
                stage,
                input,
                output,
                metrics,
            };
            runner.run();
            crate::metrics::cpu::record_ending_thread();
        })?;
    ready_rx
        .recv()
        .map_err(|_| anyhow::anyhow!("the {name} thread died while starting"))??;
    Ok(handle)
}

struct Runner<S: Stage> {
    stage: S,
    input: MeteredReceiver<S::Input>,
    output: Option<MeteredSender<S::Output>>,
    metrics: Arc<StageMetrics>,
}

impl<S: Stage> Runner<S> {
    fn run(mut self) {
        // A timer to wait for input no longer than the next tick is due; a stage without periodic
        // work just blocks on its input.
        let interval = self.stage.tick_interval();
        let timer = match interval {
            None => None,
            Some(_) => match tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
            {
                Ok(timer) => Some(timer),
                Err(e) => {
                    error!("{}: cannot start its timer: {e}", self.metrics.name);
                    return;
                }
            },
        };
        self.tick();
        let mut last_tick = Instant::now();
        // Whether a batch was processed since the last tick.
        let mut stale = false;
        loop {
            let input = match self.input.try_recv() {
                Ok(input) => input,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => match (&timer, interval) {
                    (Some(timer), Some(interval)) if stale => {
                        let due = interval.saturating_sub(last_tick.elapsed());
                        // Built inside `block_on`: a timer needs the runtime's context.
                        let next =
                            timer.block_on(async { clock::timeout(due, self.input.recv()).await });
                        match next {
                            Ok(Some(input)) => input,
                            Ok(None) => break,
                            Err(_elapsed) => {
                                self.tick();
                                last_tick = Instant::now();
                                stale = false;
                                continue;
                            }
                        }
                    }
                    _ => match self.input.blocking_recv() {
                        Some(input) => input,
                        None => break,
                    },
                },
            };
            let start = Instant::now();
            let items = input.items();
            let output = self.stage.process(input, &self.metrics);
            self.metrics.record_batch(items, start.elapsed());
            stale = true;
            if interval.is_some_and(|interval| last_tick.elapsed() >= interval) {
                self.tick();
                last_tick = Instant::now();
                stale = false;
            }
            if let (Some(output), Some(next)) = (output, &self.output) {
                if next.blocking_send(output).is_err() {
                    break;
                }
            }
        }
        self.tick();
        info!("{} stage stopped", self.metrics.name);
    }

    fn tick(&mut self) {
        let start = Instant::now();
        self.stage.tick(&self.metrics);
        self.metrics.record_busy(start.elapsed());
    }
}

/// What a stage did: the runner counts batches and busy time, the stage its outcomes.
pub struct StageMetrics {
    name: String,
    /// Transactions that left the stage's input (processed, whatever the outcome).
    items: AtomicU64,
    batches: AtomicU64,
    busy_ns: AtomicU64,
    pub invalid: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
    pub executed: AtomicU64,
    /// Transactions held back (the executor's nonce backlog): a gauge.
    pub backlog: AtomicU64,
    /// (items, batches) when the METRICS line last took the interval's mean batch size.
    interval_start: Mutex<(u64, u64)>,
    /// Stage-specific values (the executor's state digest, drops by reason).
    extra: Mutex<Vec<(String, Value)>>,
}

impl StageMetrics {
    pub fn new(name: impl Into<String>) -> Self {
        StageMetrics {
            name: name.into(),
            items: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            invalid: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            backlog: AtomicU64::new(0),
            interval_start: Mutex::new((0, 0)),
            extra: Mutex::new(Vec::new()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Counts a batch of `items` transactions. An empty one (consensus's stand-in for a block
    /// without batches) takes time but is no batch: counting it would lower the mean batch size
    /// of an idle chain's stages to nothing.
    pub fn record_batch(&self, items: u64, busy: Duration) {
        if items > 0 {
            self.items.fetch_add(items, Ordering::Relaxed);
            self.batches.fetch_add(1, Ordering::Relaxed);
        }
        self.record_busy(busy);
    }

    pub fn record_busy(&self, busy: Duration) {
        self.busy_ns
            .fetch_add(busy.as_nanos() as u64, Ordering::Relaxed);
    }

    pub fn items(&self) -> u64 {
        self.items.load(Ordering::Relaxed)
    }

    /// Sets a stage-specific value (a gauge, counts by reason, or text), replacing its last one.
    pub fn set(&self, field: &str, value: Value) {
        if let Ok(mut extra) = self.extra.lock() {
            match extra.iter_mut().find(|(f, _)| f == field) {
                Some((_, slot)) => *slot = value,
                None => extra.push((field.to_string(), value)),
            }
        }
    }
}

impl Source for StageMetrics {
    fn collect(&self, snapshot: &mut Snapshot) {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let items = load(&self.items);
        let batches = load(&self.batches);
        let mut scope = snapshot.member("stages", "stage", self.name.clone());
        scope
            .counter("items", items as f64)
            .counter("batches", batches as f64)
            .counter("busy_ms", load(&self.busy_ns) as f64 / 1e6)
            .counter("invalid", load(&self.invalid) as f64)
            .counter("failed", load(&self.failed) as f64)
            .counter("dropped", load(&self.dropped) as f64)
            .counter("executed", load(&self.executed) as f64)
            .gauge("backlog", load(&self.backlog) as f64);
        if scope.takes_interval() {
            let (start_items, start_batches) = match self.interval_start.lock() {
                Ok(mut start) => std::mem::replace(&mut *start, (items, batches)),
                Err(_) => (items, batches),
            };
            let batches = batches.saturating_sub(start_batches);
            let mean = if batches == 0 {
                0.0
            } else {
                items.saturating_sub(start_items) as f64 / batches as f64
            };
            scope.json("batch_size_mean", serde_json::json!(mean));
        }
        if let Ok(extra) = self.extra.lock() {
            for (field, value) in extra.iter() {
                match value {
                    Value::Counter(v) => scope.counter(field, *v),
                    Value::Gauge(v) => scope.gauge(field, *v),
                    Value::Counts { label, counts } => scope.counts(field, label, counts.clone()),
                    Value::Text(text) => scope.text(field, text.clone()),
                    Value::Json(json) => scope.json(field, json.clone()),
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Registry;
    use serde_json::Value as Json;

    struct Numbers(Vec<u32>);

    impl Counted for Numbers {
        fn items(&self) -> u64 {
            self.0.len() as u64
        }
    }

    /// Doubles every number, counts odd ones as invalid, and records its ticks.
    struct Doubler {
        ticks: Arc<AtomicU64>,
    }

    impl Stage for Doubler {
        type Input = Numbers;
        type Output = Numbers;

        fn process(&mut self, input: Numbers, metrics: &StageMetrics) -> Option<Numbers> {
            let odd = input.0.iter().filter(|n| *n % 2 == 1).count() as u64;
            metrics.invalid.fetch_add(odd, Ordering::Relaxed);
            Some(Numbers(input.0.into_iter().map(|n| n * 2).collect()))
        }

        fn tick_interval(&self) -> Option<Duration> {
            Some(Duration::from_millis(10))
        }

        fn tick(&mut self, metrics: &StageMetrics) {
            let ticks = self.ticks.fetch_add(1, Ordering::Relaxed) + 1;
            metrics.set("ticks", Value::Gauge(ticks as f64));
        }
    }

    fn line_of(registry: &Registry) -> Json {
        let line = registry.line(false);
        serde_json::from_str(line.strip_prefix("METRICS ").expect("prefix")).expect("json")
    }

    #[test]
    fn runner_counts_forwards_and_ticks() {
        let (tx_in, rx_in, _) = plumbing::metered::channel(4);
        let (tx_out, mut rx_out, out_metrics) = plumbing::metered::channel(4);
        let metrics = Arc::new(StageMetrics::new("doubler"));
        let ticks = Arc::new(AtomicU64::new(0));
        let handle = spawn_stage(
            {
                let ticks = ticks.clone();
                move || Ok(Doubler { ticks })
            },
            rx_in,
            Some(tx_out),
            metrics.clone(),
        )
        .expect("spawn");
        let registry = Registry::new("test", "t", "none").with(metrics.clone());
        tx_in.blocking_send(Numbers(vec![1, 2, 3])).expect("send");
        tx_in.blocking_send(Numbers(vec![4])).expect("send");
        assert_eq!(rx_out.blocking_recv().map(|n| n.0), Some(vec![2, 4, 6]));
        assert_eq!(rx_out.blocking_recv().map(|n| n.0), Some(vec![8]));
        // Closing the input ends the stage, after a last tick.
        drop(tx_in);
        handle.join().expect("stage thread");
        assert!(
            rx_out.blocking_recv().is_none(),
            "output closed with the stage"
        );
        let line = line_of(&registry);
        let stage = &line["stages"]["doubler"];
        assert_eq!(stage["items"], 4);
        assert_eq!(stage["batches"], 2);
        assert_eq!(stage["invalid"], 2);
        assert_eq!(stage["batch_size_mean"], 2.0);
        // A tick at the start and one at the end at least.
        assert!(ticks.load(Ordering::Relaxed) >= 2);
        assert_eq!(stage["ticks"], ticks.load(Ordering::Relaxed));
        assert_eq!(out_metrics.snapshot().sent, 2);
        // The next interval starts where this one ended.
        assert_eq!(
            line_of(&registry)["stages"]["doubler"]["batch_size_mean"],
            0.0
        );
    }

    /// This thread's CPU time.
    fn thread_cpu() -> Duration {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes the current thread's CPU clock into `now`.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
    }

    /// Burns its batch's first number of milliseconds of CPU, or sleeps that long.
    struct Burner {
        spin: bool,
    }

    impl Stage for Burner {
        type Input = Numbers;
        type Output = ();

        fn process(&mut self, input: Numbers, _: &StageMetrics) -> Option<()> {
            let duration = Duration::from_millis(input.0.first().copied().unwrap_or(0).into());
            if self.spin {
                // CPU time, not wall clock: on a shared machine the spin may wait for a core.
                let start = thread_cpu();
                while thread_cpu() - start < duration {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::sleep(duration);
            }
            None
        }
    }

    #[test]
    fn stage_cpu_is_what_its_thread_burns_not_its_wall_clock() {
        // Names unique in this test binary (threads of other tests must not count) and within
        // the 15 bytes the kernel keeps of a thread name.
        let names = ["cpu-spinner", "cpu-sleeper"];
        let mut handles = Vec::new();
        let mut inputs = Vec::new();
        let mut stages = Vec::new();
        for (name, spin) in names.iter().zip([true, false]) {
            let (tx, rx, _) = plumbing::metered::channel(1);
            let metrics = Arc::new(StageMetrics::new(*name));
            handles.push(
                spawn_stage(move || Ok(Burner { spin }), rx, None, metrics.clone()).expect("spawn"),
            );
            inputs.push(tx);
            stages.push(metrics);
        }
        let process = crate::metrics::ProcessSource::new(
            names.iter().map(|n| n.to_string()).collect(),
            false,
        );
        for tx in &inputs {
            tx.blocking_send(Numbers(vec![200])).expect("send");
        }
        // Both stages are done with their batch, and their threads wait for the next one.
        let deadline = Instant::now() + Duration::from_secs(60);
        while stages.iter().any(|s| s.items() == 0) {
            assert!(Instant::now() < deadline, "stages did not finish");
            std::thread::sleep(Duration::from_millis(10));
        }
        let running = process.stage_cpu_ms().stages;
        let (spinner, sleeper) = (running[0], running[1]);
        // Both were busy 200 ms of wall clock; only the spinner used the CPU (10 ms ticks).
        assert!(spinner >= 180.0, "spinner {spinner} ms");
        assert!(sleeper <= 30.0, "sleeper {sleeper} ms");
        // An ended thread keeps its CPU in the counters.
        drop(inputs);
        for handle in handles {
            handle.join().expect("stage");
        }
        let ended = process.stage_cpu_ms().stages;
        assert!(ended[0] >= running[0], "{running:?} then {ended:?}");
        let registry = Registry::new("test", "t", "none")
            .with(stages[0].clone())
            .with(process);
        let line = line_of(&registry);
        assert!(
            line["stages"]["cpu-spinner"]["cpu_ms"].as_f64() >= Some(180.0),
            "{line}"
        );
        assert_eq!(
            line["stages"]["cpu-spinner"]["items"], 1,
            "merged with the stage"
        );
        assert!(line["process"]["cpu_ms"].as_f64() >= Some(180.0), "{line}");
        assert!(line["process"]["rss_bytes"].as_f64() > Some(0.0), "{line}");
        assert!(line["process"]["cores"].as_u64() >= Some(1), "{line}");
        assert!(line.get("consensus").is_none(), "no runtime here: {line}");
    }

    #[test]
    fn a_stage_that_fails_to_build_reports_its_error() {
        let (_tx, rx, _) = plumbing::metered::channel::<Numbers>(1);
        let result = spawn_stage::<Doubler, _>(
            || anyhow::bail!("no VM today"),
            rx,
            None,
            Arc::new(StageMetrics::new("broken")),
        );
        let error = result.expect_err("the error comes back");
        assert!(error.to_string().contains("no VM today"), "{error}");
    }
}
