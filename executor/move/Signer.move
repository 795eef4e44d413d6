/// The one piece of the Move standard library the coin needs. Its native half is registered by
/// the executor (`move_vm.rs`), so the whole `std` package (and the prover it drags in) stays out.
module 0x1::Signer {
    /// Borrows the address inside a signer.
    native public fun borrow_address(s: &signer): &address;

    public fun address_of(s: &signer): address {
        *borrow_address(s)
    }
}
