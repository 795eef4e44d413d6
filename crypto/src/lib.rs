//! Keys, digests and ed25519 signatures for HotMove.
//!
//! Consensus signs 32-byte digests; transactions sign their own canonical bytes. Both go through
//! the same [`PublicKey`] / [`Signature`] types so the verifier stage and the HotStuff core share
//! one implementation of single and batch verification.

mod digest;
mod error;
mod keys;
mod locate;
mod service;
mod signature;
mod verifier;

pub use digest::{Digest, Hash, DIGEST_LEN};
pub use error::CryptoError;
pub use keys::{generate_keypair, generate_production_keypair, KeyPair, PublicKey, SecretKey};
pub use service::SignatureService;
pub use signature::Signature;
pub use verifier::{ParallelVerifier, VerifierError};

/// The verification building blocks, public for this crate's benchmarks (which compare the
/// verifier with other ways of using them); not an API to build on.
#[doc(hidden)]
pub mod internals {
    pub use crate::signature::{KeyCache, Prepared};
}
