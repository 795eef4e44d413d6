use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CryptoError {
    #[error("invalid signature")]
    InvalidSignature,
    #[error("invalid public key encoding")]
    InvalidPublicKey,
    #[error("invalid secret key encoding")]
    InvalidSecretKey,
    #[error("batch lengths differ: {messages} messages, {signatures} signatures, {keys} keys")]
    BatchLengthMismatch {
        messages: usize,
        signatures: usize,
        keys: usize,
    },
    #[error("invalid hex: {0}")]
    Hex(String),
}
