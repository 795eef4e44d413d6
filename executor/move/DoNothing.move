/// Blockbench's DoNothing: a call with no effect, so what a run measures is everything around the
/// payload (the session, the adapter's prologue and epilogue, consensus and signatures).
module 0x1::DoNothing {
    public entry fun do_nothing(_account: signer) {}
}
