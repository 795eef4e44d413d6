//! The allocator of both binaries (the replica and the client): mimalloc, and what it does with
//! memory it frees.
//!
//! mimalloc instead of glibc malloc: the Move VM allocates and frees several small objects per
//! transaction (values, frames, change sets), and glibc's allocator took about 12 % of a Move
//! transfer in profiles; mimalloc's thread-local free lists make those calls cheap.
//!
//! A node allocates a batch-sized buffer (up to `batch_size`, 500 KB by default) for every batch
//! it seals or reads off a peer's connection, hundreds a second, and frees it once the batch is
//! stored and committed. Two of mimalloc's defaults turn that churn into kernel work:
//! - it asks for transparent huge pages on its segments, so a buffer that lands on memory the
//!   kernel took back costs a fault that clears 2 MiB (`clear_page_erms` under
//!   `mi_page_free_list_extend`). Saturated `hotstuff`, 4 nodes of 0.4 virtual CPUs on a 2-core
//!   machine, spent about half its CPU there; without huge pages a node's CPU per transaction
//!   fell by about a third (`docs/results/dilation.md` shows the runs);
//! - it returns freed memory to the kernel 10 ms after it is freed, so at that pace new buffers
//!   land on pages the kernel must fault in and zero again. A second keeps that memory for reuse
//!   under load and still gives it back once the node idles.
//!
//! The purge delay is a duration like any other, so `--dilation K` makes it K seconds of real
//! time: otherwise a dilated node would return and fault its memory K times as often per
//! transaction, and its CPU per transaction would grow with K.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` of mimalloc 2's `mimalloc.h` (the `libmimalloc-sys` bindings name
/// the options around it, not this one).
const PURGE_DELAY_OPTION: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory is kept before it is returned to the kernel, in ms of the process's
/// (dilated) time.
pub const PURGE_DELAY_MS: i64 = 1_000;

/// Applies the allocator settings for a process whose clock runs `dilation` times slower than
/// real time; called once the flags are read, before the process's real work allocates.
pub fn tune(dilation: u32) -> std::io::Result<()> {
    let delay = PURGE_DELAY_MS.saturating_mul(i64::from(dilation));
    // SAFETY: sets one of mimalloc's runtime options, which it reads on each purge; any value
    // is valid for this option (-1 never purges, 0 purges at once).
    unsafe { libmimalloc_sys::mi_option_set(PURGE_DELAY_OPTION, delay as std::os::raw::c_long) };
    // mimalloc's own switch (`allow_thp`) is read when it reserves its first arena, before
    // `main`, and that arena is already marked for huge pages; the process-wide flag holds
    // every fault from now on, whatever the mapping asked for.
    // SAFETY: PR_SET_THP_DISABLE takes an integer flag and no pointers.
    if unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(option: libmimalloc_sys::mi_option_t) -> std::os::raw::c_long {
        // SAFETY: reads an option.
        unsafe { libmimalloc_sys::mi_option_get(option) }
    }

    fn allow_huge_pages() {
        // SAFETY: PR_SET_THP_DISABLE takes an integer flag and no pointers.
        assert_eq!(
            unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 0, 0, 0, 0) },
            0
        );
    }

    fn huge_pages_disabled() -> bool {
        // SAFETY: PR_GET_THP_DISABLE takes no pointers and returns the flag.
        unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1 }
    }

    #[test]
    fn tuning_sets_the_purge_delay_in_dilated_time_and_disables_huge_pages() {
        // mimalloc's defaults tell the options apart: purge delay 10 ms, and the option before
        // it (eager-commit delay) left alone. An environment that sets MIMALLOC_PURGE_DELAY
        // changes the first.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(option(PURGE_DELAY_OPTION), 10);
        }
        let eager = option(libmimalloc_sys::mi_option_eager_commit_delay);
        // The flag is inherited: whatever started the test may have set it already.
        allow_huge_pages();
        assert!(!huge_pages_disabled());
        tune(1).expect("tuning");
        assert_eq!(option(PURGE_DELAY_OPTION), 1_000);
        assert_eq!(option(libmimalloc_sys::mi_option_eager_commit_delay), eager);
        assert!(huge_pages_disabled());
        // Dilated K times, the delay is K times as long in real time.
        tune(16).expect("tuning");
        assert_eq!(option(PURGE_DELAY_OPTION), 16_000);
        tune(1).expect("tuning");
    }
}
