//! The standalone `movevm` mode: a generator thread feeds Move transfers through a bounded
//! channel to an executor thread running the same [`Ledger`]`<`[`MoveExecutor`]`>` a `hotmove`
//! node runs, with no consensus, network or signatures in the way. The counters say whether the
//! generator or the executor is the bottleneck: a generator blocked on a full channel means the
//! executor is saturated.

use crate::genesis::Genesis;
use crate::ledger::{Completed, Ledger};
use crate::move_vm::{MoveError, MoveExecutor};
use crate::transaction::{Address, Payload, Transaction};
use bytes::Bytes;
use crypto::{PublicKey, Signature};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError, TrySendError};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Every account starts with this much; transfers of 1 go round the ring of accounts, so no
/// balance ever runs out.
const BALANCE: u64 = 1_000_000_000;
const GENESIS_SEED: u64 = 0;
/// Transactions arrive in nonce order here, so the backlog stays empty; any bound will do.
const MAX_BACKLOG: usize = 1_000;
const REPORT_INTERVAL: Duration = Duration::from_secs(1);
/// How often the reporter looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

#[derive(Debug, Error)]
pub enum StandaloneError {
    #[error("the movevm mode needs at least one account")]
    NoAccounts,
    #[error(transparent)]
    Move(#[from] MoveError),
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
}

/// Cumulative counters since the start of the run; `*_ms` are milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StandaloneReport {
    pub elapsed_ms: f64,
    /// Transactions the generator put in the channel.
    pub generated: u64,
    /// Transactions the executor took out of the channel.
    pub received: u64,
    pub executed: u64,
    pub failed: u64,
    pub dropped: u64,
    /// Sends that found the channel full, and the time the generator then spent blocked.
    pub channel_full: u64,
    pub generator_blocked_ms: f64,
    /// Transactions in the channel when the report was taken, and its capacity.
    pub channel_len: u64,
    pub channel_capacity: u64,
    /// Time the executor thread spent with work (not waiting on an empty channel).
    pub executor_busy_ms: f64,
    /// Hex state digest, in the final report only (the executor thread owns the state).
    pub state_digest: Option<String>,
    #[serde(rename = "final")]
    pub final_report: bool,
}

/// Counters written by one thread only, each on its own cache line so the generator and the
/// executor do not slow each other down by sharing one.
#[derive(Default)]
#[repr(align(64))]
struct GeneratorCounters {
    sent: AtomicU64,
    full: AtomicU64,
    blocked_ns: AtomicU64,
}

#[derive(Default)]
#[repr(align(64))]
struct ExecutorCounters {
    received: AtomicU64,
    executed: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    idle_ns: AtomicU64,
}

/// Runs for `duration`, calling `report` every second and once more at the end (`final`).
pub fn run_standalone(
    accounts: usize,
    duration: Duration,
    channel_capacity: usize,
    report: impl FnMut(StandaloneReport),
) -> Result<StandaloneReport, StandaloneError> {
    run_standalone_until(
        accounts,
        duration,
        channel_capacity,
        &AtomicBool::new(false),
        report,
    )
}

/// As [`run_standalone`], but also ends early when `stop` becomes true (a signal handler sets
/// it). Returns the final report.
pub fn run_standalone_until(
    accounts: usize,
    duration: Duration,
    channel_capacity: usize,
    stop: &AtomicBool,
    mut report: impl FnMut(StandaloneReport),
) -> Result<StandaloneReport, StandaloneError> {
    if accounts == 0 {
        return Err(StandaloneError::NoAccounts);
    }
    // The channel carries chunks of CHUNK transactions (a block's worth, as the node's stages
    // get them): one handoff per transaction would cost a wake-up per transaction and measure
    // the channel instead of the VM. `channel_capacity` still counts transactions. A
    // zero-capacity std channel is a rendezvous; keep at least one slot so "full" means full.
    let capacity = channel_capacity.max(CHUNK);
    let genesis = Genesis::generate(accounts, BALANCE, GENESIS_SEED);
    let executor = MoveExecutor::from_genesis(&genesis)?;
    let script = executor.script();
    let ledger = Ledger::from_genesis(executor, &genesis, MAX_BACKLOG);
    let senders: Vec<(PublicKey, Address)> = genesis
        .accounts
        .iter()
        .map(|a| (a.public_key, a.address()))
        .collect();

    let generator_counters = GeneratorCounters::default();
    let executor_counters = ExecutorCounters::default();
    let stopping = AtomicBool::new(false);
    let (sender, receiver) = sync_channel(capacity / CHUNK);
    let start = Instant::now();

    let snapshot = |final_report: bool, state_digest: Option<String>| {
        let elapsed = start.elapsed();
        let sent = generator_counters.sent.load(Ordering::Relaxed);
        let received = executor_counters.received.load(Ordering::Relaxed);
        let idle = Duration::from_nanos(executor_counters.idle_ns.load(Ordering::Relaxed));
        StandaloneReport {
            elapsed_ms: millis(elapsed),
            generated: sent,
            received,
            executed: executor_counters.executed.load(Ordering::Relaxed),
            failed: executor_counters.failed.load(Ordering::Relaxed),
            dropped: executor_counters.dropped.load(Ordering::Relaxed),
            channel_full: generator_counters.full.load(Ordering::Relaxed),
            generator_blocked_ms: millis(Duration::from_nanos(
                generator_counters.blocked_ns.load(Ordering::Relaxed),
            )),
            channel_len: sent.saturating_sub(received),
            channel_capacity: capacity as u64,
            executor_busy_ms: millis(elapsed.saturating_sub(idle)),
            state_digest,
            final_report,
        }
    };

    let digest = std::thread::scope(|scope| {
        let generator = scope.spawn(|| {
            generate(&senders, script, sender, &stopping, &generator_counters);
        });
        let executor = scope.spawn(|| execute(ledger, receiver, &executor_counters));

        let deadline = start + duration;
        let mut next_report = start + REPORT_INTERVAL;
        loop {
            let now = Instant::now();
            if now >= deadline || stop.load(Ordering::Relaxed) {
                break;
            }
            if now >= next_report {
                report(snapshot(false, None));
                next_report += REPORT_INTERVAL;
                continue;
            }
            std::thread::sleep(next_report.min(deadline).duration_since(now).min(STOP_POLL));
        }
        // The generator stops after its current send and drops its end of the channel; the
        // executor then drains what is queued and hands back the state digest.
        stopping.store(true, Ordering::Relaxed);
        let generated = generator.join();
        let digest = executor.join();
        match (generated, digest) {
            (Ok(()), Ok(digest)) => Ok(digest),
            (Err(_), _) => Err(StandaloneError::Panicked("generator")),
            (_, Err(_)) => Err(StandaloneError::Panicked("executor")),
        }
    })?;

    let last = snapshot(true, Some(hex::encode(digest.0)));
    report(last.clone());
    Ok(last)
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

/// Transactions per channel message.
const CHUNK: usize = 256;

/// Account `i` sends 1 to account `i + 1` (mod n), round after round, with sequential nonces.
/// Transactions are unsigned: this mode measures the Move executor, not ed25519.
fn generate(
    senders: &[(PublicKey, Address)],
    script: Bytes,
    channel: SyncSender<Vec<Transaction>>,
    stopping: &AtomicBool,
    counters: &GeneratorCounters,
) {
    let mut nonces = vec![0u64; senders.len()];
    let (mut sent, mut full, mut blocked) = (0u64, 0u64, Duration::ZERO);
    let mut from = 0;
    while !stopping.load(Ordering::Relaxed) {
        let mut chunk = Vec::with_capacity(CHUNK);
        for _ in 0..CHUNK {
            let to = (from + 1) % senders.len();
            let (public_key, sender) = senders[from];
            chunk.push(Transaction {
                sender,
                public_key,
                nonce: nonces[from],
                payload: Payload::Move {
                    script: script.clone(),
                    destination: senders[to].1,
                    amount: 1,
                },
                signature: Signature::default(),
            });
            nonces[from] += 1;
            from = to;
        }
        match channel.try_send(chunk) {
            Ok(()) => {}
            Err(TrySendError::Full(chunk)) => {
                full += 1;
                counters.full.store(full, Ordering::Relaxed);
                let waiting = Instant::now();
                let delivered = channel.send(chunk).is_ok();
                blocked += waiting.elapsed();
                counters
                    .blocked_ns
                    .store(blocked.as_nanos() as u64, Ordering::Relaxed);
                if !delivered {
                    return;
                }
            }
            Err(TrySendError::Disconnected(_)) => return,
        }
        sent += CHUNK as u64;
        counters.sent.store(sent, Ordering::Relaxed);
    }
}

/// Drains the channel into the ledger until the generator hangs up; returns the state digest.
fn execute(
    mut ledger: Ledger<MoveExecutor>,
    channel: Receiver<Vec<Transaction>>,
    counters: &ExecutorCounters,
) -> crypto::Digest {
    let mut done: Vec<Completed> = Vec::with_capacity(16);
    let (mut received, mut dropped, mut idle) = (0u64, 0u64, Duration::ZERO);
    loop {
        let chunk = match channel.try_recv() {
            Ok(chunk) => chunk,
            Err(TryRecvError::Empty) => {
                let waiting = Instant::now();
                let next = channel.recv();
                idle += waiting.elapsed();
                counters
                    .idle_ns
                    .store(idle.as_nanos() as u64, Ordering::Relaxed);
                match next {
                    Ok(chunk) => chunk,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        received += chunk.len() as u64;
        for tx in chunk {
            done.clear();
            if ledger.apply_into(tx, &mut done).is_err() {
                dropped += 1;
            }
        }
        counters.received.store(received, Ordering::Relaxed);
        counters.dropped.store(dropped, Ordering::Relaxed);
        let stats = ledger.stats();
        counters.executed.store(stats.executed, Ordering::Relaxed);
        counters.failed.store(stats.failed, Ordering::Relaxed);
    }
    ledger.state_digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_run_executes_without_failures() {
        let mut reports = Vec::new();
        let last =
            run_standalone(8, Duration::from_millis(300), 100, |r| reports.push(r)).expect("run");
        assert!(last.final_report);
        assert!(last.executed > 0, "{last:?}");
        assert_eq!(last.failed, 0);
        assert_eq!(last.dropped, 0);
        // Everything generated was drained and run.
        assert_eq!(last.generated, last.received);
        assert_eq!(last.executed, last.generated);
        assert_eq!(last.channel_len, 0);
        assert!(last.state_digest.is_some());
        assert_eq!(reports.last(), Some(&last));
    }

    #[test]
    fn stop_flag_ends_the_run_early() {
        let stop = AtomicBool::new(true);
        let last =
            run_standalone_until(2, Duration::from_secs(3600), 10, &stop, |_| {}).expect("run");
        assert!(last.final_report);
        assert_eq!(last.failed, 0);
        assert!(matches!(
            run_standalone(0, Duration::ZERO, 1, |_| {}),
            Err(StandaloneError::NoAccounts)
        ));
    }
}
