use crate::digest::Digest;
use crate::keys::SecretKey;
use crate::signature::Signature;
use tokio::sync::{mpsc, oneshot};

/// Owns the node's secret key and signs digests on request, so the key lives in one task and
/// the consensus actors hold only a cheap, cloneable handle.
#[derive(Clone)]
pub struct SignatureService {
    channel: mpsc::Sender<(Digest, oneshot::Sender<Signature>)>,
}

impl SignatureService {
    pub fn new(secret: SecretKey) -> Self {
        let (tx, mut rx) = mpsc::channel::<(Digest, oneshot::Sender<Signature>)>(100);
        tokio::spawn(async move {
            while let Some((digest, reply)) = rx.recv().await {
                let _ = reply.send(Signature::new(&digest, &secret));
            }
        });
        SignatureService { channel: tx }
    }

    /// Signs `digest`. Panics only if the signing task is gone, which happens only when the
    /// runtime is shutting down.
    pub async fn request_signature(&self, digest: Digest) -> Signature {
        let (tx, rx) = oneshot::channel();
        self.channel
            .send((digest, tx))
            .await
            .expect("signature service stopped");
        rx.await.expect("signature service dropped a request")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KeyPair;

    #[tokio::test]
    async fn service_signs_with_its_key() {
        let kp = KeyPair::from_seed(9);
        let service = SignatureService::new(kp.secret.clone());
        let digest = Digest::of(b"vote");
        let sig = service.request_signature(digest).await;
        assert!(sig.verify(&digest, &kp.name).is_ok());
    }
}
