//! The query workers: plain threads fed by a bounded queue, so evaluation
//! never blocks the async executor and overload is refused, not queued.

use crossbeam_channel::{bounded, Sender, TrySendError};
use tokio::sync::oneshot;

type Job = Box<dyn FnOnce(usize) + Send>;

/// The queue is full: the request should be answered 503.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overloaded;

/// A fixed set of worker threads.
pub struct Pool {
    tx: Sender<Job>,
}

impl Pool {
    /// Starts `threads` workers behind a queue of `queue` jobs.
    pub fn new(threads: usize, queue: usize) -> Pool {
        let (tx, rx) = bounded::<Job>(queue);
        for t in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("tierdex-query-{t}"))
                .spawn(move || {
                    // Ends when the pool (every sender) is dropped.
                    for job in rx {
                        job(t);
                    }
                })
                .expect("spawning a query worker");
        }
        Pool { tx }
    }

    /// Queues `f` (given the worker's number); its result arrives on the receiver.
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce(usize) -> T + Send + 'static,
    ) -> Result<oneshot::Receiver<T>, Overloaded> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move |t| {
            // The requester may have given up (timeout): nothing to do then.
            let _ = tx.send(f(t));
        });
        match self.tx.try_send(job) {
            Ok(()) => Ok(rx),
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => Err(Overloaded),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_refuses_and_every_accepted_job_runs() {
        let pool = Pool::new(1, 2);
        let (release_tx, release_rx) = crossbeam_channel::bounded::<()>(0);
        let (started_tx, started_rx) = crossbeam_channel::bounded::<()>(1);
        // Occupy the only worker.
        let first = pool
            .submit(move |_| {
                started_tx.send(()).unwrap();
                release_rx.recv().unwrap();
                1
            })
            .unwrap();
        started_rx.recv().unwrap();
        let queued: Vec<_> = (0..2).map(|i| pool.submit(move |t| (t, i)).unwrap()).collect();
        assert_eq!(pool.submit(|_| ()).err(), Some(Overloaded));
        release_tx.send(()).unwrap();
        assert_eq!(first.blocking_recv().unwrap(), 1);
        for (i, rx) in queued.into_iter().enumerate() {
            assert_eq!(rx.blocking_recv().unwrap(), (0, i));
        }
    }
}
