//! Every consensus message, through the decoder the consensus port uses on receipt
//! (`wire::decode`) and the one that reads stored blocks back (`wire::decode_block`), then
//! through the checks the core runs before trusting a message.
//!
//! Asserts: no panic; decoding holds memory proportional to the input; whatever decodes
//! re-encodes to exactly the input (one encoding per message).
#![no_main]

use consensus_fuzz::alloc::{assert_bounded, peak_during};
use consensus_fuzz::committee;
use hotstuff::wire;
use hotstuff::ConsensusMessage;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (decoded, peak) = peak_during(|| wire::decode(data));
    assert_bounded("consensus message", data.len(), peak, 0);
    if let Ok(message) = decoded {
        let again = wire::encode(&message).expect("a decoded message re-encodes");
        assert_eq!(&again[..], data, "a second encoding of {message:?}");
        let committee = committee();
        let _ = match &message {
            ConsensusMessage::Propose(block) => block.verify(committee),
            ConsensusMessage::Vote(vote) => vote.verify(committee),
            ConsensusMessage::Timeout(timeout) => timeout.verify(committee),
            ConsensusMessage::TC(tc) => tc.verify(committee),
            ConsensusMessage::Checkpoint(reply) => reply.verify(committee),
            ConsensusMessage::Chain(blocks) => blocks.iter().try_for_each(|b| b.verify(committee)),
            // The act is the requester's own; the fuzzer has no requester, so any key exercises
            // the same signature path.
            ConsensusMessage::RecordReply(reply) => reply
                .act
                .as_ref()
                .map_or(Ok(()), |act| act.verify(&reply.author))
                .and_then(|()| reply.high_qc.verify(committee))
                .and_then(|()| {
                    reply
                        .high_tc
                        .as_ref()
                        .map_or(Ok(()), |tc| tc.verify(committee))
                }),
            ConsensusMessage::SyncRequest(..)
            | ConsensusMessage::CheckpointRequest(..)
            | ConsensusMessage::RecordRequest(..) => Ok(()),
        };
    }

    let (block, peak) = peak_during(|| wire::decode_block(data));
    assert_bounded("stored block", data.len(), peak, 0);
    if let Ok(block) = block {
        let again = wire::encode_block(&block).expect("a decoded block re-encodes");
        assert_eq!(&again[..], data, "a second encoding of {block:?}");
    }
});
