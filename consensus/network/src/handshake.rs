//! Proof of a committee key when a connection opens, on the ports only members may use.
//!
//! ```text
//! acceptor -> dialer : purpose (1) | acceptor key (32) | challenge (32, fresh random)
//! dialer -> acceptor : dialer key (32) | signature (64) over
//!                      DOMAIN | purpose | challenge | acceptor key | dialer key
//! acceptor -> dialer : ACCEPTED (1), once the key is a member's and the signature checks
//! ```
//! Frames flow only after that. The challenge makes a recorded answer useless on a later
//! connection; the purpose byte makes an answer for the mempool port useless on the consensus
//! port (and a dialer that reached the wrong port fails loudly); both keys tie the answer to this
//! pair. The dialer signs only if the hello names the member whose committee address it dialled
//! ([`Credentials::dialling`]): a member that passed on another member's hello would otherwise
//! get an answer valid on that member's port, and speak there as the dialer. It costs one
//! signature (dialer) and one verification (acceptor) per connection, never per message.
//!
//! What this does not do: the acceptor proves nothing to the dialer, and frames carry no MAC nor
//! encryption, so someone on the network path (not a member dialled by name) can still relay or
//! inject bytes into an authenticated connection. What it stops is a stranger, or a member
//! other than the one named, opening a connection that counts as someone else's. Votes, blocks,
//! timeouts and certificates carry signatures of their own (see `docs/protocol.md`).
//!
//! Why not a standard channel (Noise IK, or TLS with pinned keys): only its transport encryption
//! would close the gap above, and sealing and opening every batch on every link costs about
//! 0.24 µs of CPU per transaction per node at 4 nodes (ChaCha20-Poly1305, `benches/handshake.rs`),
//! 40 % or more of what a `hotstuff` node spends per transaction, where every security change
//! together may take 3 %. Its handshake alone would add mutual authentication but no integrity.

use super::emulation::NetEmulation;
use super::presence::Presence;
use config::{Authority, Committee};
use crypto::{PublicKey, SecretKey, Signature};
use plumbing::clock;
use rand::RngCore;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A dialer or an acceptor that has not finished the handshake by then is cut off, so a stranger
/// cannot hold a connection slot open by saying nothing.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Separates handshake signatures from every other signature a committee key makes (votes,
/// blocks, timeouts sign digests of other shapes, but the prefix makes it explicit).
const DOMAIN: &[u8] = b"hotmove/handshake/v1";

pub(crate) const KEY_LEN: usize = 32;
const CHALLENGE_LEN: usize = 32;
const SIGNATURE_LEN: usize = 64;
pub(crate) const HELLO_LEN: usize = 1 + KEY_LEN + CHALLENGE_LEN;
pub(crate) const ANSWER_LEN: usize = KEY_LEN + SIGNATURE_LEN;
pub(crate) const ACCEPTED: u8 = 0xA5;

/// Which port a connection is for; part of the signed message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Purpose {
    Consensus = 1,
    Mempool = 2,
}

impl Purpose {
    /// The port of `authority` that serves this purpose.
    pub fn address_of(self, authority: &Authority) -> SocketAddr {
        match self {
            Purpose::Consensus => authority.consensus_address,
            Purpose::Mempool => authority.mempool_address,
        }
    }

    fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            1 => Some(Purpose::Consensus),
            2 => Some(Purpose::Mempool),
            _ => None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("handshake i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("handshake not finished within {0:?}")]
    Timeout(Duration),
    #[error("the acceptor serves purpose byte {0}, not {1:?}")]
    WrongPurpose(u8, Purpose),
    #[error("{0} is not a committee member")]
    NotAMember(PublicKey),
    #[error("invalid handshake signature from {0}")]
    BadSignature(PublicKey),
    #[error("the acceptor refused the handshake")]
    Refused,
    #[error("the acceptor at this address names {found}, not the member {expected} it belongs to")]
    WrongAcceptor {
        expected: PublicKey,
        found: PublicKey,
    },
}

/// What a dialer proves: possession of a committee key, for one purpose; and whom it may dial:
/// the member's key expected at each committee address, since an answer is only ever signed for
/// the member the dialer meant to reach. Only committee links carry credentials, so they also
/// carry the link conditions a node emulates, if any: every committee sender gets them with its
/// credentials, and client connections never do.
#[derive(Clone)]
pub struct Credentials {
    pub name: PublicKey,
    secret: SecretKey,
    pub purpose: Purpose,
    acceptors: Arc<HashMap<SocketAddr, PublicKey>>,
    pub(crate) emulation: Option<Arc<NetEmulation>>,
    /// Where this purpose's receiver announces members that connect to us (see `presence.rs`).
    pub(crate) presence: Arc<Presence>,
}

impl Credentials {
    /// Credentials that may dial no one yet: see [`Credentials::dialling`].
    pub fn new(name: PublicKey, secret: SecretKey, purpose: Purpose) -> Self {
        Credentials {
            name,
            secret,
            purpose,
            acceptors: Arc::new(HashMap::new()),
            emulation: None,
            presence: Presence::new(),
        }
    }

    /// Credentials for the ports of `purpose` of every member of `committee`.
    pub fn for_committee(
        name: PublicKey,
        secret: SecretKey,
        purpose: Purpose,
        committee: &Committee,
    ) -> Self {
        Self::new(name, secret, purpose).dialling(
            committee
                .authorities
                .iter()
                .map(|(key, authority)| (purpose.address_of(authority), *key)),
        )
    }

    /// Connections to each address go only to the member whose key is paired with it; any other
    /// address is not dialled at all.
    pub fn dialling(
        mut self,
        acceptors: impl IntoIterator<Item = (SocketAddr, PublicKey)>,
    ) -> Self {
        self.acceptors = Arc::new(acceptors.into_iter().collect());
        self
    }

    /// The member expected at `address`, if it is one of ours.
    pub fn acceptor_at(&self, address: &SocketAddr) -> Option<&PublicKey> {
        self.acceptors.get(address)
    }

    /// Connections made with these credentials follow `emulation`'s links (none: real links).
    pub fn emulating(mut self, emulation: Option<Arc<NetEmulation>>) -> Self {
        self.emulation = emulation;
        self
    }

    /// Senders with these credentials retry a member at once when `presence` says it connected
    /// to us (pass the presence of the gate of the same purpose).
    pub fn hearing(mut self, presence: Arc<Presence>) -> Self {
        self.presence = presence;
        self
    }
}

/// Whom an acceptor lets in: the committee's keys, for one purpose; from which hosts members
/// connect (they get handshake slots of their own, see `slots`); and, under emulation, the
/// links whose cuts its connections honour.
#[derive(Clone)]
pub struct Gate {
    pub name: PublicKey,
    pub purpose: Purpose,
    members: Arc<HashSet<PublicKey>>,
    /// Members per host address, from the committee's addresses.
    pub(crate) member_hosts: Arc<HashMap<IpAddr, usize>>,
    pub(crate) emulation: Option<Arc<NetEmulation>>,
    /// Told of every member that proves its key here.
    pub presence: Arc<Presence>,
}

impl Gate {
    /// A gate for `members` that knows none of their hosts: every connection draws on the
    /// strangers' handshake slots until it proves a key.
    pub fn new(
        name: PublicKey,
        purpose: Purpose,
        members: impl IntoIterator<Item = PublicKey>,
    ) -> Self {
        Gate {
            name,
            purpose,
            members: Arc::new(members.into_iter().collect()),
            member_hosts: Arc::new(HashMap::new()),
            emulation: None,
            presence: Presence::new(),
        }
    }

    /// The gate of `name`'s port for `purpose`: every member of `committee` may enter, and the
    /// hosts of their addresses get handshake slots of their own.
    pub fn for_committee(name: PublicKey, purpose: Purpose, committee: &Committee) -> Self {
        let mut member_hosts: HashMap<IpAddr, usize> = HashMap::new();
        for authority in committee.authorities.values() {
            let hosts: HashSet<IpAddr> = [
                authority.consensus_address,
                authority.mempool_address,
                authority.transactions_address,
            ]
            .iter()
            .map(|address| address.ip().to_canonical())
            .collect();
            for host in hosts {
                *member_hosts.entry(host).or_default() += 1;
            }
        }
        Gate {
            member_hosts: Arc::new(member_hosts),
            ..Self::new(name, purpose, committee.authorities.keys().copied())
        }
    }

    /// Frames from a peer are read only while `emulation`'s link to it is open.
    pub fn emulating(mut self, emulation: Option<Arc<NetEmulation>>) -> Self {
        self.emulation = emulation;
        self
    }
}

fn signed_message(
    purpose: Purpose,
    challenge: &[u8; CHALLENGE_LEN],
    acceptor: &PublicKey,
    dialer: &PublicKey,
) -> Vec<u8> {
    let mut message = Vec::with_capacity(DOMAIN.len() + 1 + CHALLENGE_LEN + 2 * KEY_LEN);
    message.extend_from_slice(DOMAIN);
    message.push(purpose as u8);
    message.extend_from_slice(challenge);
    message.extend_from_slice(&acceptor.0);
    message.extend_from_slice(&dialer.0);
    message
}

async fn bounded<T>(
    work: impl std::future::Future<Output = Result<T, HandshakeError>>,
) -> Result<T, HandshakeError> {
    clock::timeout(HANDSHAKE_TIMEOUT, work)
        .await
        .map_err(|_| HandshakeError::Timeout(HANDSHAKE_TIMEOUT))?
}

/// The acceptor's side: returns the dialer's key once it proved it is a member. On an error the
/// caller closes the connection without reading anything else from it.
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    gate: &Gate,
) -> Result<PublicKey, HandshakeError> {
    bounded(async {
        let mut challenge = [0u8; CHALLENGE_LEN];
        // `thread_rng` is a CSPRNG seeded from the OS; a challenge must be unpredictable.
        rand::thread_rng().fill_bytes(&mut challenge);
        let mut hello = [0u8; HELLO_LEN];
        hello[0] = gate.purpose as u8;
        hello[1..1 + KEY_LEN].copy_from_slice(&gate.name.0);
        hello[1 + KEY_LEN..].copy_from_slice(&challenge);
        stream.write_all(&hello).await?;

        let mut answer = [0u8; ANSWER_LEN];
        stream.read_exact(&mut answer).await?;
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&answer[..KEY_LEN]);
        let dialer = PublicKey(key);
        // Membership first: a stranger costs no signature verification.
        if !gate.members.contains(&dialer) {
            return Err(HandshakeError::NotAMember(dialer));
        }
        let mut signature = [0u8; SIGNATURE_LEN];
        signature.copy_from_slice(&answer[KEY_LEN..]);
        let message = signed_message(gate.purpose, &challenge, &gate.name, &dialer);
        Signature::from_bytes(&signature)
            .verify_bytes(&message, &dialer)
            .map_err(|_| HandshakeError::BadSignature(dialer))?;
        stream.write_all(&[ACCEPTED]).await?;
        Ok(dialer)
    })
    .await
}

/// The dialer's side: proves `credentials` to `acceptor`, the member it meant to reach, and
/// waits for its verdict. A hello naming any other key is refused before anything is signed:
/// otherwise whoever answers could pass on another member's hello and use our answer to enter
/// that member's port as us.
pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    credentials: &Credentials,
    acceptor: &PublicKey,
) -> Result<(), HandshakeError> {
    bounded(async {
        let mut hello = [0u8; HELLO_LEN];
        stream.read_exact(&mut hello).await?;
        if Purpose::from_byte(hello[0]) != Some(credentials.purpose) {
            return Err(HandshakeError::WrongPurpose(hello[0], credentials.purpose));
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&hello[1..1 + KEY_LEN]);
        let named = PublicKey(key);
        if named != *acceptor {
            return Err(HandshakeError::WrongAcceptor {
                expected: *acceptor,
                found: named,
            });
        }
        let mut challenge = [0u8; CHALLENGE_LEN];
        challenge.copy_from_slice(&hello[1 + KEY_LEN..]);
        let message = signed_message(credentials.purpose, &challenge, acceptor, &credentials.name);
        let signature = Signature::sign_bytes(&message, &credentials.secret);
        let mut answer = [0u8; ANSWER_LEN];
        answer[..KEY_LEN].copy_from_slice(&credentials.name.0);
        answer[KEY_LEN..].copy_from_slice(&signature.to_bytes());
        stream.write_all(&answer).await?;
        let mut verdict = [0u8; 1];
        match stream.read_exact(&mut verdict).await {
            Ok(_) if verdict[0] == ACCEPTED => Ok(()),
            Ok(_) => Err(HandshakeError::Refused),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(HandshakeError::Refused),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crypto::KeyPair;

    fn gate(purpose: Purpose) -> (Gate, Vec<KeyPair>) {
        let keys: Vec<_> = (0..4).map(KeyPair::from_seed).collect();
        (
            Gate::new(keys[0].name, purpose, keys.iter().map(|k| k.name)),
            keys,
        )
    }

    async fn run(
        gate: Gate,
        credentials: Credentials,
    ) -> (
        Result<PublicKey, HandshakeError>,
        Result<(), HandshakeError>,
    ) {
        let (mut a, mut b) = tokio::io::duplex(1024);
        let expected = gate.name;
        // The acceptor drops its end on failure, as the receiver does, so the dialer sees EOF.
        let acceptor = async move { accept(&mut a, &gate).await };
        let dialer = async move { dial(&mut b, &credentials, &expected).await };
        tokio::join!(acceptor, dialer)
    }

    #[tokio::test]
    async fn a_member_gets_in_and_is_named() {
        let (gate, keys) = gate(Purpose::Mempool);
        let credentials = Credentials::new(keys[2].name, keys[2].secret.clone(), Purpose::Mempool);
        let (accepted, dialed) = run(gate, credentials).await;
        assert_eq!(accepted.expect("accepted"), keys[2].name);
        dialed.expect("dialer told it is in");
    }

    #[tokio::test]
    async fn byzantine_stranger_and_forged_keys_are_refused() {
        let (gate, keys) = gate(Purpose::Consensus);
        let stranger = KeyPair::from_seed(99);
        let credentials = Credentials::new(stranger.name, stranger.secret, Purpose::Consensus);
        let (accepted, _) = run(gate.clone(), credentials).await;
        assert!(matches!(accepted, Err(HandshakeError::NotAMember(_))));

        // Claiming a member's key without its secret.
        let credentials =
            Credentials::new(keys[1].name, keys[3].secret.clone(), Purpose::Consensus);
        let (accepted, _) = run(gate, credentials).await;
        assert!(matches!(accepted, Err(HandshakeError::BadSignature(_))));
    }

    #[tokio::test]
    async fn the_wrong_port_is_refused_by_both_sides() {
        let (gate, keys) = gate(Purpose::Consensus);
        let credentials = Credentials::new(keys[1].name, keys[1].secret.clone(), Purpose::Mempool);
        let (_, dialed) = run(gate, credentials).await;
        assert!(matches!(
            dialed,
            Err(HandshakeError::WrongPurpose(1, Purpose::Mempool))
        ));
    }

    /// A dialer signs only for the member it meant to reach: a hello naming another member (one
    /// passed on by whoever answered) is refused before anything is signed or sent.
    #[tokio::test]
    async fn byzantine_handshake_relay_hello_naming_another_member_is_refused() {
        let (gate, keys) = gate(Purpose::Consensus);
        let credentials =
            Credentials::new(keys[2].name, keys[2].secret.clone(), Purpose::Consensus);
        let (mut a, mut b) = tokio::io::duplex(1024);
        let acceptor = async move { accept(&mut a, &gate).await };
        // The dialer meant to reach keys[1]; the hello comes from keys[0].
        let dialer = async move {
            let dialed = dial(&mut b, &credentials, &keys[1].name).await;
            drop(b);
            dialed
        };
        let (accepted, dialed) = tokio::join!(acceptor, dialer);
        assert!(
            matches!(dialed, Err(HandshakeError::WrongAcceptor { .. })),
            "{dialed:?}"
        );
        assert!(
            accepted.is_err(),
            "the acceptor got an answer: {accepted:?}"
        );
    }
}
