//! Errors a message handler reports to the receiver.

/// Why a handler gave up on a message. Any error closes the connection it came from (the peer
/// is misbehaving or gone); the receiver keeps serving every other connection.
#[derive(Debug, thiserror::Error)]
pub enum HandlerError {
    #[error("malformed message: {0}")]
    Malformed(String),
    #[error("failed to reply: {0}")]
    Reply(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

impl From<bincode::Error> for HandlerError {
    fn from(error: bincode::Error) -> Self {
        HandlerError::Malformed(error.to_string())
    }
}
