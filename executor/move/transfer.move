/// The script every Move transaction carries. The executor passes the verified sender as the
/// signer, so a transaction can only spend its own balance.
script {
    use 0x1::Coin;

    fun main(account: signer, to: address, amount: u64) {
        Coin::transfer(&account, to, amount)
    }
}
