//! Safety: what a member may vote for, and what it must not forget across a crash.
//!
//! - `rules`: the two-chain voting rules and the commit rule, on blocks alone;
//! - `state`: the safety state kept on the store (last voted round, high QC);
//! - `voting`: what the core votes with, the rules and their store together.

pub(crate) mod rules;
pub(crate) mod state;
pub(crate) mod voting;

pub(crate) use rules::{commits, SafetyRules};
pub(crate) use state::{SafetyState, SafetyStateError, SafetyStore};
pub(crate) use voting::Voting;
