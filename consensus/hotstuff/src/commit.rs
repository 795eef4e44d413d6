//! Committing: the chain committed so far and the rule every new commit must keep (`committed`),
//! and the committer that hands committed blocks' batches to the application, in order.

pub(crate) mod committed;
pub(crate) mod committer;

pub(crate) use committed::Committed;
