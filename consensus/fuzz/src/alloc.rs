//! A counting global allocator: the fuzz targets measure the peak number of bytes a decoder holds
//! at once and fail when it is not bounded by the size of the input, which is how a length field
//! read from the input and trusted (`Vec::with_capacity(len)`) shows up.
//!
//! Shared by the consensus and executor fuzz crates (the executor's includes this file).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Slack for the fixed costs of a decode (error values and their messages).
pub const SLACK: usize = 4 * 1024;
/// A decoded value may hold each input byte a few times (a `Vec` grows by doubling).
pub const FACTOR: usize = 4;

pub struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = CURRENT.fetch_add(bytes, Relaxed) + bytes;
    PEAK.fetch_max(now, Relaxed);
}

fn shrank(bytes: usize) {
    CURRENT.fetch_sub(bytes, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc_zeroed(layout);
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        new
    }
}

/// Runs `f` and returns its result with the most bytes that were allocated at once while it ran,
/// beyond what was live when it started (so it includes what `f` returns).
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = CURRENT.load(Relaxed);
    PEAK.store(base, Relaxed);
    let result = f();
    (result, PEAK.load(Relaxed).saturating_sub(base))
}

/// Fails the run when decoding `input_len` bytes held more than `FACTOR * input_len + SLACK +
/// extra` bytes at once; `extra` is a configured bound the decoder is allowed to reach.
pub fn assert_bounded(what: &str, input_len: usize, peak: usize, extra: usize) {
    let bound = FACTOR * input_len + SLACK + extra;
    assert!(
        peak <= bound,
        "{what}: {input_len} input bytes made the decoder hold {peak} bytes (bound {bound})"
    );
}
