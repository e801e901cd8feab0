//! CPU priority of background work: flushes and merges run below the
//! threads that answer queries, so that on a busy machine they take the
//! spare CPU rather than the queries' share.

/// Lowers the calling thread's CPU priority to `nice` (Linux: the nice value
/// is per thread). Best effort: a failure is logged and ignored.
pub fn lower_this_thread(nice: i32) {
    // SAFETY: gettid has no preconditions; setpriority only reads its integer
    // arguments and changes the scheduling weight of this thread.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if r != 0 {
        tracing::warn!(
            "could not lower the maintenance thread's priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// The calling thread's nice value.
pub fn this_thread_nice() -> i32 {
    // SAFETY: as above; getpriority only reads its arguments.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_calling_thread_is_lowered() {
        let before = this_thread_nice();
        let inside = std::thread::spawn(|| {
            lower_this_thread(7);
            this_thread_nice()
        })
        .join()
        .unwrap();
        assert_eq!(inside, 7.max(before));
        assert_eq!(this_thread_nice(), before);
    }
}
