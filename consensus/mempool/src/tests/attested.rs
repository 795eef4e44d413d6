//! Four attesting mempools on loopback (`--verify=attested`): what they state, what a
//! Byzantine attester or author can make them do, and how attesting pushes back on clients.

use super::*;
use attest::{Conduct, Verdict};

/// The stand-in for the application's signature check: a transaction starting with 0xff is
/// forged.
fn check() -> Arc<attest::CheckBatch> {
    Arc::new(|batch: &Batch| {
        batch
            .tx_slices()
            .enumerate()
            .filter(|(_, tx)| tx.first() == Some(&0xff))
            .map(|(i, _)| i as u32)
            .collect()
    })
}

/// Four members checking honestly, but for `conducts`' exceptions.
fn members(conducts: &[(usize, Conduct)]) -> Vec<(Arc<attest::CheckBatch>, Conduct)> {
    (0..4)
        .map(|i| {
            let conduct = conducts
                .iter()
                .find(|(member, _)| *member == i)
                .map_or(Conduct::Honest, |(_, conduct)| *conduct);
            (check(), conduct)
        })
        .collect()
}

fn small_batches() -> Parameters {
    Parameters {
        batch_size: 2_000,
        max_batch_delay: 50,
        ..Parameters::default()
    }
}

fn forged(i: u32) -> Bytes {
    let mut tx = transaction(i).to_vec();
    tx[0] = 0xff;
    Bytes::from(tx)
}

/// A batch node 0 released: its digest, its number (batches leave in the order they were
/// sealed, numbered from 0) and its forged positions.
struct Released {
    digest: Digest,
    seq: u64,
    forged: Vec<u32>,
}

/// Sends `total` transactions to node 0, every tenth forged, and returns the batches node 0
/// releases to consensus until they hold them all.
async fn attested_run(nodes: &mut [Node], committee: &Committee, total: u32) -> Vec<Released> {
    let txs = (0..total).map(|i| {
        if i % 10 == 3 {
            forged(i)
        } else {
            transaction(i)
        }
    });
    send_to_first(committee, nodes, txs).await;
    released(&mut nodes[0], total)
        .await
        .into_iter()
        .zip(0u64..)
        .map(|(batch, seq)| Released {
            digest: batch.digest(),
            seq,
            forged: check()(&batch),
        })
        .collect()
}

/// Waits until `table` holds a verdict on `digest` other than unattested.
async fn verdict_of(table: &attest::Attestations, digest: &Digest) -> Verdict {
    timeout(DEADLINE, async {
        loop {
            match table.verdict(digest) {
                Verdict::Unattested => tokio::time::sleep(Duration::from_millis(10)).await,
                verdict => return verdict,
            }
        }
    })
    .await
    .expect("every node learns the verdict")
}

/// With honest attesters, every batch node 0 hands consensus is certified at every node by
/// f+1 statements naming exactly its forged transactions; a node that checked the batch itself
/// (its author, its other attester) has its own finding.
#[tokio::test]
async fn attesters_name_the_forged_transactions_at_every_node() {
    let (committee, mut nodes) =
        spawn_attesting_committee(4, &small_batches(), Some(members(&[]))).await;
    let released = attested_run(&mut nodes, &committee, 400).await;
    assert!(released.len() > 4, "several batches");
    assert!(released.iter().any(|batch| !batch.forged.is_empty()));
    for batch in &released {
        let named = attest::attesters(&committee, &nodes[0].name, batch.seq);
        for node in &nodes {
            let verdict = verdict_of(node.table.as_ref().expect("attesting"), &batch.digest).await;
            if named.contains(&node.name) {
                assert_eq!(verdict, Verdict::Checked(batch.forged.clone()));
            } else {
                assert_eq!(verdict, Verdict::Attested(batch.forged.clone()));
            }
        }
    }
    assert_eq!(
        nodes[0].metrics.released_unattested.load(Ordering::Relaxed),
        0
    );
    // Each node checked only the batches it attests: node 0 all of its own, the others one in
    // three each, in turn.
    let checked: Vec<u64> = nodes
        .iter()
        .map(|n| n.metrics.attested_batches.load(Ordering::Relaxed))
        .collect();
    assert_eq!(checked[0], released.len() as u64);
    assert_eq!(checked[1..].iter().sum::<u64>(), released.len() as u64);
    assert!(checked[1..]
        .iter()
        .all(|c| c.abs_diff(released.len() as u64 / 3) <= 1));
}

/// A Byzantine attester that states wrong positions (and executes what is true): where it is
/// one of a batch's two attesters, the statements disagree, no node holds a certificate, and
/// every node not itself an attester must check the batch (it never executes a forgery on the
/// liar's word). The author hands such a batch on as soon as both statements are in.
#[tokio::test]
async fn a_lying_attester_leaves_its_batches_for_every_node_to_check() {
    let liar = 3;
    let conducts = members(&[(liar, Conduct::Lying)]);
    let (committee, mut nodes) =
        spawn_attesting_committee(4, &small_batches(), Some(conducts)).await;
    let released = attested_run(&mut nodes, &committee, 400).await;
    let liar_name = nodes[liar].name;
    let mut disputed = 0;
    for batch in &released {
        let named = attest::attesters(&committee, &nodes[0].name, batch.seq);
        let observer = nodes
            .iter()
            .find(|n| !named.contains(&n.name) && n.name != liar_name)
            .expect("an honest member that is no attester");
        let table = observer.table.as_ref().expect("attesting");
        // Both statements reach the observer, whatever they say.
        timeout(DEADLINE, async {
            while table.statements(&batch.digest) < named.len() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("every attester's statement arrives");
        if named.contains(&liar_name) {
            disputed += 1;
            assert_eq!(table.verdict(&batch.digest), Verdict::Unattested);
            // The liar itself goes by what it found.
            let own = nodes[liar].table.as_ref().expect("attesting");
            assert_eq!(
                own.verdict(&batch.digest),
                Verdict::Checked(batch.forged.clone())
            );
        } else {
            assert_eq!(
                table.verdict(&batch.digest),
                Verdict::Attested(batch.forged.clone())
            );
        }
    }
    assert!(
        disputed > 0,
        "the liar attested none of the batches: no test"
    );
    assert_eq!(
        nodes[0].metrics.released_unattested.load(Ordering::Relaxed),
        disputed
    );
}

/// A member that never states: the batches that name it leave uncertified (after one wait, then
/// at once while it is marked silent), every other batch is certified as before.
#[tokio::test]
async fn a_silent_attester_leaves_only_its_own_share_uncertified() {
    let silent = 3;
    let conducts = members(&[(silent, Conduct::Silent)]);
    let (committee, mut nodes) =
        spawn_attesting_committee(4, &small_batches(), Some(conducts)).await;
    let released = attested_run(&mut nodes, &committee, 400).await;
    let silent_name = nodes[silent].name;
    let mut uncertified = 0;
    for batch in &released {
        let named = attest::attesters(&committee, &nodes[0].name, batch.seq);
        if named.contains(&silent_name) {
            uncertified += 1;
            continue;
        }
        let observer = &nodes[silent];
        let verdict = verdict_of(observer.table.as_ref().expect("attesting"), &batch.digest).await;
        assert_eq!(verdict, Verdict::Attested(batch.forged.clone()));
    }
    assert!(uncertified > 0);
    assert_eq!(
        nodes[0].metrics.released_unattested.load(Ordering::Relaxed),
        uncertified
    );
    assert!(nodes[0]
        .table
        .as_ref()
        .expect("attesting")
        .is_silent(&silent_name));
    assert_eq!(
        nodes[silent]
            .metrics
            .attested_batches
            .load(Ordering::Relaxed),
        0
    );
}

/// A member that floods every peer with the largest statements, for batches that do not exist:
/// every honest node keeps at most the flooder's share of statements and bytes, however many
/// arrive, and the batches that do not name the flooder are certified as before.
#[tokio::test]
async fn byzantine_a_statement_flood_is_held_to_the_flooders_bytes_on_every_honest_node() {
    let flooder = 3;
    let conducts = members(&[(flooder, Conduct::Flooding)]);
    let (committee, mut nodes) =
        spawn_attesting_committee(4, &small_batches(), Some(conducts)).await;
    let released = attested_run(&mut nodes, &committee, 400).await;
    let flooder_name = nodes[flooder].name;
    // The flooder checks nothing itself: what it concludes of a batch comes from the others'
    // statements.
    let observer = nodes[flooder].table.as_ref().expect("attesting");
    for batch in &released {
        if !attest::attesters(&committee, &nodes[0].name, batch.seq).contains(&flooder_name) {
            let verdict = verdict_of(observer, &batch.digest).await;
            assert_eq!(verdict, Verdict::Attested(batch.forged.clone()));
        }
    }
    for node in &nodes[..flooder] {
        let table = node.table.as_ref().expect("attesting");
        let limits = table.limits();
        // Statements kept from peers: past three times what the flooder may hold, the bound
        // has pushed out most of what it sent.
        let beyond = 3 * limits.statements as u64;
        timeout(DEADLINE, async {
            while node.metrics.attestations_received.load(Ordering::Relaxed) < beyond {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("the flood reaches every honest node");
        // Statements of a thousand positions (a 2,000-byte batch's most): the bytes, not the
        // count, bind, and the flood filled them.
        let held = table.bytes_of(&flooder_name);
        assert!(held <= limits.bytes, "{held} bytes of the flooder's held");
        assert!(
            held > limits.bytes / 2,
            "{held} bytes: the flood did not fill its share"
        );
    }
}

/// Node 0's attester cannot keep up (its check waits until the test lets it go). Before, the
/// batch maker went on sealing until the backlog of uncommitted batches was full (8 MiB here,
/// hundreds of batches that would all leave uncertified); now it stops taking the clients'
/// transactions once a few batches wait for the attester, and goes on when it catches up.
#[tokio::test]
async fn attesting_behind_stops_the_clients() {
    let parameters = Parameters {
        batch_size: 100_000,
        max_batch_delay: 50,
        // Nothing commits here: the backlog bound must not be what stops the clients.
        max_uncommitted_bytes: 64 << 20,
        ..Parameters::default()
    };
    // Opened at the end, or on a failed assertion (the runtime waits for the blocked checks).
    struct Gate(Arc<std::sync::Mutex<bool>>);
    impl Drop for Gate {
        fn drop(&mut self) {
            *self.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
        }
    }
    let gate = Arc::new(std::sync::Mutex::new(false));
    let opener = Gate(gate.clone());
    let blocked: Arc<attest::CheckBatch> = {
        let gate = gate.clone();
        let inner = check();
        Arc::new(move |batch: &Batch| {
            // A check that is slow until let go (a blocking thread of the test's runtime).
            while !*gate.lock().unwrap_or_else(|e| e.into_inner()) {
                std::thread::sleep(Duration::from_millis(5));
            }
            inner(batch)
        })
    };
    let mut conducts = members(&[]);
    conducts[0].0 = blocked;
    let (committee, mut nodes) = spawn_attesting_committee(4, &parameters, Some(conducts)).await;
    // More than the node may hold while its batch maker is stopped (the transactions port's
    // byte budget, the batches behind, the one being filled): the rest must stay with the client.
    let total = 10_000u32;
    // Transactions of 1 KB: the client sends 10 MB, well past that room.
    let transaction = |i: u32| {
        let mut tx = transaction(i).to_vec();
        tx.resize(1_000, 1);
        Bytes::from(tx)
    };
    let sending = {
        let committee = committee.clone();
        let first = nodes[0].name;
        tokio::spawn(async move {
            let target = committee.authorities[&first].transactions_address;
            let socket = TcpStream::connect(target).await.expect("connect");
            let mut client = FramedWrite::new(socket, codec(MAX_TRANSACTION_SIZE));
            for tx in (0..total).map(transaction) {
                client.feed(tx).await.expect("feed");
            }
            SinkExt::<Bytes>::flush(&mut client).await.expect("flush");
        })
    };
    let metrics = nodes[0].metrics.clone();
    timeout(DEADLINE, async {
        while metrics.attest_pauses.load(Ordering::Relaxed) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the batch maker stops while its attester is behind");
    let sealed = metrics.sealed_batches.load(Ordering::Relaxed);
    // Behind at two of the largest batches (of 200 KB here): the batch that crosses it is the
    // last one sealed.
    let behind = 2 * max_batch_bytes(&parameters) as u64;
    assert!(
        sealed <= behind / parameters.batch_size as u64 + 1,
        "{sealed} batches sealed while the attester was stuck"
    );
    let held = (tx_receiver::MAX_QUEUED_BYTES + 2 * max_batch_bytes(&parameters)) as u64 + behind;
    let received = metrics.received_txs.load(Ordering::Relaxed);
    // Each transaction takes at least its 1,000 bytes of that room: a bound that holds however
    // far the client got, and below what it sends.
    assert!(received <= held / 1_000, "{received} transactions taken in");
    assert!(held / 1_000 < u64::from(total));
    drop(opener);
    let batches = released(&mut nodes[0], total).await;
    assert_eq!(batches.iter().map(Batch::tx_count).sum::<u32>(), total);
    sending.await.expect("the client sent everything");
}

/// A Byzantine author numbers its batches so that each names one victim. Before, the
/// attesters came from the digest, which the author grinds by the seal time: the victim
/// attested every batch. Now a number that does not follow the last one makes every member
/// skip a turn of the author's batches: the victim attests at most the first.
#[tokio::test]
async fn byzantine_an_author_cannot_aim_its_batches_at_one_victim() {
    let parameters = Parameters::default();
    let (committee, nodes) = spawn_attesting_committee(4, &parameters, Some(members(&[]))).await;
    let victim = &nodes[2];
    let table = victim.table.as_ref().expect("attesting");
    let byzantine = KeyPair::from_seed(1);
    let target = committee.authorities[&victim.name].mempool_address;
    let network = ReliableSender::authenticated(
        16,
        parameters.max_frame_size,
        Credentials::for_committee(
            byzantine.name,
            byzantine.secret.clone(),
            Purpose::Mempool,
            &committee,
        ),
    );
    let names =
        |seq: u64| attest::attesters(&committee, &byzantine.name, seq).contains(&victim.name);
    let send = |seq: u64, i: u32| {
        let mut builder = batch::BatchBuilder::with_capacity(256);
        builder.push(&transaction(i));
        let batch = builder.seal(1, 256);
        let frame = MempoolMessage::encode_authored(seq, batch.bytes());
        let mut network = network.clone();
        async move {
            let reply = timeout(DEADLINE, network.send(target, frame).await)
                .await
                .expect("a reply in time")
                .expect("a reply");
            assert_eq!(&reply[..], message::ACK, "stored all the same");
            batch.digest()
        }
    };
    let mut next = 0;
    let mut aimed = Vec::new();
    for i in 0..30 {
        let seq = (next..)
            .find(|seq| names(*seq))
            .expect("a number naming the victim");
        aimed.push(send(seq, i).await);
        next = seq + 1;
    }
    // Then numbers that follow, until one the victim attests (a turn of 3 batches after the
    // last jump): once it is checked, every batch before it is (the attester takes them in
    // order).
    let attested_from = next + 2;
    let sentinel = loop {
        let digest = send(next, 1_000 + next as u32).await;
        let attested = names(next) && next >= attested_from;
        next += 1;
        if attested {
            break digest;
        }
    };
    timeout(DEADLINE, async {
        while !matches!(table.verdict(&sentinel), Verdict::Checked(_)) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the victim attests a batch that follows its author's sequence");
    let attested = aimed
        .iter()
        .filter(|digest| matches!(table.verdict(digest), Verdict::Checked(_)))
        .count();
    assert!(
        attested <= 1,
        "the victim attested {attested} of 30 aimed batches"
    );
    for digest in &aimed {
        assert!(victim.store.contains(digest).expect("read"));
    }
}
