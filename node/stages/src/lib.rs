//! The stages behind ordering, and what runs them: everything a replica (`node`) and the client's
//! standalone `movevm` share. A replica feeds them committed batches from consensus; `movevm`
//! feeds them from a generator, with no consensus at all.
//!
//! - [`pipeline`]: what each mode runs, and the wiring of the stages;
//! - [`allocator`]: the allocator of both binaries, and what it does with memory it frees;
//! - [`dilation`]: `--dilation`, the process's clock slowed for scale-model runs;
//! - [`flags`]: which flags of `node run` and `client` each mode takes, checked and described;
//! - [`stage`]: the stage trait and the one runner every stage runs in;
//! - [`verifier`], [`execution`]: the two stages;
//! - [`checkpointing`]: the last stage's part in state sync (checkpoints and restores);
//! - [`logging`]: where both binaries' log lines go;
//! - [`metrics`]: the registry behind the `METRICS` line and the Prometheus endpoint;
//! - [`profile`]: `--profile`, a sampling profiler over the whole process;
//! - [`standalone`]: `movevm`, the same decoder and executor stages fed by a generator.
//!
//! It must not know how batches are ordered: what it takes from consensus is the committed batch
//! (`batch`) and what it hands back is checkpoints and progress (`checkpoint`); no HotStuff, no
//! mempool, no network. The replica that wires consensus to these stages is the `node` binary.

pub mod allocator;
pub mod checkpointing;
pub mod dilation;
pub mod execution;
pub mod flags;
pub mod logging;
pub mod metrics;
pub mod modes;
pub mod pipeline;
pub mod profile;
pub mod stage;
pub mod standalone;
pub mod verifier;

pub use modes::{Mode, PayloadKind, Vm};
