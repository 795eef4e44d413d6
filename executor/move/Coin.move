/// A single fungible balance per account. The abort codes are mirrored by the native executor
/// (`native.rs`) so both executors fail the same transactions for the same reasons.
module 0x1::Coin {
    use 0x1::Signer;

    struct Coin has key {
        value: u64,
    }

    const EINSUFFICIENT_BALANCE: u64 = 1;
    const EUNKNOWN_DESTINATION: u64 = 2;
    const EUNKNOWN_SENDER: u64 = 3;

    /// Creates an account's balance at genesis. Private on purpose: no script can call it; the
    /// executor reaches it with `execute_function_bypass_visibility`.
    fun mint(account: &signer, value: u64) {
        move_to(account, Coin { value })
    }

    /// Moves `amount` from the signer's balance to `to`. Aborts, changing nothing, if either
    /// account is missing or the sender cannot pay; the credit aborts on overflow.
    public fun transfer(from: &signer, to: address, amount: u64) acquires Coin {
        let from_addr = Signer::address_of(from);
        assert!(exists<Coin>(from_addr), EUNKNOWN_SENDER);
        assert!(exists<Coin>(to), EUNKNOWN_DESTINATION);
        let sender = borrow_global_mut<Coin>(from_addr);
        assert!(sender.value >= amount, EINSUFFICIENT_BALANCE);
        sender.value = sender.value - amount;
        let receiver = borrow_global_mut<Coin>(to);
        receiver.value = receiver.value + amount;
    }

    public fun balance(owner: address): u64 acquires Coin {
        borrow_global<Coin>(owner).value
    }
}
