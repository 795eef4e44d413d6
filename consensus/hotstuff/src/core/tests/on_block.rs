//! Votes and proposals as they arrive: what is checked, in which order, and what a Byzantine
//! member's messages cost the node.

use super::*;
use crate::messages::Vote;

/// A member signs votes and timeouts for rounds far ahead. Each is a valid
/// message, but none may create an aggregator entry the node keeps until it reaches them.
#[tokio::test]
async fn byzantine_far_future_votes_and_timeouts_are_not_buffered() {
    let mut h = harness(Parameters::default());
    let byzantine = h.keys[3].clone();
    for round in 1_000..1_500 {
        let _ = h
            .core
            .handle_vote(vote(Digest::of(b"x"), round, &byzantine))
            .await;
        let _ = h
            .core
            .handle_timeout(timeout(round, QC::genesis(), &byzantine))
            .await;
    }
    assert_eq!(h.core.aggregator.rounds(), 0);
}

/// `max_block_digests` holds for received proposals, not only our own.
#[tokio::test]
async fn byzantine_oversized_proposal_is_rejected_on_receipt() {
    let parameters = Parameters {
        max_block_digests: 4,
        ..Parameters::default()
    };
    let mut h = harness(parameters);
    let payload: Vec<Digest> = (0..5u8).map(|i| Digest::of(&[i])).collect();
    let block = h.block(None, 1, payload);
    assert!(matches!(
        h.core.handle_proposal(block).await,
        Err(ConsensusError::Message(MessageError::Malformed(_)))
    ));
    let fits = h.block(None, 1, (0..4u8).map(|i| Digest::of(&[i])).collect());
    assert!(h.core.handle_proposal(fits).await.is_ok());
}

/// A member floods the consensus port with large proposals while the core is stalled: blocked
/// on a full commit channel (its committer waits for an application that takes nothing). Each
/// proposal is acknowledged as it is read and waits in the core's input queue. Counted in
/// messages alone, that queue took up to `channel_capacity` of them (1,000 of up to 4 MB); now
/// it holds at most its byte budget, the port stops reading the connection, and once the core
/// moves again every proposal still reaches it: back-pressure, nothing dropped.
#[tokio::test]
async fn byzantine_large_proposals_wait_within_the_core_input_budget() {
    use crate::handler::ConsensusHandler;
    use futures::{SinkExt, StreamExt};
    use network::{codec, Receiver};
    use std::sync::atomic::AtomicUsize;

    let parameters = Parameters {
        max_frame_size: 1 << 20,
        ..Parameters::default()
    };
    let budget = parameters.queue_budget_bytes();
    let max_frame_size = parameters.max_frame_size;
    let h = harness_committing_into(1, parameters);
    let Harness {
        core,
        keys,
        mut rx_commit,
        tx_message,
        ..
    } = h;
    // The committer is behind: the commit channel is full before anything commits.
    core.tx_commit
        .send(ToCommitter::Commit(Block::genesis()))
        .await
        .expect("room for one");
    let (tx_helper, _rx_helper) = mpsc::channel(8);
    let handler = ConsensusHandler {
        tx_core: tx_message.clone(),
        tx_helper,
        peer: None,
    };
    let (address, _port) = Receiver::spawn(
        "127.0.0.1:0".parse().expect("address"),
        max_frame_size,
        handler,
    )
    .await
    .expect("bind");
    let metrics = core.metrics.clone();
    let committee = core.committee.clone();
    let leader = |round: Round| {
        keys.iter()
            .find(|k| k.name == committee.leader(round))
            .expect("a member leads")
            .clone()
    };
    let _core = tokio::spawn(core.run());

    // A chain of three rounds commits round 1: the core blocks handing it to the committer.
    let stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    let (mut sink, mut acks) =
        tokio_util::codec::Framed::new(stream, codec(max_frame_size)).split();
    let mut parent: Option<Block> = None;
    for round in 1..=3 {
        let qc = match &parent {
            None => QC::genesis(),
            Some(p) => qc(p.digest(), p.round, &keys[..3]),
        };
        let block = signed_block(qc, None, round, vec![], &leader(round));
        let frame = wire::encode(&ConsensusMessage::Propose(block.clone())).expect("encode");
        sink.send(frame).await.expect("send");
        parent = Some(block);
    }
    for _ in 0..3 {
        acks.next().await.expect("open").expect("ack");
    }
    let deadline = Duration::from_secs(20);
    tokio::time::timeout(deadline, async {
        while metrics.committed_blocks.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("round 1 commits");

    // Now the flood: proposals of 18,000 digests, 576 KB each, far more than the budget holds.
    let count = 40;
    let flood: Vec<bytes::Bytes> = (0..count)
        .map(|i| {
            let block = Block {
                round: 100 + i as Round,
                payload: (0..18_000u32)
                    .map(|d| Digest::of(&d.to_le_bytes()))
                    .collect(),
                ..Block::default()
            };
            wire::encode(&ConsensusMessage::Propose(block)).expect("encode")
        })
        .collect();
    let size = flood[0].len();
    let input = tx_message.metrics().clone();
    let acked = Arc::new(AtomicUsize::new(0));
    let _writer = tokio::spawn(async move {
        for frame in flood {
            if sink.send(frame).await.is_err() {
                return;
            }
        }
    });
    let _reader = tokio::spawn({
        let acked = acked.clone();
        async move {
            while let Some(Ok(_)) = acks.next().await {
                acked.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    // Until the port stops reading (the handler waits for room in the core's input, its last
    // proposal acknowledged), or it took them all.
    tokio::time::timeout(deadline, async {
        loop {
            let taken = acked.load(Ordering::Relaxed);
            if taken == count || (input.full() > 0 && taken > tx_message.len()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the port takes every proposal or stops reading");
    let taken = acked.load(Ordering::Relaxed);
    assert!(
        taken <= budget / size + 1,
        "{taken} proposals of {size} bytes taken while the core was stalled; budget {budget}"
    );
    assert!(tx_message.queued_bytes() <= budget);
    assert_eq!(
        tx_message.len(),
        taken - 1,
        "one waits in the handler for room"
    );

    // The committer takes a block: the core moves on, and takes every proposal in turn (and
    // rejects it: too many digests). The port read them all, none was dropped.
    let _ = rx_commit.recv().await;
    tokio::time::timeout(deadline, async {
        while acked.load(Ordering::Relaxed) < count || !tx_message.is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("every proposal reaches the core once it moves");
    assert_eq!(input.snapshot().sent, 3 + count as u64);
}

/// With more than f Byzantine members (here the test signs with three of
/// the four keys) two conflicting blocks can both get a commit certificate. The node must
/// notice, refuse to commit the second and halt, not log and carry on.
#[tokio::test]
async fn byzantine_quorum_fork_halts_the_node() {
    let mut h = harness(Parameters::default());
    for block in h.chain(None, 1, 3) {
        h.core.handle_proposal(block).await.expect("valid");
    }
    assert_eq!(h.committed(), vec![1]);
    // Rounds 4..=6 restart from genesis (after a TC of round 3 that reports no QC, which only
    // a Byzantine quorum can sign): round 6 certifies 5, which certifies 4, so 4 "commits"
    // although it does not extend the committed block of round 1.
    let fork_start = h.block_after_timeout(None, 4);
    let mut fork = vec![fork_start.clone()];
    fork.extend(h.chain(Some(&fork_start), 5, 6));
    let mut outcome = Ok(());
    for block in fork.clone() {
        outcome = outcome.and(h.core.handle_proposal(block).await);
    }
    assert_eq!(h.committed(), Vec::<Round>::new(), "the fork was committed");
    assert!(matches!(
        outcome,
        Err(ConsensusError::Fatal(FatalError::Fork { round: 4, .. }))
    ));
    // The run loop stops on it and publishes it for the node binary to exit on.
    let fork = h.block(Some(&fork[2]), 7, vec![]);
    let tx_message = h.tx_message.clone();
    let mut fatal = h.rx_fatal.clone();
    let core = tokio::spawn(h.core.run());
    deliver(&tx_message, ConsensusMessage::Propose(fork)).await;
    tokio::time::timeout(Duration::from_secs(5), fatal.wait_for(Option::is_some))
        .await
        .expect("fatal error published")
        .expect("sender alive until then");
    tokio::time::timeout(Duration::from_secs(5), core)
        .await
        .expect("the core stopped")
        .expect("no panic");
}

/// `round + 1` must never overflow. A single vote of round u64::MAX is
/// outside any window; even with the window open all the way, a quorum of such votes (f+1
/// Byzantine signers are not needed for the QC check, only for this test) must not panic.
#[tokio::test]
async fn byzantine_votes_at_round_max_are_rejected() {
    let mut h = harness(Parameters::default());
    let hash = Digest::of(b"x");
    let byzantine = h.keys[3].clone();
    assert!(h
        .core
        .handle_vote(vote(hash, Round::MAX, &byzantine))
        .await
        .is_err());

    let mut h = harness(Parameters {
        max_rounds_ahead: Round::MAX,
        ..Parameters::default()
    });
    let signers = h.keys[1..].to_vec();
    for k in &signers {
        let _ = h.core.handle_vote(vote(hash, Round::MAX, k)).await;
    }
    assert_eq!(h.core.pacemaker.round(), 1);
}

/// A replayed vote or timeout is recognised as a duplicate before its
/// signature is checked (a corrupted signature shows the order), so replays cost no
/// signature verification.
#[tokio::test]
async fn byzantine_replayed_votes_and_timeouts_cost_no_signature_check() {
    let mut h = harness(Parameters::default());
    let voter = h.keys[1].clone();
    let original = vote(Digest::of(b"x"), 1, &voter);
    h.core
        .handle_vote(original.clone())
        .await
        .expect("first vote");
    let mut replay = original;
    replay.signature = vote(Digest::of(b"y"), 1, &voter).signature;
    assert!(matches!(
        h.core.handle_vote(replay).await,
        Err(ConsensusError::Aggregator(AggregatorError::AuthorityReuse(
            _
        )))
    ));

    let first = timeout(1, QC::genesis(), &voter);
    h.core
        .handle_timeout(first.clone())
        .await
        .expect("first timeout");
    let mut replay = first;
    replay.signature = timeout(2, QC::genesis(), &voter).signature;
    assert!(matches!(
        h.core.handle_timeout(replay).await,
        Err(ConsensusError::Aggregator(AggregatorError::AuthorityReuse(
            _
        )))
    ));
    // A forged vote in someone's name does not use up that member's vote either.
    let honest = h.keys[2].clone();
    let mut forged = vote(Digest::of(b"x"), 1, &honest);
    forged.signature = vote(Digest::of(b"y"), 1, &honest).signature;
    assert!(h.core.handle_vote(forged).await.is_err());
    h.core
        .handle_vote(vote(Digest::of(b"x"), 1, &honest))
        .await
        .expect("the real vote still counts");
}

/// The leader gets every member's vote and needs 2f+1: a vote for a block whose QC is already
/// made is dropped before its signature is checked (a corrupted signature shows the order).
#[tokio::test]
async fn a_vote_after_the_qc_costs_no_signature_check() {
    let mut h = harness(Parameters::default());
    let hash = Digest::of(b"x");
    for voter in &h.keys[..3] {
        h.core
            .handle_vote(vote(hash, 1, voter))
            .await
            .expect("valid");
    }
    assert_eq!(h.core.voting.high_qc().round, 1);
    let mut late = vote(hash, 1, &h.keys[3]);
    late.signature = vote(Digest::of(b"y"), 1, &h.keys[3]).signature;
    h.core.handle_vote(late).await.expect("dropped unchecked");
    // A vote for another block of the round is still checked.
    let mut other = vote(Digest::of(b"z"), 1, &h.keys[3]);
    other.signature = vote(Digest::of(b"y"), 1, &h.keys[3]).signature;
    assert!(matches!(
        h.core.handle_vote(other).await,
        Err(ConsensusError::Message(MessageError::InvalidSignature))
    ));
}

/// Rejoin rule 1 for blocks: a block's certificates move us before its own signature is
/// checked: a certificate proves itself whoever relays it. (A block's round is the round after
/// its certificate's, so once they moved us the block is never beyond the window.)
#[tokio::test]
async fn a_blocks_certificates_move_the_node_before_its_signature_is_checked() {
    let mut h = harness(Parameters::default());
    let high = qc(Digest::of(b"b299"), 299, &h.keys[..3]);
    let timed_out = tc(999, &high, &h.keys[..3]);
    let mut block = signed_block(
        high.clone(),
        Some(timed_out),
        1_000,
        vec![],
        h.leader(1_000),
    );
    block.signature = h.block(None, 1, vec![]).signature;
    assert!(matches!(
        h.core.handle_proposal(block).await,
        Err(ConsensusError::Message(MessageError::InvalidSignature))
    ));
    assert_eq!(h.core.pacemaker.round(), 1_000);
    assert_eq!(*h.core.voting.high_qc(), high);
}

/// Blocks a peer sends back for our request come newest first; taken oldest first, each finds
/// its parent stored, so the stretch is stored and committed at once, none left waiting parked
/// for the next.
#[tokio::test]
async fn a_chain_of_missing_blocks_is_taken_oldest_first() {
    let mut h = harness(Parameters::default());
    let chain = h.chain(None, 1, 10);
    let newest_first: Vec<Block> = chain.iter().rev().cloned().collect();
    h.core.handle_chain(newest_first).await.expect("valid");
    assert_eq!(h.committed(), (1..=8).collect::<Vec<Round>>());
    assert_eq!(
        h.core
            .synchronizer
            .counters()
            .parked
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
}

/// The QC of a round we voted in is checked without our own vote: the entry equal to the vote we
/// cast is taken as made (a planted "vote" with a signature nobody could verify shows it is not
/// checked), while a different signature under our key, or a bad one of another member, is
/// still refused.
#[tokio::test]
async fn our_own_vote_in_a_qc_is_not_checked_again() {
    let mut h = harness(Parameters::default());
    let hash = Digest::of(b"b1");
    let mut certified = qc(hash, 1, &h.keys[..3]);
    let ours = &mut certified.votes[0];
    assert_eq!(ours.0, h.keys[0].name);
    // What we "cast": a signature of another message, so a check of it would fail.
    ours.1 = vote(Digest::of(b"elsewhere"), 1, &h.keys[0]).signature;
    h.core.voting.remember_vote(Vote {
        hash,
        round: 1,
        author: h.keys[0].name,
        signature: ours.1,
    });
    assert_eq!(h.core.check_qc(&certified), Ok(()));
    // Anyone else's QC check (no vote of theirs in it) does check that entry.
    assert_eq!(
        certified.verify(&h.core.committee),
        Err(MessageError::InvalidSignature)
    );

    // Our key with a signature we did not cast is checked.
    let mut forged = qc(hash, 1, &h.keys[..3]);
    forged.votes[0].1 = vote(Digest::of(b"other"), 1, &h.keys[0]).signature;
    assert_eq!(
        h.core.check_qc(&forged),
        Err(MessageError::InvalidSignature)
    );
    // Our vote trusted, a bad signature of another member still fails the QC.
    let mut bad_other = certified.clone();
    bad_other.votes[1].1 = vote(Digest::of(b"other"), 1, &h.keys[1]).signature;
    assert_eq!(
        h.core.check_qc(&bad_other),
        Err(MessageError::InvalidSignature)
    );
    // Our vote is only trusted in the QC of the block and round we voted for.
    let mut other_round = qc(hash, 2, &h.keys[..3]);
    other_round.votes[0].1 = certified.votes[0].1;
    assert_eq!(
        h.core.check_qc(&other_round),
        Err(MessageError::InvalidSignature)
    );
}

/// The leader of the next round hands its own vote to itself: it is not checked, while the same
/// bytes under any other round or block would be.
#[tokio::test]
async fn the_next_leader_does_not_check_its_own_vote() {
    let mut h = harness(Parameters::default());
    let hash = Digest::of(b"b1");
    let mut ours = vote(hash, 1, &h.keys[0]);
    ours.signature = vote(Digest::of(b"elsewhere"), 1, &h.keys[0]).signature;
    h.core.voting.remember_vote(ours.clone());
    h.core
        .handle_vote(ours.clone())
        .await
        .expect("ours, taken as made");
    assert!(h.core.aggregator.has_voted(1, &h.keys[0].name));
    let mut replayed = ours;
    replayed.round = 2;
    assert!(matches!(
        h.core.handle_vote(replayed).await,
        Err(ConsensusError::Message(MessageError::InvalidSignature))
    ));
}
