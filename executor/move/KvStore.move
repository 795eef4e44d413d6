/// Blockbench's KVStore (its IOHeavy): a transaction writes `keys` keys of `value_size` bytes, then
/// reads them back. Every key is its own resource (a `Slot` at an address derived from the owner
/// and the key, by the native `slot_address`), so a key is one storage entry, read and written on
/// its own as a key-value store's would be. Only the owner writes its keys: the signer of a slot
/// is made (native `slot_signer`) from the transaction's own signer. A value read back that is not
/// the one written aborts with `EREAD_MISMATCH`, the workload's invariant (the audit requires no
/// such abort).
module 0x1::KvStore {
    use std::vector;
    use 0x1::Coin;

    struct Slot has key {
        value: vector<u8>,
    }

    const EREAD_MISMATCH: u64 = 1;

    /// Where key `key` of `owner` lives: 16 bytes of SHA-256 over a domain tag, the owner and the
    /// key, so slots never meet accounts or each other.
    native fun slot_address(owner: address, key: u64): address;

    /// The signer of `owner`'s slot for `key`, to `move_to` it the first time it is written.
    native fun slot_signer(owner: &signer, key: u64): signer;

    /// Keys `first_key` to `first_key + keys - 1`; each value's bytes count up from
    /// `(key + version) mod 256`, so a rewrite with a new version changes every byte.
    public entry fun write_read(
        account: signer,
        first_key: u64,
        keys: u64,
        value_size: u64,
        version: u64,
    ) acquires Slot {
        let owner = *Coin::borrow_address(&account);
        let i = 0;
        while (i < keys) {
            let key = first_key + i;
            let value = value_of(key, version, value_size);
            let slot = slot_address(owner, key);
            if (exists<Slot>(slot)) {
                borrow_global_mut<Slot>(slot).value = value;
            } else {
                move_to(&slot_signer(&account, key), Slot { value });
            };
            i = i + 1;
        };
        let i = 0;
        while (i < keys) {
            let key = first_key + i;
            let stored = &borrow_global<Slot>(slot_address(owner, key)).value;
            assert!(*stored == value_of(key, version, value_size), EREAD_MISMATCH);
            i = i + 1;
        };
    }

    fun value_of(key: u64, version: u64, size: u64): vector<u8> {
        let value = vector::empty<u8>();
        let byte = (key % 256 + version % 256) % 256;
        let i = 0;
        while (i < size) {
            vector::push_back(&mut value, (byte as u8));
            byte = (byte + 1) % 256;
            i = i + 1;
        };
        value
    }
}
