/// The vector operations of Move's standard library, declared the way the compiler maps them to
/// the VM's vector instructions (`#[bytecode_instruction]`): compiled only as a dependency of the
/// workload modules, it is never published and costs no call at run time. Declared here instead
/// of taken from `std`, whose crate drags in the prover (see `move_compile.rs`).
module std::vector {
    #[bytecode_instruction]
    native public fun empty<Element>(): vector<Element>;

    #[bytecode_instruction]
    native public fun length<Element>(v: &vector<Element>): u64;

    #[bytecode_instruction]
    native public fun borrow<Element>(v: &vector<Element>, i: u64): &Element;

    #[bytecode_instruction]
    native public fun push_back<Element>(v: &mut vector<Element>, e: Element);

    #[bytecode_instruction]
    native public fun swap<Element>(v: &mut vector<Element>, i: u64, j: u64);
}
