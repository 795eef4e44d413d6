//! Four mempools on loopback, each checking its clients' transactions before it seals them: a
//! client's forgeries stop at the node it sent them to.

use super::*;
use attest::{Conduct, Verdict};
use std::sync::atomic::AtomicU64;

/// The stand-in for the application's signature check: a transaction starting with 0xff is
/// forged.
fn is_forged(tx: &[u8]) -> bool {
    tx.first() == Some(&0xff)
}

fn ingress_check() -> Arc<CheckTransactions> {
    Arc::new(|txs: &[&[u8]]| {
        txs.iter()
            .enumerate()
            .filter(|(_, tx)| is_forged(tx))
            .map(|(i, _)| i as u32)
            .collect()
    })
}

/// A batch check that counts the batches it is asked to check.
fn counting_batch_check(calls: Arc<AtomicU64>) -> Arc<attest::CheckBatch> {
    Arc::new(move |batch: &Batch| {
        calls.fetch_add(1, Ordering::Relaxed);
        batch
            .tx_slices()
            .enumerate()
            .filter(|(_, tx)| is_forged(tx))
            .map(|(i, _)| i as u32)
            .collect()
    })
}

fn small_batches() -> Parameters {
    Parameters {
        batch_size: 2_000,
        max_batch_delay: 50,
        ..Parameters::default()
    }
}

/// `total` transactions, every tenth forged; and how many are valid.
fn every_tenth_forged(total: u32) -> (Vec<Bytes>, u32) {
    let txs: Vec<Bytes> = (0..total)
        .map(|i| {
            let mut tx = transaction(i).to_vec();
            if i % 10 == 3 {
                tx[0] = 0xff;
            }
            Bytes::from(tx)
        })
        .collect();
    let valid = txs.iter().filter(|tx| !is_forged(tx)).count() as u32;
    (txs, valid)
}

/// Node 0's batches hold every valid transaction its client sent and no forged one, every peer
/// stores them so, the forgeries are counted where they were dropped, and node 0 notes each of
/// its batches as sealed from checked transactions.
#[tokio::test]
async fn a_clients_forgeries_never_leave_the_node_it_sent_them_to() {
    let (committee, mut nodes) =
        spawn_checking_committee(4, &small_batches(), None, Some(ingress_check())).await;
    let (txs, valid) = every_tenth_forged(1_000);
    send_to_first(&committee, &nodes, txs.clone().into_iter()).await;
    let batches = released(&mut nodes[0], valid).await;
    assert!(batches.len() > 4, "several batches");
    let sealed: Vec<Bytes> = batches.iter().flat_map(Batch::transactions).collect();
    let expected: Vec<Bytes> = txs.iter().filter(|tx| !is_forged(tx)).cloned().collect();
    assert_eq!(
        sealed, expected,
        "every valid transaction, in order, and nothing else"
    );
    let metrics = &nodes[0].metrics;
    assert_eq!(metrics.received_txs.load(Ordering::Relaxed), 1_000);
    assert_eq!(
        metrics.ingress_invalid_txs.load(Ordering::Relaxed),
        u64::from(1_000 - valid)
    );
    let checked = nodes[0].checked.as_ref().expect("checking");
    for batch in &batches {
        assert!(checked.contains(&batch.digest()));
        for node in &nodes[1..] {
            // A peer's batches are never taken as checked here.
            assert!(!node
                .checked
                .as_ref()
                .expect("checking")
                .contains(&batch.digest()));
            let stored = timeout(DEADLINE, node.store.notify_read(batch.digest()))
                .await
                .expect("a quorum acknowledged it")
                .expect("stored");
            assert!(Batch::parse(stored)
                .expect("valid")
                .tx_slices()
                .all(|tx| !is_forged(tx)));
        }
    }
}

/// Under `--verify=attested`, the author states its own batches clean without checking them
/// again, the other attesters' checks find nothing, and every node takes the batch on f+1
/// matching statements (or its own).
#[tokio::test]
async fn an_author_behind_its_ingress_check_states_its_batches_without_checking_them_again() {
    let calls: Vec<Arc<AtomicU64>> = (0..4).map(|_| Arc::new(AtomicU64::new(0))).collect();
    let members = calls
        .iter()
        .map(|c| (counting_batch_check(c.clone()), Conduct::Honest))
        .collect();
    let (committee, mut nodes) =
        spawn_checking_committee(4, &small_batches(), Some(members), Some(ingress_check())).await;
    let (txs, valid) = every_tenth_forged(400);
    send_to_first(&committee, &nodes, txs.into_iter()).await;
    let batches = released(&mut nodes[0], valid).await;
    for (seq, batch) in (0u64..).zip(&batches) {
        let named = attest::attesters(&committee, &nodes[0].name, seq);
        for node in &nodes {
            let table = node.table.as_ref().expect("attesting");
            let verdict = timeout(DEADLINE, async {
                loop {
                    match table.verdict(&batch.digest()) {
                        Verdict::Unattested => tokio::time::sleep(Duration::from_millis(10)).await,
                        verdict => return verdict,
                    }
                }
            })
            .await
            .expect("a verdict");
            if named.contains(&node.name) {
                assert_eq!(verdict, Verdict::Checked(Vec::new()));
            } else {
                assert_eq!(verdict, Verdict::Attested(Vec::new()));
            }
        }
    }
    // Node 0 stated every one of its batches, and checked none of them a second time; the
    // other attesters checked each batch once, in turn.
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    assert_eq!(
        load(&nodes[0].metrics.attested_batches),
        batches.len() as u64
    );
    assert_eq!(load(&calls[0]), 0);
    assert_eq!(
        calls[1..].iter().map(|c| load(c)).sum::<u64>(),
        batches.len() as u64
    );
    assert_eq!(load(&nodes[0].metrics.attested_invalid), 0);
}
