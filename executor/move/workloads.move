// The scripts of `--payload=script` for the workloads beside the transfer: each calls its entry
// function, so the two payload kinds run the same code and differ only in how they enter the VM.
// The executor tells them apart by function name.

script {
    use 0x1::DoNothing;
    fun do_nothing(account: signer) { DoNothing::do_nothing(account) }
}

script {
    use 0x1::CpuHeavy;
    fun cpu_heavy(account: signer, length: u64) { CpuHeavy::sort(account, length) }
}

script {
    use 0x1::KvStore;
    fun kv_store(account: signer, first_key: u64, keys: u64, value_size: u64, version: u64) {
        KvStore::write_read(account, first_key, keys, value_size, version)
    }
}

script {
    use 0x1::SmallBank;
    fun amalgamate(account: signer, to: address) { SmallBank::amalgamate(account, to) }
}

script {
    use 0x1::SmallBank;
    fun get_balance(account: signer) { SmallBank::balance(account) }
}

script {
    use 0x1::SmallBank;
    fun deposit_checking(account: signer, amount: u64) {
        SmallBank::deposit_checking(account, amount)
    }
}

script {
    use 0x1::SmallBank;
    fun send_payment(account: signer, to: address, amount: u64) {
        SmallBank::send_payment(account, to, amount)
    }
}

script {
    use 0x1::SmallBank;
    fun transact_savings(account: signer, amount: u64) {
        SmallBank::transact_savings(account, amount)
    }
}

script {
    use 0x1::SmallBank;
    fun write_check(account: signer, amount: u64) { SmallBank::write_check(account, amount) }
}
