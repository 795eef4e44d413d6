//! A counting allocator for unit tests: how many bytes a piece of code held at once, counted
//! per thread so tests running side by side do not disturb each other. A crate whose tests use
//! [`peak_during`] makes [`Counting`] the global allocator of its test build (a `#[cfg(test)]`
//! static marked `#[global_allocator]`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts every allocation of the thread that makes it, then hands it to the system allocator.
pub struct Counting;

thread_local! {
    static CURRENT: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

fn account(bytes: isize) {
    // Ignored while the thread's locals are being torn down.
    let _ = CURRENT.try_with(|current| {
        let now = current.get() + bytes;
        current.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        account(layout.size() as isize);
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        account(-(layout.size() as isize));
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        account(new_size as isize - layout.size() as isize);
        System.realloc(ptr, layout, new_size)
    }
}

/// The most bytes this thread held at once while `f` ran, beyond what it held before (zero unless
/// [`Counting`] is the global allocator).
pub fn peak_during<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = CURRENT.with(Cell::get);
    PEAK.with(|peak| peak.set(base));
    let result = f();
    let peak = PEAK.with(Cell::get);
    (result, (peak - base).max(0) as usize)
}
