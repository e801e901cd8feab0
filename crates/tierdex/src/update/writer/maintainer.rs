//! The background maintainer: refreshes on an interval and flushes once
//! the buffer or the log is over its budget (waiting longer after each
//! failed flush), at a lower CPU priority than searches.

use super::*;

/// Nice value of the background maintenance thread (searches run at 0).
pub(super) const MAINTENANCE_NICE: i32 = 10;

/// The background maintenance of [`IndexWriter::maintain`]; dropping it
/// stops the thread (after the step in progress).
pub struct Maintainer {
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Maintainer {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl IndexWriter {
    /// Starts a background thread, at a lower CPU priority than the threads
    /// that search, that refreshes every `interval` and flushes once the
    /// buffer is over its budget (so that flushes and merges neither block
    /// the writes that fill the buffer nor take CPU from searches). It stops
    /// when the returned handle is dropped.
    pub fn maintain(self: &Arc<Self>, interval: std::time::Duration) -> Maintainer {
        self.maintained.store(true, std::sync::atomic::Ordering::Relaxed);
        let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let (w, s) = (self.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("tierdex-maintain".into())
            .spawn(move || {
                crate::update::priority::lower_this_thread(MAINTENANCE_NICE);
                loop {
                    let (lock, cv) = &*s;
                    let stopped = lock.lock().unwrap_or_else(|p| p.into_inner());
                    let (stopped, _) = cv
                        .wait_timeout_while(stopped, interval, |stop| !*stop)
                        .unwrap_or_else(|p| p.into_inner());
                    if *stopped {
                        break;
                    }
                    drop(stopped);
                    let result = (|| {
                        let due = {
                            let st = w.lock();
                            w.flush_due(&st, 1)
                        };
                        if due {
                            w.flush()?;
                        }
                        w.refresh().map(|_| ())
                    })();
                    if let Err(e) = result {
                        tracing::error!("background maintenance failed: {e}");
                    }
                }
                w.maintained.store(false, std::sync::atomic::Ordering::Relaxed);
            })
            .expect("spawning the maintenance thread");
        Maintainer {
            stop,
            thread: Some(thread),
        }
    }
}
