use super::*;
use crate::{KeyPair, PublicKey, Signature};
use proptest::prelude::*;
use std::sync::OnceLock;

#[test]
fn group_sizes_follow_the_share_of_invalid_items() {
    assert_eq!(group_size(0.0, 2048), 2048);
    assert_eq!(group_size(0.0, 100), 100);
    assert_eq!(group_size(0.0, 2), 2);
    assert_eq!(group_size(0.0, 1), 1);
    assert_eq!(group_size(0.0, 0), 1);
    assert_eq!(group_size(f64::NAN, 2048), 2048);
    assert_eq!(group_size(-1.0, 2048), 2048);
    assert_eq!(group_size(1.0, 2048), 1);
    assert_eq!(group_size(0.3, 2048), 1);
    // At one in ten, a batch of a few items still costs less than their single checks.
    let tenth = group_size(0.1, 2048);
    assert!((2..=8).contains(&tenth), "{tenth}");
    let hundredth = group_size(0.01, 2048);
    assert!((8..=64).contains(&hundredth), "{hundredth}");
    let mut previous = usize::MAX;
    for share in [0.0, 1e-5, 1e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.2, 0.5, 1.0] {
        let size = group_size(share, 2048);
        assert!(size <= previous, "share {share}: {size} > {previous}");
        previous = size;
    }
}

#[test]
fn the_estimate_starts_at_the_prior_and_follows_recent_items() {
    let mut share = Share::new(0.5);
    assert_eq!(share.get(), 0.5);
    share.observe(200, 0);
    assert!(share.get() < 0.01, "{}", share.get());
    // A run of forgeries found one by one raises it to where single checks pay, and clean
    // groups after the run bring it down again.
    for _ in 0..50 {
        share.observe(1, 1);
    }
    assert_eq!(group_size(share.get(), 1000), 1, "{}", share.get());
    for _ in 0..10 {
        share.observe(32, 0);
    }
    assert!(share.get() < 0.01, "{}", share.get());
    assert_eq!(Share::new(f64::NAN).get(), 0.0);
    assert_eq!(Share::new(2.0).get(), 1.0);
}

/// A signed message, the same message altered (so that the signature no longer matches it),
/// and the signature and key.
struct Signed {
    message: Vec<u8>,
    altered: Vec<u8>,
    signature: Signature,
    key: PublicKey,
}

/// Built once for every case: signing dominates otherwise.
fn signed() -> &'static [Signed] {
    static SIGNED: OnceLock<Vec<Signed>> = OnceLock::new();
    SIGNED.get_or_init(|| {
        let keys: Vec<KeyPair> = (0..16).map(KeyPair::from_seed).collect();
        (0..MAX_ITEMS)
            .map(|i| {
                let kp = &keys[i % keys.len()];
                let message = format!("transaction {i}").into_bytes();
                let mut altered = message.clone();
                altered.push(b'!');
                Signed {
                    signature: Signature::sign_bytes(&message, &kp.secret),
                    message,
                    altered,
                    key: kp.name,
                }
            })
            .collect()
    })
}

const MAX_ITEMS: usize = 300;

/// Where the forgeries of a chunk of `n` are.
#[derive(Clone, Debug)]
enum Pattern {
    None,
    One(usize),
    All,
    /// A run of forgeries (one client's transactions sit together in a batch).
    Runs(Vec<(usize, usize)>),
    /// Every `step`-th item from `offset`.
    Spread {
        step: usize,
        offset: usize,
    },
    /// Each item forged with this probability (seeded).
    Random {
        share: f64,
        seed: u64,
    },
}

impl Pattern {
    fn forged(&self, n: usize) -> Vec<bool> {
        let mut forged = vec![false; n];
        match self {
            Pattern::None => {}
            Pattern::One(at) => {
                if n > 0 {
                    forged[at % n] = true;
                }
            }
            Pattern::All => forged.fill(true),
            Pattern::Runs(runs) => {
                for &(start, len) in runs {
                    for f in forged.iter_mut().skip(start).take(len) {
                        *f = true;
                    }
                }
            }
            Pattern::Spread { step, offset } => {
                for f in forged.iter_mut().skip(*offset).step_by(*step) {
                    *f = true;
                }
            }
            Pattern::Random { share, seed } => {
                use rand::{rngs::StdRng, Rng, SeedableRng};
                let mut rng = StdRng::seed_from_u64(*seed);
                for f in forged.iter_mut() {
                    *f = rng.gen_bool(*share);
                }
            }
        }
        forged
    }
}

fn pattern() -> impl Strategy<Value = Pattern> {
    prop_oneof![
        Just(Pattern::None),
        any::<usize>().prop_map(Pattern::One),
        Just(Pattern::All),
        prop::collection::vec((0..MAX_ITEMS, 1..60usize), 1..4).prop_map(Pattern::Runs),
        (1..40usize, 0..40usize).prop_map(|(step, offset)| Pattern::Spread { step, offset }),
        (0.0..1.0f64, any::<u64>()).prop_map(|(share, seed)| Pattern::Random { share, seed }),
    ]
}

fn prior() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(0.01),
        Just(0.1),
        Just(0.5),
        Just(1.0),
        0.0..1.0f64
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// The positions found are exactly those whose single check fails, for any pattern of
    /// forgeries and any history, and no item costs more than about one single check.
    #[test]
    fn finds_exactly_the_items_whose_single_check_fails(
        n in 0..=MAX_ITEMS,
        pattern in pattern(),
        prior in prior(),
    ) {
        let forged = pattern.forged(n);
        let items: Vec<Prepared> = signed()[..n]
            .iter()
            .zip(&forged)
            .map(|(item, &forged)| {
                let message = if forged { &item.altered } else { &item.message };
                Prepared::new(message, &item.signature, &item.key).expect("decodes")
            })
            .collect();
        let single: Vec<bool> = items.iter().map(Prepared::check).collect();
        prop_assert_eq!(&single, &forged.iter().map(|f| !f).collect::<Vec<_>>());

        let (valid, work) = settle(&items, prior);
        prop_assert_eq!(&valid, &single);
        let invalid = single.iter().filter(|&&ok| !ok).count();
        prop_assert_eq!((work.prepared, work.invalid), (n, invalid));
        prop_assert!(work.singles <= n, "{:?}", work);
        // Batched: the first batch, the groups of the rest and their searches, a few times
        // the chunk at most.
        prop_assert!(work.batch_items <= 3 * n, "{:?}", work);
        if invalid == 0 && prior == 0.0 && n >= 2 {
            prop_assert_eq!((work.batches, work.singles), (1, 0));
        }
    }
}
