/// The account of the adapter (`--vm=adapter`), after Diem's `DiemAccount`: a sequence number
/// and an authentication key in Move, checked by a prologue before the transaction's payload
/// runs and advanced by an epilogue that charges the fee. The adapter (`adapter.rs`) calls these
/// private functions with `execute_function_bypass_visibility`, unmetered, as Diem's adapter
/// runs its prologue and epilogue; no transaction can call them.
module 0x1::Account {
    use 0x1::Coin;

    struct Account has key {
        sequence_number: u64,
        /// SHA-256 of the account's ed25519 public key.
        authentication_key: vector<u8>,
    }

    /// Prologue failures (the transaction is discarded: no fee, sequence number unchanged).
    /// The adapter maps each to a reason it counts.
    const ESEQUENCE_NUMBER_TOO_OLD: u64 = 1;
    const ESEQUENCE_NUMBER_TOO_NEW: u64 = 2;
    const EBAD_AUTHENTICATION_KEY: u64 = 3;
    const ECANT_PAY_GAS_DEPOSIT: u64 = 4;

    /// Genesis: the account resource next to the account's coin.
    fun create(account: &signer, authentication_key: vector<u8>) {
        move_to(account, Account { sequence_number: 0, authentication_key })
    }

    /// Runs before the payload, in the same session: the transaction must carry the account's
    /// next sequence number and the key of the account, and the sender must be able to pay for
    /// all the gas it may use (`max_fee` = max gas * gas price), as Diem's prologue checks.
    fun prologue(
        sender: address,
        sequence_number: u64,
        authentication_key: vector<u8>,
        max_fee: u64,
    ) acquires Account {
        let account = borrow_global<Account>(sender);
        assert!(sequence_number >= account.sequence_number, ESEQUENCE_NUMBER_TOO_OLD);
        assert!(sequence_number == account.sequence_number, ESEQUENCE_NUMBER_TOO_NEW);
        assert!(authentication_key == *&account.authentication_key, EBAD_AUTHENTICATION_KEY);
        assert!(Coin::balance(sender) >= max_fee, ECANT_PAY_GAS_DEPOSIT);
    }

    /// Runs after the payload (or, if the payload failed, alone in a fresh session): the
    /// sequence number is consumed and the fee moves to the fee account. The prologue checked
    /// that the balance covers the largest fee, so in a fresh session this cannot fail.
    fun epilogue(sender: &signer, sender_address: address, fee: u64, fee_account: address)
    acquires Account {
        let account = borrow_global_mut<Account>(sender_address);
        account.sequence_number = account.sequence_number + 1;
        Coin::transfer(sender, fee_account, fee);
    }

    /// The epilogue when the fees of a block are credited together (`--fees=block`): the
    /// sequence number is consumed and the fee leaves the sender's coin, with the same check as
    /// `epilogue`'s transfer, but the fee account is not touched here. Credited per transaction,
    /// every transaction of a block writes that one account, and no two could run in parallel.
    fun epilogue_deferring_fee(sender: &signer, sender_address: address, fee: u64)
    acquires Account {
        let account = borrow_global_mut<Account>(sender_address);
        account.sequence_number = account.sequence_number + 1;
        Coin::withdraw(sender, fee);
    }

    /// After the last transaction of a block run with `epilogue_deferring_fee`: the fees they
    /// paid, all at once, to the fee account.
    fun credit_fees(fee_account: address, total: u64) {
        Coin::deposit(fee_account, total);
    }

    public fun sequence_number(owner: address): u64 acquires Account {
        borrow_global<Account>(owner).sequence_number
    }
}
