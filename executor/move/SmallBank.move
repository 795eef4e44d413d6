/// Blockbench's SmallBank (after H-Store's): every account has a checking and a savings balance,
/// and six procedures move money between them, other accounts and the account's own coin. The
/// signer is always the account that pays, so no transaction spends another's money. Money only
/// moves, it never appears or vanishes: a deposit comes out of the account's coin (`Coin::
/// withdraw`) and a check is paid into it (`Coin::deposit`), so coins + checking + savings + fees
/// stay the genesis supply, which the audit checks (`total_supply`). Where H-Store lets a check
/// overdraw with a penalty, this one aborts (`EINSUFFICIENT_FUNDS`): balances are unsigned.
module 0x1::SmallBank {
    use 0x1::Coin;

    struct Account has key {
        checking: u64,
        savings: u64,
    }

    const EINSUFFICIENT_FUNDS: u64 = 1;

    /// Genesis (`--workload=smallbank`): opens the signer's account with `checking` and `savings`
    /// taken out of its coin. Private: the executor calls it with bypassed visibility.
    fun open(account: &signer, checking: u64, savings: u64) {
        Coin::withdraw(account, checking + savings);
        move_to(account, Account { checking, savings })
    }

    /// Amalgamate: everything in the signer's checking and savings goes to `to`'s checking.
    public entry fun amalgamate(account: signer, to: address) acquires Account {
        let from = borrow_global_mut<Account>(*Coin::borrow_address(&account));
        let total = from.checking + from.savings;
        from.checking = 0;
        from.savings = 0;
        let to = borrow_global_mut<Account>(to);
        to.checking = to.checking + total;
    }

    /// GetBalance: reads the signer's checking and savings (a transaction returns nothing: the
    /// sum is computed, as the procedure does, and dropped).
    public entry fun balance(account: signer) acquires Account {
        let account = borrow_global<Account>(*Coin::borrow_address(&account));
        let _total = account.checking + account.savings;
    }

    /// DepositChecking: `amount` from the signer's coin into its checking.
    public entry fun deposit_checking(account: signer, amount: u64) acquires Account {
        Coin::withdraw(&account, amount);
        let account = borrow_global_mut<Account>(*Coin::borrow_address(&account));
        account.checking = account.checking + amount;
    }

    /// SendPayment: `amount` from the signer's checking to `to`'s checking.
    public entry fun send_payment(account: signer, to: address, amount: u64) acquires Account {
        let from = borrow_global_mut<Account>(*Coin::borrow_address(&account));
        assert!(from.checking >= amount, EINSUFFICIENT_FUNDS);
        from.checking = from.checking - amount;
        let to = borrow_global_mut<Account>(to);
        to.checking = to.checking + amount;
    }

    /// TransactSavings: `amount` from the signer's coin into its savings.
    public entry fun transact_savings(account: signer, amount: u64) acquires Account {
        Coin::withdraw(&account, amount);
        let account = borrow_global_mut<Account>(*Coin::borrow_address(&account));
        account.savings = account.savings + amount;
    }

    /// WriteCheck: pays `amount` out of the signer's checking into its coin, the part checking
    /// cannot cover out of savings.
    public entry fun write_check(account: signer, amount: u64) acquires Account {
        let owner = *Coin::borrow_address(&account);
        let bank = borrow_global_mut<Account>(owner);
        assert!(bank.checking + bank.savings >= amount, EINSUFFICIENT_FUNDS);
        if (bank.checking >= amount) {
            bank.checking = bank.checking - amount;
        } else {
            bank.savings = bank.savings - (amount - bank.checking);
            bank.checking = 0;
        };
        Coin::deposit(owner, amount);
    }
}
