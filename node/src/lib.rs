//! A HotMove replica and the parts the standalone `movevm` run shares with it.
//!
//! - [`pipeline`]: what each mode runs, and the wiring of the stages below consensus;
//! - [`stage`]: the stage trait and the one runner every stage runs in;
//! - [`verifier`], [`execution`]: the two stages;
//! - [`checkpointing`]: the last stage's part in state sync (checkpoints and restores);
//! - [`metrics`]: the registry behind the `METRICS` line and the Prometheus endpoint;
//! - [`profile`]: `--profile`, a sampling profiler over the whole process;
//! - [`run`]: `node run`, the composition root of a replica;
//! - [`standalone`]: `movevm`, the same decoder and executor stages fed by a generator.

pub mod checkpointing;
pub mod execution;
pub mod metrics;
pub mod pipeline;
pub mod profile;
pub mod run;
pub mod stage;
pub mod standalone;
pub mod verifier;

pub use pipeline::{Mode, PayloadKind, Vm};
