//! Safety: what a member may vote for, and what it must not forget across a crash.
//!
//! - `rules`: the two-chain voting rules and the commit rule, on blocks alone;
//! - `state`: the safety state kept on the store (last voted round, high QC);
//! - `voting`: what the core votes with, the rules and their store together;
//! - `witness`: what this node holds of each member's signatures, for a member that lost its
//!   record;
//! - `recall`: a node without a record asks the others what its key signed, and signs only
//!   above what they show.

pub(crate) mod recall;
pub(crate) mod rules;
pub(crate) mod state;
pub(crate) mod voting;
pub(crate) mod witness;

pub use recall::MissingRecord;
pub(crate) use rules::commits;
pub(crate) use state::SafetyStateError;
pub(crate) use voting::Voting;
