//! The counting allocator, shared with the consensus fuzz crate (one source file, two crates).

#[path = "../../../consensus/fuzz/src/alloc.rs"]
pub mod alloc;

#[global_allocator]
static ALLOCATOR: alloc::Counting = alloc::Counting;
