//! Signatures checked once per committee (`--verify=attested`): each batch's transactions are
//! checked by f+1 stake of members, its *attesters*, who sign what they found (an
//! [`Attestation`]: the positions of the invalid transactions, or none) and send it to every
//! member. A node that holds f+1 stake of matching statements for a batch drops the transactions
//! they name and checks no signature of it: at least one of the statements is honest, and an
//! honest one is what the node's own check would find. Without such statements it checks the
//! batch itself, so a Byzantine attester can make nodes work, never make them disagree.
//!
//! The attesters of a batch are its author (which checks its batch as it seals it) and members
//! named by the batch's place in its author's sequence ([`attesters`]): an author numbers its
//! batches 0, 1, 2, ... and each member attests only a batch whose number follows the last one
//! it got from that author ([`Sequences`]), so the author cannot choose, batch by batch, who
//! checks it, and every member attests its share of every author's batches. What "invalid"
//! means (malformed, or a bad signature) is the application's: the node hands the mempool the
//! check ([`CheckBatch`]); the mempool never decodes a transaction.

mod attesters;
mod attesting;
mod delays;
mod queue;
mod sequence;
mod statement;
mod table;

pub use attesters::attesters;
pub use attesting::{Attesting, CheckBatch, Conduct};
pub use delays::{StatementDelays, MAX_WAIT, MIN_WAIT};
pub use queue::CheckQueue;
pub use sequence::Sequences;
pub use statement::{Attestation, AttestationError, Finding};
pub use table::{Attestations, Limits, Verdict};

#[cfg(test)]
mod tests;
