//! What each mode runs: the one place that maps a [`Mode`] to its [`Pipeline`] (which components
//! it keeps) and to what `node describe` tells the harness of it. How the stages are started and
//! wired is `pipeline.rs`.

use clap::ValueEnum;
use executor::{opaque_sample_id, signed_sample_id, CallStyle};

/// The id of a transaction if it is a latency sample, from its bytes alone.
pub type SampleDetector = fn(&[u8]) -> Option<String>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Consensus only: transactions are opaque bytes.
    Hotstuff,
    /// Consensus, signature verification, native transfers.
    Hotcrypto,
    /// Consensus, signature verification, Move VM transfers.
    Hotmove,
    /// The Move VM alone, fed by a generator in one process (`client --mode movevm`).
    Movevm,
}

/// What runs the Move VM (`--vm`): the bare VM, or the VM behind a Diem-style adapter.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Vm {
    /// A session per transaction running the script, unmetered; the nonce lives in the ledger.
    #[default]
    Bare,
    /// Diem's adapter: an `Account` resource in Move, a prologue and an epilogue around the
    /// script, gas metered with Diem's schedule, fees.
    Adapter,
}

impl Vm {
    pub fn as_str(&self) -> &'static str {
        match self {
            Vm::Bare => "bare",
            Vm::Adapter => "adapter",
        }
    }
}

/// How a Move call enters the VM (`--payload`): the compiled script every transaction carries
/// (the VM hashes it on every call to find it in its cache), or a call of the entry function
/// (`Coin::transfer_entry`, a workload's function), as chains call entry functions today.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum PayloadKind {
    #[default]
    Script,
    Entry,
}

impl PayloadKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            PayloadKind::Script => "script",
            PayloadKind::Entry => "entry",
        }
    }

    pub fn style(&self) -> CallStyle {
        match self {
            PayloadKind::Script => CallStyle::Script,
            PayloadKind::Entry => CallStyle::Entry,
        }
    }
}

/// How transactions are executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Execution {
    Native,
    Move,
}

/// The components a mode keeps; each mode drops what is below it in the table of the README.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pipeline {
    pub consensus: bool,
    pub signatures: bool,
    pub execution: Option<Execution>,
}

impl Mode {
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Hotstuff => "hotstuff",
            Mode::Hotcrypto => "hotcrypto",
            Mode::Hotmove => "hotmove",
            Mode::Movevm => "movevm",
        }
    }

    /// How a transaction of this mode is recognised as a latency sample from its bytes alone
    /// (the mempool's `receive`/`seal`/`quorum` hops); `None` for a mode without a mempool.
    pub fn sample_detector(self) -> Option<SampleDetector> {
        match self {
            Mode::Hotstuff => Some(|tx| opaque_sample_id(tx).map(|id| id.to_string())),
            Mode::Hotcrypto | Mode::Hotmove => Some(signed_sample_id),
            Mode::Movevm => None,
        }
    }

    pub fn pipeline(self) -> Pipeline {
        let (consensus, signatures, execution) = match self {
            Mode::Hotstuff => (true, false, None),
            Mode::Hotcrypto => (true, true, Some(Execution::Native)),
            Mode::Hotmove => (true, true, Some(Execution::Move)),
            Mode::Movevm => (false, false, Some(Execution::Move)),
        };
        Pipeline {
            consensus,
            signatures,
            execution,
        }
    }
}

/// What `node describe --mode M` prints: the mode's pipeline as the harness reads it, so that
/// the harness asks the node what a mode runs instead of matching its name.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Description {
    pub mode: &'static str,
    /// The role of the processes that run the pipeline (the `role` of their METRICS lines): a
    /// committee of `node`s fed by clients, or one `movevm` process fed by its generator.
    pub process: &'static str,
    pub consensus: bool,
    pub signatures: bool,
    /// `native`, `move`, or none (nothing executes).
    pub execution: Option<&'static str>,
    /// The stage rows its METRICS report, in pipeline order (`store` only with `--store`).
    pub stages: Vec<String>,
    /// The sample event at which a transaction is done: the end of its end-to-end latency.
    pub done: &'static str,
    /// The METRICS counter of transactions done, as a key path.
    pub done_counter: Vec<&'static str>,
    /// The events nodes report of sample transactions, in the order they happen.
    pub sample_events: Vec<&'static str>,
    /// Whether the mode starts from genesis accounts (`node genesis`).
    pub genesis: bool,
}

impl Mode {
    pub fn describe(self) -> Description {
        let pipeline = self.pipeline();
        let executes = pipeline.execution.is_some();
        let mut stages: Vec<String> = if pipeline.consensus {
            vec!["consensus".into(), "store".into()]
        } else {
            vec!["generator".into()]
        };
        stages.extend(pipeline.stage_names());
        let mut sample_events = Vec::new();
        if pipeline.consensus {
            if self.sample_detector().is_some() {
                sample_events.extend(["receive", "seal", "quorum"]);
            }
            sample_events.push("commit");
            if executes {
                sample_events.extend(["verify", "execute"]);
            }
        }
        Description {
            mode: self.as_str(),
            process: if pipeline.consensus { "node" } else { "movevm" },
            consensus: pipeline.consensus,
            signatures: pipeline.signatures,
            execution: pipeline.execution.map(|e| match e {
                Execution::Native => "native",
                Execution::Move => "move",
            }),
            stages,
            done: if executes { "execute" } else { "commit" },
            done_counter: if executes {
                vec!["stages", "executor", "executed"]
            } else {
                vec!["consensus", "committed_txs"]
            },
            sample_events,
            genesis: executes,
        }
    }
}

impl Pipeline {
    /// The stages [`Pipeline::spawn_stages`] starts, by the names their threads carry.
    pub fn stage_names(&self) -> Vec<String> {
        match self.execution {
            None => Vec::new(),
            Some(_) if self.signatures => vec!["verifier".into(), "executor".into()],
            Some(_) => vec!["decoder".into(), "executor".into()],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_drops_what_is_below_the_one_above() {
        let order = [Mode::Hotstuff, Mode::Hotcrypto, Mode::Hotmove];
        assert!(order.iter().all(|m| m.pipeline().consensus));
        assert!(!Mode::Movevm.pipeline().consensus);
        assert_eq!(Mode::Hotstuff.pipeline().execution, None);
        assert!(!Mode::Hotstuff.pipeline().signatures);
        assert_eq!(
            Mode::Hotcrypto.pipeline().execution,
            Some(Execution::Native)
        );
        assert_eq!(Mode::Hotmove.pipeline().execution, Some(Execution::Move));
        // movevm is hotmove without consensus and signatures: the same executor.
        assert_eq!(
            Mode::Movevm.pipeline().execution,
            Mode::Hotmove.pipeline().execution
        );
        assert!(!Mode::Movevm.pipeline().signatures);
    }
    #[test]
    fn every_mode_describes_its_pipeline() {
        for mode in Mode::value_variants() {
            let description = mode.describe();
            assert_eq!(description.mode, mode.as_str());
            assert_eq!(description.consensus, mode.pipeline().consensus);
            // The stages end with those the pipeline spawns, in the order it spawns them.
            assert!(description.stages.ends_with(&mode.pipeline().stage_names()));
        }
    }

    #[test]
    fn executing_modes_are_done_at_execute_and_hotstuff_at_commit() {
        for mode in [Mode::Hotcrypto, Mode::Hotmove, Mode::Movevm] {
            let description = mode.describe();
            assert_eq!(description.done, "execute");
            assert_eq!(
                description.stages.last().map(String::as_str),
                Some("executor")
            );
            assert_eq!(description.done_counter, ["stages", "executor", "executed"]);
            assert!(description.genesis);
        }
        let hotstuff = Mode::Hotstuff.describe();
        assert_eq!(hotstuff.done, "commit");
        assert_eq!(hotstuff.stages, ["consensus", "store"]);
        assert_eq!(hotstuff.done_counter, ["consensus", "committed_txs"]);
        assert_eq!(hotstuff.sample_events.last(), Some(&"commit"));
        assert!(!hotstuff.genesis);
        // Samples end where a transaction is done.
        let hotmove = Mode::Hotmove.describe();
        assert_eq!(hotmove.sample_events.last(), Some(&hotmove.done));
        assert_eq!(hotmove.execution, Some("move"));
        assert_eq!(Mode::Hotcrypto.describe().execution, Some("native"));
    }

    #[test]
    fn movevm_is_one_process_without_samples() {
        let movevm = Mode::Movevm.describe();
        assert_eq!(movevm.process, "movevm");
        assert_eq!(movevm.stages, ["generator", "decoder", "executor"]);
        assert!(movevm.sample_events.is_empty());
        assert_eq!(Mode::Hotcrypto.describe().process, "node");
    }
}
