//! Taking the store's locks, poisoned or not.

use std::sync::{Mutex, MutexGuard};

/// A panic while holding one of these locks cannot leave a map half-updated (every critical
/// section is a single map operation), so a poisoned lock is still safe to use.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
