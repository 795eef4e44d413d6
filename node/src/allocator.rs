//! The node's allocator: mimalloc, and how long it keeps freed memory before returning it.
//!
//! mimalloc instead of glibc malloc: the Move VM allocates and frees several small objects per
//! transaction (values, frames, change sets), and glibc's allocator took about 12 % of a Move
//! transfer in profiles; mimalloc's thread-local free lists make those calls cheap.
//!
//! A node also allocates a batch-sized buffer (up to `batch_size`, 500 KB by default) for every
//! batch it seals or reads off a peer's connection, a few hundred a second, and frees it once
//! the batch is stored and committed. mimalloc returns freed memory to the kernel 10 ms after it
//! is freed by default, so at that pace new buffers land on pages the kernel must fault in and
//! zero again (`mi_page_free_list_extend` under the receivers in profiles): with a delay of a
//! second, a `hotstuff` node at 400,000 tx/s spent about a sixth less CPU per transaction on a
//! 2-core machine (`fab local`, alternated runs). A second keeps that memory for reuse under
//! load and still gives it back once the node idles.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` of mimalloc 2's `mimalloc.h` (the `libmimalloc-sys` bindings name the
/// options around it, not this one).
const PURGE_DELAY_OPTION: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory is kept before it is returned to the kernel, in ms.
const PURGE_DELAY_MS: std::os::raw::c_long = 1_000;

/// Applies the node's allocator settings; called first thing in `main`.
pub fn tune() {
    // SAFETY: sets one of mimalloc's runtime options, which it reads on each purge; any value
    // is valid for this option (-1 never purges, 0 purges at once).
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY_OPTION, PURGE_DELAY_MS) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        // mimalloc's defaults tell the options apart: purge delay 10 ms, the eager-commit delay
        // before it 1 segment. (An environment that sets MIMALLOC_PURGE_DELAY changes the first.)
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: reads an option.
            let default = unsafe { libmimalloc_sys::mi_option_get(PURGE_DELAY_OPTION) };
            assert_eq!(default, 10);
        }
        let before = unsafe {
            // SAFETY: reads an option.
            libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_eager_commit_delay)
        };
        tune();
        // SAFETY: reads options.
        let (delay, eager) = unsafe {
            (
                libmimalloc_sys::mi_option_get(PURGE_DELAY_OPTION),
                libmimalloc_sys::mi_option_get(libmimalloc_sys::mi_option_eager_commit_delay),
            )
        };
        assert_eq!(delay, PURGE_DELAY_MS);
        assert_eq!(eager, before);
    }
}
