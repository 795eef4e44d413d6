use super::*;
use crate::KeyPair;

struct Item {
    message: Vec<u8>,
    signature: Signature,
    key: PublicKey,
}

fn view(item: &Item) -> (&[u8], &Signature, &PublicKey) {
    (&item.message, &item.signature, &item.key)
}

/// `n` valid items signed by a handful of keys.
fn valid_items(n: usize) -> Vec<Item> {
    let keys: Vec<KeyPair> = (0..8).map(KeyPair::from_seed).collect();
    (0..n)
        .map(|i| {
            let kp = &keys[i % keys.len()];
            let message = format!("tx {i}").into_bytes();
            Item {
                signature: Signature::sign_bytes(&message, &kp.secret),
                message,
                key: kp.name,
            }
        })
        .collect()
}

fn corrupt(item: &mut Item) {
    item.message.push(b'!');
}

fn singles(items: &[Item]) -> Vec<bool> {
    items
        .iter()
        .map(|it| it.signature.verify_bytes(&it.message, &it.key).is_ok())
        .collect()
}

#[test]
fn chunk_size_spreads_work_but_keeps_batches_large() {
    let v = ParallelVerifier::with_min_chunk(4, 100).expect("pool");
    assert_eq!(v.threads(), 4);
    assert_eq!(v.chunk_size(0), 100);
    assert_eq!(v.chunk_size(10), 100);
    assert_eq!(v.chunk_size(400), 100);
    assert_eq!(v.chunk_size(401), 101);
    assert_eq!(v.chunk_size(4096), 1024);
    let v = ParallelVerifier::with_min_chunk(3, 0).expect("pool");
    assert_eq!(v.min_chunk(), 1);
    assert_eq!(v.chunk_size(10), 4);
}

#[test]
fn chunks_get_smaller_only_when_forgeries_make_groups_small() {
    let v = ParallelVerifier::with_min_chunk(2, 128).expect("pool");
    assert_eq!(v.chunk_size_at(1000, 0.0), 500);
    assert_eq!(v.chunk_size_at(1000, 1e-4), 500);
    assert_eq!(v.chunk_size_at(1000, 0.01), 128);
    assert_eq!(v.chunk_size_at(1000, 0.1), 128);
    assert_eq!(v.chunk_size_at(8000, 0.1), 1000);
    assert_eq!(v.chunk_size_at(200, 0.1), 128);
    assert_eq!(v.chunk_size_at(100, 0.1), 128);
}

#[test]
fn zero_threads_means_every_core() {
    let v = ParallelVerifier::new(0).expect("pool");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(v.threads(), cores);
    assert_eq!(v.min_chunk(), ParallelVerifier::DEFAULT_MIN_CHUNK);
}

#[test]
fn threads_are_named() {
    let v = ParallelVerifier::new(2).expect("pool");
    let name = v
        .pool
        .install(|| std::thread::current().name().map(str::to_owned));
    let name = name.expect("named thread");
    assert!(name.starts_with("verifier-"), "{name}");
}

#[test]
fn accepts_an_inline_closure_over_tuples() {
    let kp = KeyPair::from_seed(1);
    let items: Vec<(Vec<u8>, Signature, PublicKey)> = (0..10u8)
        .map(|i| (vec![i], Signature::sign_bytes(&[i], &kp.secret), kp.name))
        .collect();
    let v = ParallelVerifier::new(2).expect("pool");
    let got = v.verify(&items, |(m, s, k)| (m.as_slice(), s, k));
    assert_eq!(got, vec![true; 10]);
}

#[test]
fn empty_input_gives_empty_output() {
    let v = ParallelVerifier::new(2).expect("pool");
    assert!(v.verify(&[] as &[Item], view).is_empty());
}

#[test]
fn one_bad_in_a_thousand_is_found_exactly_and_cheaply() {
    let mut items = valid_items(1000);
    corrupt(&mut items[617]);
    let mut out = vec![false; items.len()];
    let work = verify_chunk(&items, &view, &mut out, 0.0, &KeyCache::new(16));
    let expected: Vec<bool> = (0..1000).map(|i| i != 617).collect();
    assert_eq!(out, expected);
    // The failed batch of 1000, then groups sized for one invalid item in what is left
    // (about 32: about 1000 more items in batches), the failed group's search, and a few
    // single checks: in all about as much as the search with 16-way splits it replaced
    // (33 batches over 2063 items and 4 single checks).
    assert_eq!((work.prepared, work.invalid), (1000, 1));
    assert!(work.singles <= 4, "{work:?}");
    assert!(work.batch_items <= 2100, "{work:?}");
    assert!(work.batches <= 40, "{work:?}");
    // The parallel path gives the same answer.
    for threads in [1, 2] {
        let v = ParallelVerifier::with_min_chunk(threads, 64).expect("pool");
        assert_eq!(v.verify(&items, view), expected);
    }
}

#[test]
fn a_flood_of_bad_items_falls_back_to_single_checks() {
    let mut items = valid_items(1000);
    for item in items.iter_mut().step_by(2) {
        corrupt(item);
    }
    let mut out = vec![false; items.len()];
    let work = verify_chunk(&items, &view, &mut out, 0.0, &KeyCache::new(16));
    assert_eq!(out, singles(&items));
    // Once the first groups fail the groups shrink to single checks: a few batches, then each
    // item alone (what the search replaced spent 17 batches over 2000 items before its 1000
    // single checks), but for an item found invalid by its failed group's other items passing.
    assert_eq!((work.prepared, work.invalid), (1000, 500));
    assert!((990..=1000).contains(&work.singles), "{work:?}");
    assert!(work.batch_items <= 1250, "{work:?}");
}

#[test]
fn all_valid_is_one_batch_per_chunk() {
    let items = valid_items(300);
    let mut out = vec![false; items.len()];
    let work = verify_chunk(&items, &view, &mut out, 0.0, &KeyCache::new(16));
    assert!(out.iter().all(|&ok| ok));
    assert_eq!(
        work,
        Work {
            batches: 1,
            batch_items: 300,
            singles: 0,
            prepared: 300,
            invalid: 0,
        }
    );
}

#[test]
fn a_known_flood_is_checked_item_by_item() {
    let mut items = valid_items(1000);
    for item in items.iter_mut().step_by(5) {
        corrupt(item);
    }
    let mut out = vec![false; items.len()];
    let work = verify_chunk(&items, &view, &mut out, 0.2, &KeyCache::new(16));
    assert_eq!(out, singles(&items));
    assert_eq!(work.batches, 0);
    assert_eq!(work.singles, 1000);
    assert_eq!(work.invalid, 200);
}

#[test]
fn invalid_rate_follows_recent_calls() {
    let v = ParallelVerifier::with_min_chunk(2, 16).expect("pool");
    assert_eq!(v.invalid_rate(), 0.0);
    let mut polluted = valid_items(1024);
    for item in polluted.iter_mut().step_by(2) {
        corrupt(item);
    }
    let expected = singles(&polluted);
    assert_eq!(v.verify(&polluted, view), expected);
    let after_flood = v.invalid_rate();
    assert!((0.2..=0.5).contains(&after_flood), "{after_flood}");
    // The next flood is checked item by item, with the same answers.
    assert_eq!(v.verify(&polluted, view), expected);
    let clean = valid_items(1024);
    for _ in 0..12 {
        assert!(v.verify(&clean, view).iter().all(|&ok| ok));
    }
    assert!(v.invalid_rate() < 0.001, "{}", v.invalid_rate());
}

#[test]
fn bad_items_at_the_edges_and_everywhere() {
    let v = ParallelVerifier::with_min_chunk(2, 16).expect("pool");
    for bad in [
        vec![0],
        vec![99],
        vec![0, 99],
        vec![15, 16, 31, 32, 33],
        (0..100).step_by(3).collect(),
        (0..100).collect(),
    ] {
        let mut items = valid_items(100);
        for &i in &bad {
            corrupt(&mut items[i]);
        }
        let expected = singles(&items);
        assert_eq!(
            expected.iter().filter(|&&ok| !ok).count(),
            bad.len(),
            "{bad:?}"
        );
        assert_eq!(v.verify(&items, view), expected, "{bad:?}");
    }
}

#[test]
fn undecodable_keys_and_garbage_are_invalid_not_panics() {
    let mut items = valid_items(40);
    // 0x02 followed by zeros: y = 2 is not on the curve.
    let mut bad_key = [0u8; 32];
    bad_key[0] = 2;
    items[3].key = PublicKey(bad_key);
    items[5].signature = Signature::default();
    items[7].signature = Signature::from_bytes(&[0xff; 64]);
    items[9].key = PublicKey([0xff; 32]);
    let v = ParallelVerifier::with_min_chunk(2, 4).expect("pool");
    let got = v.verify(&items, view);
    assert_eq!(got, singles(&items));
    for i in [3, 5, 7, 9] {
        assert!(!got[i], "item {i}");
    }
    assert_eq!(got.iter().filter(|&&ok| ok).count(), 36);
}

/// `n` valid items but those at `forged`, whose message is not the one signed.
fn forged_at(n: usize, forged: &[usize]) -> Vec<Item> {
    let mut items = valid_items(n);
    for &i in forged {
        corrupt(&mut items[i]);
    }
    items
}

/// Checks `items` as one chunk with the recent invalid share `prior`, asserts that the answers
/// are the single checks', and returns the work.
fn checked(items: &[Item], prior: f64) -> Work {
    let mut out = vec![false; items.len()];
    let work = verify_chunk(items, &view, &mut out, prior, &KeyCache::new(16));
    assert_eq!(out, singles(items), "prior {prior}");
    work
}

#[test]
fn a_few_forgeries_cost_a_few_checks_each_not_a_single_check_per_item() {
    use rand::{rngs::StdRng, SeedableRng};
    const N: usize = 1024;
    let mut rng = StdRng::seed_from_u64(11);
    for k in [1usize, 2, 4, 8, 16, 32] {
        let forged = rand::seq::index::sample(&mut rng, N, k).into_vec();
        let work = checked(&forged_at(N, &forged), 0.0);
        assert_eq!(work.invalid, k);
        // Single checks in proportion to the forgeries, not to the chunk.
        assert!(work.singles <= 4 * k, "k {k}: {work:?}");
        // Batches: the groups of the clean rest, about sqrt(k·N), and a search of about
        // log2(N/k) checks per forgery.
        let log = (N / k).ilog2() as usize;
        let bound = 2 * (k * N).isqrt() + 4 * k * log;
        assert!(work.batches <= bound, "k {k}: {work:?} > {bound}");
        // Items batched: the failed first batch, the groups, and the failed groups' searches.
        assert!(work.batch_items <= 3 * N, "k {k}: {work:?}");
    }
}

#[test]
fn ten_percent_forged_costs_less_than_a_single_check_each() {
    use rand::{rngs::StdRng, Rng, SeedableRng};
    const N: usize = 1000;
    let mut rng = StdRng::seed_from_u64(12);
    let spread: Vec<usize> = (0..N).filter(|_| rng.gen_bool(0.1)).collect();
    let every_tenth: Vec<usize> = (0..N).step_by(10).collect();
    for forged in [spread, every_tenth] {
        // After blocks like this one (prior 0.1) and after clean ones (prior 0).
        for prior in [0.1, 0.0] {
            let work = checked(&forged_at(N, &forged), prior);
            assert_eq!(work.invalid, forged.len());
            // Groups of a few items (a batch of 4 costs about half as much as 4 single
            // checks): most items are settled by a passing batch, and a forgery costs a few
            // single checks of its group's items.
            assert!(work.singles <= N / 3, "prior {prior}: {work:?}");
            let first_batch = if prior == 0.0 { N } else { 0 };
            assert!(
                work.batch_items <= first_batch + 3 * N / 2,
                "prior {prior}: {work:?}"
            );
        }
    }
}

#[test]
fn a_history_of_forgeries_does_not_make_a_clean_chunk_expensive() {
    let items = valid_items(1000);
    for prior in [0.1, 0.5, 1.0] {
        let work = checked(&items, prior);
        // The chunk's own passing batches outweigh the history within a few groups, which
        // then grow: every item is batched once, and few are checked alone.
        assert!(work.singles <= 64, "prior {prior}: {work:?}");
        assert!(work.batches <= 48, "prior {prior}: {work:?}");
        assert!(
            work.singles + work.batch_items <= 1000,
            "prior {prior}: {work:?}"
        );
    }
}

#[test]
fn a_run_of_forgeries_leaves_the_rest_of_the_chunk_batched() {
    // One client's transactions sit together in a batch, so its forgeries come in a run.
    let forged: Vec<usize> = (300..350).collect();
    let work = checked(&forged_at(1000, &forged), 0.0);
    assert_eq!(work.invalid, 50);
    assert!(work.singles <= 3 * 50, "{work:?}");
    assert!(work.batch_items <= 2200, "{work:?}");
}

#[test]
fn checking_everything_alone_is_the_worst_case_give_or_take_a_few_batches() {
    // Whatever the pattern and the history, at most one single check per item, and what was
    // batched before the groups shrank to single checks stays below one batch of the chunk.
    let patterns: [Vec<usize>; 3] = [
        (0..500).collect(),
        (0..500).step_by(2).collect(),
        (0..500).step_by(3).collect(),
    ];
    for forged in &patterns {
        for prior in [0.0, 0.01, 0.1, 0.3, 1.0] {
            let work = checked(&forged_at(500, forged), prior);
            assert!(work.singles <= 500, "prior {prior}: {work:?}");
            assert!(work.batch_items <= 500 + 128, "prior {prior}: {work:?}");
        }
    }
}

#[test]
fn a_verifier_sharing_threads_runs_on_them_and_keeps_its_own_history() {
    let verifier = ParallelVerifier::with_min_chunk(2, 16).expect("pool");
    let sharing = verifier.sharing_threads();
    let thread = |v: &ParallelVerifier| {
        v.install(|| std::thread::current().name().map(str::to_string))
            .expect("a named thread")
    };
    assert!(thread(&sharing).starts_with("verifier-"));
    let mut forged = valid_items(400);
    for item in forged.iter_mut().step_by(5) {
        corrupt(item);
    }
    assert_eq!(sharing.verify(&forged, view), singles(&forged));
    assert!(sharing.invalid_rate() > 0.05);
    // The forgeries went through the other verifier: this one's history is still clean.
    assert_eq!(verifier.invalid_rate(), 0.0);
    let clean = valid_items(300);
    assert_eq!(verifier.verify(&clean, view), vec![true; 300]);
    assert_eq!(verifier.invalid_rate(), 0.0);
}
