//! Every mempool message, through the decoders the mempool port uses on receipt:
//! `MempoolMessage::decode`, then `Batch::parse` for a batch (plain, or from its author).
//!
//! Asserts: no panic; decoding holds memory proportional to the input; a parsed batch yields
//! exactly `tx_count` transactions that tile its body; a batch request and an attestation
//! re-encode to the input.
#![no_main]

use bytes::Bytes;
use batch::{Batch, HEADER_LEN, TX_PREFIX_LEN};
use mempool::MempoolMessage;
use consensus_fuzz::alloc::{assert_bounded, peak_during};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Bytes::copy_from_slice(data);
    let (decoded, peak) = peak_during(|| MempoolMessage::decode(frame.clone()));
    assert_bounded("mempool message", data.len(), peak, 0);
    match decoded {
        Ok(MempoolMessage::Batch(bytes)) => {
            batch(&bytes, &frame, |batch| MempoolMessage::encode_batch(batch))
        }
        Ok(MempoolMessage::Authored(seq, bytes)) => {
            batch(&bytes, &frame, |batch| MempoolMessage::encode_authored(seq, batch))
        }
        Ok(MempoolMessage::BatchRequest(digests, requestor)) => {
            let again = MempoolMessage::encode_request(&digests, &requestor);
            assert_eq!(again, frame, "a second encoding of a batch request");
        }
        Ok(MempoolMessage::Attestation(statement)) => {
            let again = MempoolMessage::encode_attestation(&statement);
            assert_eq!(again, frame, "a second encoding of an attestation");
            // Checking it must not panic, whatever it holds.
            let _ = statement.verify(u32::MAX);
        }
        Err(_) => {}
    }
});

/// A batch's body (`bytes`, from `frame`), which `encode` frames again.
fn batch(bytes: &Bytes, frame: &Bytes, encode: impl Fn(&[u8]) -> Bytes) {
    let (parsed, peak) = peak_during(|| Batch::parse(bytes.clone()));
    assert_bounded("batch", bytes.len(), peak, 0);
    if let Ok(batch) = parsed {
        let mut count = 0u64;
        let mut length = HEADER_LEN;
        for tx in batch.transactions() {
            count += 1;
            length += TX_PREFIX_LEN + tx.len();
        }
        assert_eq!(count, u64::from(batch.tx_count()));
        assert_eq!(length, bytes.len());
        assert_eq!(&encode(batch.bytes()), frame);
    }
}
