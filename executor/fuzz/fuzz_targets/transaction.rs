//! Transaction decoding (`Transaction::decode`), as the verifier stage runs it on every
//! transaction of a committed batch, then the checks it runs next.
//!
//! Asserts: no panic; decoding holds memory proportional to the input; whatever decodes
//! re-encodes to exactly the input (the signature covers that encoding).
#![no_main]

use executor::Transaction;
use executor_fuzz::alloc::{assert_bounded, peak_during};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (decoded, peak) = peak_during(|| Transaction::decode(data));
    assert_bounded("transaction", data.len(), peak, 0);
    if let Ok(tx) = decoded {
        assert_eq!(tx.encoded_len(), data.len());
        assert_eq!(tx.encode(), data, "a second encoding of {tx:?}");
        let _ = tx.verify();
        let _ = (tx.is_sample(), tx.sample_id());
    }
});
