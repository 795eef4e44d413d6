//! Handles the mempool port: batches from peers (stored, acknowledged, and queued for the
//! attester where this node attests them), batch requests (passed to the helper) and peers'
//! attestations (checked and kept).

use super::attest::{attesters, Attestations, AttesterInput};
use super::helper::HelperRequest;
use super::message::{MempoolMessage, ACK, REFUSED};
use super::metrics::MempoolMetrics;
use super::quota::{Admission, AuthorQuota};
use super::SampleHooks;
use batch::Batch;
use bytes::Bytes;
use crypto::PublicKey;
use futures::SinkExt;
use network::{HandlerError, MessageHandler, Writer};
use plumbing::budgeted::{BudgetedSender, SendError};
use std::sync::Arc;
use store::BatchStore;

/// The one reply to a batch: the sender's `ReliableSender` only counts reply frames.

#[derive(Clone)]
pub struct PeerHandler {
    pub store: BatchStore,
    pub metrics: Arc<MempoolMetrics>,
    /// Requests wait for the helper within a byte budget; when it is spent this connection is
    /// not read until the helper takes some.
    pub tx_helper: BudgetedSender<HelperRequest>,
    /// Requests naming more digests are refused (`Parameters::max_request_digests`).
    pub max_request_digests: usize,
    pub quota: AuthorQuota,
    /// The member this connection authenticated as; `None` until then (and on an open port,
    /// as in unit tests, where no quota applies).
    pub author: Option<PublicKey>,
    /// With `--verify=attested`: the statements held, and the attester's queue.
    pub attesting: Option<PeerAttesting>,
    /// Latency samples: a new batch's are noted for its commit while it is in cache.
    pub samples: Option<SampleHooks>,
}

#[derive(Clone)]
pub struct PeerAttesting {
    pub table: Attestations,
    /// Batches to check wait here within a byte budget; when it is spent, this connection is
    /// not read (nor its batch acknowledged) until the attester takes some.
    pub tx_attester: BudgetedSender<AttesterInput>,
}

impl PeerHandler {
    fn reject(&self, why: String) -> HandlerError {
        MempoolMetrics::add(&self.metrics.rejected_frames, 1);
        HandlerError::Malformed(why)
    }

    /// Queues a batch new to this node for its attester, if this node is one of the batch's
    /// attesters. Only batches that come from their author are attested: a batch fetched from
    /// another member (for a block that names it) arrives too late to be worth a statement.
    async fn attest(&self, batch: Batch) -> Result<(), HandlerError> {
        let (Some(attesting), Some(author)) = (&self.attesting, self.author) else {
            return Ok(());
        };
        let table = &attesting.table;
        if !attesters(table.committee(), &batch.digest(), &author).contains(&table.me()) {
            return Ok(());
        }
        let size = batch.bytes().len();
        match attesting
            .tx_attester
            .send(AttesterInput { batch, author }, size)
            .await
        {
            // The attester is gone: the node is shutting down.
            Ok(()) | Err(SendError::Closed(_)) => Ok(()),
            Err(e @ SendError::TooLarge { .. }) => {
                Err(HandlerError::Other(format!("batch to attest: {e}")))
            }
        }
    }
}

impl MessageHandler for PeerHandler {
    async fn dispatch(&self, writer: &mut Writer, message: Bytes) -> Result<(), HandlerError> {
        let size = message.len();
        match MempoolMessage::decode(message).map_err(|e| self.reject(e.to_string()))? {
            MempoolMessage::Batch(bytes) => {
                let batch = Batch::parse(bytes).map_err(|e| self.reject(e.to_string()))?;
                let digest = batch.digest();
                // A batch we already hold costs nothing more (retransmissions, sync replies of
                // batches that since committed): store and count only new ones.
                let held = self
                    .store
                    .contains(&digest)
                    .map_err(|e| HandlerError::Other(e.to_string()))?;
                if !held {
                    let admission = match self.author {
                        Some(author) => self.quota.admit(author, digest),
                        None if self.quota.is_committed(&digest) => Admission::Committed,
                        None => Admission::Store,
                    };
                    match admission {
                        Admission::Store => {}
                        Admission::Refuse => {
                            MempoolMetrics::add(&self.metrics.refused_batches, 1);
                            writer.feed(Bytes::from_static(REFUSED)).await?;
                            return Ok(());
                        }
                        // Committed and collected: stored again it would never be collected.
                        // The sender is done with it all the same.
                        Admission::Committed => {
                            writer.feed(Bytes::from_static(ACK)).await?;
                            return Ok(());
                        }
                    }
                    self.store
                        .write(digest, batch.bytes().clone())
                        .await
                        .map_err(|e| HandlerError::Other(e.to_string()))?;
                    if let Some(samples) = &self.samples {
                        samples.note_received(&batch);
                    }
                    self.attest(batch).await?;
                }
                MempoolMetrics::add(&self.metrics.received_batches, 1);
                writer.feed(Bytes::from_static(ACK)).await?;
            }
            MempoolMessage::BatchRequest(digests, requestor) => {
                if digests.len() > self.max_request_digests {
                    return Err(self.reject(format!(
                        "a batch request names {} digests, more than {}",
                        digests.len(),
                        self.max_request_digests
                    )));
                }
                // Replies go to the requestor's address: on an authenticated connection it must
                // be the peer itself, or one member could aim batch replies at another.
                if self.author.is_some_and(|author| author != requestor) {
                    return Err(self.reject(format!(
                        "batch request on behalf of {requestor} from {:?}",
                        self.author
                    )));
                }
                match self.tx_helper.send((digests, requestor), size).await {
                    // The helper is gone: the node is shutting down.
                    Ok(()) | Err(SendError::Closed(_)) => {}
                    Err(e @ SendError::TooLarge { .. }) => {
                        return Err(HandlerError::Other(format!("batch request: {e}")))
                    }
                }
            }
            MempoolMessage::Attestation(statement) => {
                let Some(attesting) = &self.attesting else {
                    return Err(self.reject("an attestation, but this node does not attest".into()));
                };
                // Statements come from their attester, not relayed.
                if self
                    .author
                    .is_some_and(|author| author != statement.attester)
                {
                    return Err(self.reject(format!(
                        "attestation by {} from {:?}",
                        statement.attester, self.author
                    )));
                }
                if let Err(e) = attesting.table.insert(statement) {
                    MempoolMetrics::add(&self.metrics.attestations_refused, 1);
                    return Err(self.reject(e.to_string()));
                }
                MempoolMetrics::add(&self.metrics.attestations_received, 1);
            }
        }
        Ok(())
    }

    fn for_peer(&self, peer: PublicKey) -> Self {
        PeerHandler {
            author: Some(peer),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use batch::{BatchBuilder, SampleIndex};
    use crypto::{Digest, KeyPair};
    use futures::StreamExt;
    use network::{codec, Receiver, ReliableSender, DEFAULT_MAX_FRAME_SIZE};
    use plumbing::budgeted::{self, BudgetedReceiver};
    use plumbing::metered::ChannelMetrics;
    use std::net::SocketAddr;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;
    use tokio::net::TcpStream;
    use tokio_util::codec::{Framed, LengthDelimitedCodec};

    const DEADLINE: Duration = Duration::from_secs(10);

    /// The helper's input as the node makes it: its capacity and two maximum frames.
    fn helper_queue(
        budget: usize,
    ) -> (
        BudgetedSender<HelperRequest>,
        BudgetedReceiver<HelperRequest>,
        Arc<ChannelMetrics>,
    ) {
        budgeted::channel(1_000, budget)
    }

    /// A handler on an open port (no author yet) over a fresh store, handing requests to
    /// `tx_helper`.
    fn handler(tx_helper: BudgetedSender<HelperRequest>) -> PeerHandler {
        PeerHandler {
            store: store::Store::new().batches(),
            metrics: Arc::new(MempoolMetrics::default()),
            tx_helper,
            max_request_digests: 1_024,
            quota: AuthorQuota::new(1_000, 50),
            author: None,
            attesting: None,
            samples: None,
        }
    }

    async fn start() -> (
        SocketAddr,
        BatchStore,
        Arc<MempoolMetrics>,
        BudgetedReceiver<HelperRequest>,
    ) {
        let (address, store, metrics, rx_helper, _) =
            start_with_budget(2 * DEFAULT_MAX_FRAME_SIZE).await;
        (address, store, metrics, rx_helper)
    }

    async fn start_with_budget(
        budget: usize,
    ) -> (
        SocketAddr,
        BatchStore,
        Arc<MempoolMetrics>,
        BudgetedReceiver<HelperRequest>,
        Arc<ChannelMetrics>,
    ) {
        let (tx_helper, rx_helper, queue) = helper_queue(budget);
        let handler = handler(tx_helper);
        let (store, metrics) = (handler.store.clone(), handler.metrics.clone());
        (serve(handler).await, store, metrics, rx_helper, queue)
    }

    /// `handler` on a loopback port; returns its address.
    async fn serve(handler: PeerHandler) -> SocketAddr {
        let (address, _) = Receiver::spawn(
            "127.0.0.1:0".parse().expect("addr"),
            DEFAULT_MAX_FRAME_SIZE,
            handler,
        )
        .await
        .expect("bind");
        address
    }

    /// Sends the handler at `address` a batch of `txs` and waits for its ack; returns the batch.
    async fn send_acked_batch(address: SocketAddr, txs: &[&[u8]]) -> Batch {
        let mut builder = BatchBuilder::with_frame_prefix(&[super::super::message::BATCH_TAG], 64);
        for tx in txs {
            builder.push(tx);
        }
        let (batch, frame) = builder.seal_framed(1, 64);
        let mut sender = ReliableSender::new();
        let ack = sender.send(address, frame).await;
        let ack = tokio::time::timeout(DEADLINE, ack)
            .await
            .expect("acked in time")
            .expect("acked");
        assert_eq!(&ack[..], ACK);
        batch
    }

    /// Connects to the handler at `address` and sends it a request for `digests` on behalf of
    /// `requestor`; returns the open connection.
    async fn send_request(
        address: SocketAddr,
        digests: &[Digest],
        requestor: PublicKey,
    ) -> Framed<TcpStream, LengthDelimitedCodec> {
        let stream = TcpStream::connect(address).await.expect("connect");
        let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
        client
            .send(MempoolMessage::encode_request(digests, &requestor))
            .await
            .expect("send");
        client
    }

    async fn assert_closed(mut stream: TcpStream) {
        let mut buf = [0u8; 16];
        loop {
            match tokio::time::timeout(DEADLINE, stream.read(&mut buf))
                .await
                .expect("closed in time")
            {
                Ok(0) | Err(_) => return,
                Ok(_) => continue,
            }
        }
    }

    #[tokio::test]
    async fn stores_and_acks_a_valid_batch() {
        let (address, store, metrics, _rx) = start().await;
        let batch = send_acked_batch(address, &[b"tx"]).await;
        assert_eq!(
            store.read(&batch.digest()).expect("read").as_ref(),
            Some(batch.bytes())
        );
        assert_eq!(metrics.received_batches.load(Ordering::Relaxed), 1);
        assert_eq!(metrics.rejected_frames.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn a_stored_batch_has_its_samples_noted_for_the_commit() {
        let index = SampleIndex::default();
        let (tx_helper, _rx_helper, _) = helper_queue(2 * DEFAULT_MAX_FRAME_SIZE);
        let handler = PeerHandler {
            samples: Some(SampleHooks {
                detect: Arc::new(|tx: &[u8]| {
                    let id = tx.strip_prefix(b"sample ")?;
                    Some(String::from_utf8_lossy(id).into_owned())
                }),
                report: Arc::new(|_, _, _| {}),
                index: Some(index.clone()),
            }),
            ..handler(tx_helper)
        };
        let address = serve(handler).await;
        let batch = send_acked_batch(address, &[b"tx", b"sample 9"]).await;
        assert_eq!(index.take(&batch.digest()), Some(vec!["9".to_string()]));
    }

    #[tokio::test]
    async fn rejects_malformed_messages_and_closes_the_connection() {
        let (address, store, metrics, _rx) = start().await;
        let malformed: [&'static [u8]; 3] = [
            &[0, 1, 2, 3],    // a batch shorter than its header
            &[1, 0xff, 0xff], // an undecodable batch request
            &[7],             // an unknown tag
        ];
        for (i, frame) in malformed.into_iter().enumerate() {
            let stream = TcpStream::connect(address).await.expect("connect");
            let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
            client.send(Bytes::from_static(frame)).await.expect("send");
            assert!(
                tokio::time::timeout(DEADLINE, client.next())
                    .await
                    .expect("answered in time")
                    .is_none_or(|reply| reply.is_err()),
                "no ack for a malformed message"
            );
            assert_closed(client.into_inner()).await;
            assert_eq!(
                metrics.rejected_frames.load(Ordering::Relaxed),
                i as u64 + 1
            );
        }
        assert!(store.is_empty());
        assert_eq!(metrics.received_batches.load(Ordering::Relaxed), 0);
    }

    #[tokio::test]
    async fn passes_batch_requests_to_the_helper() {
        let (address, _store, _metrics, mut rx) = start().await;
        let digests = vec![Digest::of(b"wanted")];
        let requestor = KeyPair::from_seed(3).name;
        let client = send_request(address, &digests, requestor).await;
        let got = tokio::time::timeout(DEADLINE, rx.recv())
            .await
            .expect("in time");
        assert_eq!(got, Some((digests, requestor)));
        drop(client);
    }

    /// A request may name at most `max_request_digests` digests (a reply is a
    /// batch per digest); a longer one is refused, counted and closes the connection.
    #[tokio::test]
    async fn byzantine_request_over_the_digest_cap_is_refused() {
        let (address, _store, metrics, mut rx) = start().await;
        let digests = vec![Digest::of(b"wanted"); 1_025];
        let requestor = KeyPair::from_seed(3).name;
        let client = send_request(address, &digests, requestor).await;
        assert_closed(client.into_inner()).await;
        assert_eq!(metrics.rejected_frames.load(Ordering::Relaxed), 1);
        assert!(rx.try_recv().is_none(), "the request reached the helper");
    }

    /// A member sends batch requests faster than the helper takes them (here it takes none).
    /// Counted in messages, up to `channel_capacity` (1,000) requests of 32 KB waited; now they
    /// wait within the queue's byte budget, the connection is not read meanwhile, and once the
    /// helper takes them every request arrives, in order: back-pressure, nothing dropped.
    #[tokio::test]
    async fn byzantine_batch_requests_wait_within_the_helper_budget() {
        let requestor = KeyPair::from_seed(3).name;
        let request = move |i: u32| {
            let digests: Vec<Digest> = (0..1_024u32)
                .map(|d| Digest::of(&[i.to_le_bytes(), d.to_le_bytes()].concat()))
                .collect();
            MempoolMessage::encode_request(&digests, &requestor)
        };
        let size = request(0).len();
        let budget = 3 * size;
        let (address, _store, _metrics, mut rx, queue) = start_with_budget(budget).await;
        let stream = TcpStream::connect(address).await.expect("connect");
        let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
        let count = 20;
        let writer = tokio::spawn(async move {
            for i in 0..count {
                client.send(request(i)).await.expect("send");
            }
            client
        });
        // The handler waits for room once three requests are queued.
        tokio::time::timeout(DEADLINE, async {
            while queue.full() == 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the helper's queue fills");
        assert_eq!(rx.len(), 3, "requests queued beyond the byte budget");
        let seen = queue.snapshot();
        assert_eq!(seen.budget_bytes, budget as u64);
        for i in 0..count {
            let (digests, from) = tokio::time::timeout(DEADLINE, rx.recv())
                .await
                .expect("in time")
                .expect("the handler is alive");
            assert_eq!(from, requestor);
            assert_eq!(MempoolMessage::encode_request(&digests, &from), request(i));
        }
        let _client = writer.await.expect("every request was written");
    }

    /// A member may ask for batches for itself only: replies go to the named requestor, so a
    /// request naming another member would aim the replies at it.
    #[tokio::test]
    async fn byzantine_request_on_behalf_of_another_member_is_refused() {
        use network::handshake::{self, Credentials, Gate, Purpose};
        use network::ReceiverConfig;
        let members: Vec<_> = (0..3).map(KeyPair::from_seed).collect();
        let (tx_helper, mut rx, _) = helper_queue(2 * DEFAULT_MAX_FRAME_SIZE);
        let handler = handler(tx_helper);
        let metrics = handler.metrics.clone();
        let gate = Gate::new(
            members[0].name,
            Purpose::Mempool,
            members.iter().map(|k| k.name),
        );
        let (address, _) = Receiver::spawn_with(
            "127.0.0.1:0".parse().expect("addr"),
            ReceiverConfig::gated(DEFAULT_MAX_FRAME_SIZE, gate),
            handler,
        )
        .await
        .expect("bind");
        let credentials =
            Credentials::new(members[1].name, members[1].secret.clone(), Purpose::Mempool);
        let digests = vec![Digest::of(b"wanted")];
        for (requestor, honest) in [(members[1].name, true), (members[2].name, false)] {
            let mut stream = TcpStream::connect(address).await.expect("connect");
            handshake::dial(&mut stream, &credentials, &members[0].name)
                .await
                .expect("member");
            let mut client = Framed::new(stream, codec(DEFAULT_MAX_FRAME_SIZE));
            client
                .send(MempoolMessage::encode_request(&digests, &requestor))
                .await
                .expect("send");
            if honest {
                let got = tokio::time::timeout(DEADLINE, rx.recv())
                    .await
                    .expect("in time");
                assert_eq!(got, Some((digests.clone(), requestor)));
            } else {
                assert_closed(client.into_inner()).await;
                assert_eq!(metrics.rejected_frames.load(Ordering::Relaxed), 1);
                assert!(rx.try_recv().is_none());
            }
        }
    }
}
