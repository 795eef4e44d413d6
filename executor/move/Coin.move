/// A single fungible balance per account. The native executor (`native.rs`) makes the same checks
/// in the same order so both executors fail the same transactions for the same reasons.
module 0x1::Coin {
    struct Coin has key {
        value: u64,
    }

    /// SmallBank keeps money outside the coins (checking and savings): it takes it out of a coin
    /// and puts it back through `withdraw` and `deposit`, which no other module may call. The
    /// adapter's `Account` uses the same two to charge fees per transaction and credit them per
    /// block (`Account::epilogue_deferring_fee`, `Account::credit_fees`).
    friend 0x1::SmallBank;
    friend 0x1::Account;

    const EINSUFFICIENT_BALANCE: u64 = 1;

    /// The address inside a signer. The one native the coin needs (the executor registers it,
    /// `move_natives.rs`): declaring it here instead of in a `Signer` module, as `std` does, saves
    /// the VM a module lookup and a call frame per transfer, and keeps `std` (and the prover it
    /// drags in) out of the build. Public for the workload modules.
    public native fun borrow_address(s: &signer): &address;

    /// Creates an account's balance at genesis. Private on purpose: no script can call it; the
    /// executor reaches it with `execute_function_bypass_visibility`.
    fun mint(account: &signer, value: u64) {
        move_to(account, Coin { value })
    }

    /// Moves `amount` from the signer's balance to `to`. Aborts, changing nothing, if the
    /// sender cannot pay, and with the VM's `MISSING_DATA` if either account has no coin (the
    /// executor tells which: an explicit `exists` check would cost every transfer two more
    /// lookups); the credit aborts on overflow.
    public fun transfer(from: &signer, to: address, amount: u64) acquires Coin {
        let sender = borrow_global_mut<Coin>(*borrow_address(from));
        assert!(sender.value >= amount, EINSUFFICIENT_BALANCE);
        sender.value = sender.value - amount;
        let receiver = borrow_global_mut<Coin>(to);
        receiver.value = receiver.value + amount;
    }

    /// What a transaction calls without a script (`--payload=entry`): the transfer as an entry
    /// function, so the VM neither hashes nor loads a script per call. The same two frames as
    /// the script (`main`, then `transfer`), so the two payload kinds differ only in how they
    /// enter the VM.
    public entry fun transfer_entry(from: signer, to: address, amount: u64) acquires Coin {
        transfer(&from, to, amount)
    }

    /// Takes `amount` out of the signer's coin for SmallBank, which must account for it.
    public(friend) fun withdraw(from: &signer, amount: u64) acquires Coin {
        let coin = borrow_global_mut<Coin>(*borrow_address(from));
        assert!(coin.value >= amount, EINSUFFICIENT_BALANCE);
        coin.value = coin.value - amount;
    }

    /// Puts `amount` SmallBank holds back into `to`'s coin.
    public(friend) fun deposit(to: address, amount: u64) acquires Coin {
        let coin = borrow_global_mut<Coin>(to);
        coin.value = coin.value + amount;
    }

    public fun balance(owner: address): u64 acquires Coin {
        borrow_global<Coin>(owner).value
    }
}
