/// Blockbench's CPUHeavy: sort `length` numbers with quicksort. The numbers come from a linear
/// congruential generator seeded by the length (Blockbench sorts a descending array; pseudo-random
/// input keeps a middle pivot from meeting a presorted order). Nothing is stored: the cost is
/// instructions and memory. The result is checked, and a disorder aborts with `ENOT_SORTED`,
/// the workload's invariant (the executor counts such aborts; the audit requires none).
module 0x1::CpuHeavy {
    use std::vector;

    const ENOT_SORTED: u64 = 1;

    /// glibc's `rand` constants, modulo 2^31: products stay below 2^62, so no u64 overflow.
    const MULTIPLIER: u64 = 1103515245;
    const INCREMENT: u64 = 12345;
    const MODULUS: u64 = 2147483648;

    public entry fun sort(_account: signer, length: u64) {
        let data = vector::empty<u64>();
        let x = length % MODULUS;
        let i = 0;
        while (i < length) {
            x = (x * MULTIPLIER + INCREMENT) % MODULUS;
            vector::push_back(&mut data, x);
            i = i + 1;
        };
        if (length > 1) quicksort(&mut data, 0, length - 1);
        let i = 1;
        while (i < length) {
            assert!(*vector::borrow(&data, i - 1) <= *vector::borrow(&data, i), ENOT_SORTED);
            i = i + 1;
        };
    }

    /// Sorts `data[lo..=hi]`. It recurses into the smaller side of the partition and loops on the
    /// larger one, so the call depth stays below log2(length) (the VM allows 1,024 frames).
    fun quicksort(data: &mut vector<u64>, lo: u64, hi: u64) {
        while (lo < hi) {
            let p = partition(data, lo, hi);
            if (p - lo < hi - p) {
                if (p > lo) quicksort(data, lo, p - 1);
                lo = p + 1;
            } else {
                // Here p > lo (else the left side would be the smaller), so p - 1 is safe.
                if (p < hi) quicksort(data, p + 1, hi);
                hi = p - 1;
            };
        };
    }

    /// Lomuto's partition around the middle element; returns where the pivot ends.
    fun partition(data: &mut vector<u64>, lo: u64, hi: u64): u64 {
        vector::swap(data, lo + (hi - lo) / 2, hi);
        let pivot = *vector::borrow(data, hi);
        let store = lo;
        let i = lo;
        while (i < hi) {
            if (*vector::borrow(data, i) < pivot) {
                vector::swap(data, i, store);
                store = store + 1;
            };
            i = i + 1;
        };
        vector::swap(data, store, hi);
        store
    }
}
