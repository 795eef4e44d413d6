//! Answers peers' batch requests with the batches this node holds.

use super::message::MempoolMessage;
use crate::config::Committee;
use crate::network::SimpleSender;
use crate::store::BatchStore;
use crypto::{Digest, PublicKey};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, warn};

/// The digests a peer wants, and who it is.
pub type HelperRequest = (Vec<Digest>, PublicKey);

pub struct Helper {
    committee: Committee,
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
    ) -> JoinHandle<()> {
        let helper = Helper {
            committee,
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
            for digest in digests {
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
            .expect("write");
        // A block under another digest, asked for as a batch, is not served.
        let block = Digest::of(b"block");
        store
            .blocks()
            .write(block, Bytes::from_static(b"block bytes"))
            .expect("write");
        let store = store.batches();
        let (tx, rx) = mpsc::channel(8);
        Helper::spawn(committee, store, rx, SimpleSender::new());

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
