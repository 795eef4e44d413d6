//! Answers peers' batch requests with the batches this node holds.

use super::message::MempoolMessage;
use crate::config::Committee;
use crate::network::SimpleSender;
use crate::store::BatchStore;
use crypto::{Digest, PublicKey};
use std::collections::HashSet;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// The digests a peer wants, and who it is.
pub type HelperRequest = (Vec<Digest>, PublicKey);

pub struct Helper {
    committee: Committee,
    /// Most distinct digests served per request (`Parameters::max_request_digests`).
    max_request_digests: usize,
    store: BatchStore,
    rx_requests: mpsc::Receiver<HelperRequest>,
    /// Best effort: a requestor that misses an answer asks again after its retry delay.
    network: SimpleSender,
}

impl Helper {
    pub fn spawn(
        committee: Committee,
        store: BatchStore,
        rx_requests: mpsc::Receiver<HelperRequest>,
        network: SimpleSender,
        max_request_digests: usize,
    ) -> JoinHandle<()> {
        let helper = Helper {
            committee,
            max_request_digests,
            store,
            rx_requests,
            network,
        };
        tokio::spawn(helper.run())
    }

    async fn run(mut self) {
        while let Some((digests, requestor)) = self.rx_requests.recv().await {
            let Some(address) = self
                .committee
                .authority(&requestor)
                .map(|a| a.mempool_address)
            else {
                warn!("ignoring a batch request from unknown authority {requestor}");
                continue;
            };
            // One reply per distinct digest, and no more than the cap: a request is a few bytes
            // per digest while a reply is a whole batch, so repeats would amplify a requestor's
            // bandwidth many thousand times over (and flood the sender's queue, crowding out
            // honest replies). The peer handler already refuses requests over the cap; the
            // truncation here keeps the helper safe on its own.
            let mut seen = HashSet::with_capacity(digests.len().min(self.max_request_digests));
            let distinct = digests
                .into_iter()
                .filter(|digest| seen.insert(*digest))
                .take(self.max_request_digests);
            for digest in distinct {
                // Batches we do not hold are skipped: the requestor retries with other peers.
                // Only the batch namespace is read, so a block (or anything else stored under
                // the same digest) is never served as a batch.
                match self.store.read(&digest) {
                    Ok(Some(batch)) => {
                        let frame = MempoolMessage::encode_batch(&batch);
                        self.network.send(address, frame).await;
                    }
                    Ok(None) => debug!("cannot serve batch {digest}: not held"),
                    Err(e) => warn!("cannot serve batch {digest}: {e}"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Authority;
    use crate::network::codec;
    use bytes::Bytes;
    use crypto::KeyPair;
    use futures::StreamExt;
    use std::time::Duration;
    use tokio::net::TcpListener;
    use tokio_util::codec::FramedRead;

    /// Issue 12 item 5: a request naming one digest 260,000 times made 260,000 copies of the
    /// batch (as many as the sender's queue took). One reply per distinct digest now.
    #[tokio::test]
    async fn byzantine_repeated_digests_get_one_reply_each() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        let requestor = KeyPair::from_seed(1).name;
        let authority = Authority {
            stake: 1,
            consensus_address: address,
            mempool_address: address,
            transactions_address: address,
        };
        let committee = Committee {
            authorities: [(requestor, authority)].into_iter().collect(),
        };
        let store = crate::store::Store::new().batches();
        let (held, last) = (Digest::of(b"held"), Digest::of(b"last"));
        store
            .write(held, Bytes::from_static(b"held batch"))
            .await
            .expect("write");
        store
            .write(last, Bytes::from_static(b"last batch"))
            .await
            .expect("write");
        let (tx, rx) = mpsc::channel(8);
        Helper::spawn(committee, store, rx, SimpleSender::new(), 1_024);
        tx.send((vec![held; 260_000], requestor))
            .await
            .expect("send");
        // Replies go out in order on one connection: once `last` arrives, every reply to the
        // first request has.
        tx.send((vec![last], requestor)).await.expect("send");
        let (socket, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("connected in time")
            .expect("accept");
        let mut frames = FramedRead::new(socket, codec(1024));
        let mut copies = 0;
        loop {
            let frame = tokio::time::timeout(Duration::from_secs(10), frames.next())
                .await
                .expect("in time")
                .expect("a frame")
                .expect("valid");
            match MempoolMessage::decode(frame.freeze()).expect("decodes") {
                MempoolMessage::Batch(bytes) if &bytes[..] == b"held batch" => copies += 1,
                MempoolMessage::Batch(bytes) if &bytes[..] == b"last batch" => break,
                other => panic!("unexpected reply {other:?}"),
            }
        }
        assert_eq!(copies, 1, "one reply per distinct digest");
    }

    #[tokio::test]
    async fn sends_held_batches_to_the_requestor_only() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("addr");
        let requestor = KeyPair::from_seed(1).name;
        let authority = Authority {
            stake: 1,
            consensus_address: address,
            mempool_address: address,
            transactions_address: address,
        };
        let committee = Committee {
            authorities: [(requestor, authority)].into_iter().collect(),
        };
        let store = crate::store::Store::new();
        let held = Digest::of(b"held");
        store
            .batches()
            .write(held, Bytes::from_static(b"batch"))
            .await
            .expect("write");
        // A block under another digest, asked for as a batch, is not served.
        let block = Digest::of(b"block");
        store
            .blocks()
            .write(block, Bytes::from_static(b"block bytes"))
            .await
            .expect("write");
        let store = store.batches();
        let (tx, rx) = mpsc::channel(8);
        Helper::spawn(committee, store, rx, SimpleSender::new(), 1_024);

        // An unknown requestor is ignored; a known one gets the batch it asked for and we hold.
        tx.send((vec![held], KeyPair::from_seed(2).name))
            .await
            .expect("send");
        tx.send((vec![Digest::of(b"missing"), block, held], requestor))
            .await
            .expect("send");
        let (socket, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
            .await
            .expect("connected in time")
            .expect("accept");
        let mut frames = FramedRead::new(socket, codec(1024));
        let frame = tokio::time::timeout(Duration::from_secs(10), frames.next())
            .await
            .expect("in time")
            .expect("a frame")
            .expect("valid");
        assert_eq!(
            MempoolMessage::decode(frame.freeze()).expect("decodes"),
            MempoolMessage::Batch(Bytes::from_static(b"batch"))
        );
    }
}
