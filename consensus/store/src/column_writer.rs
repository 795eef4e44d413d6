//! A durable store's writes, each column on a thread of its own, off the async runtime.
//!
//! A write to disk blocks: a batch's `pwrite` copies hundreds of KB into the page cache (and
//! stalls for as long as the kernel throttles a writer with too many dirty pages), a safety
//! write ends in an `fdatasync` that waits for the device. Made on a tokio worker, either stalls
//! every task queued on that worker: network reads, acknowledgements, the consensus core. So a
//! [`Store`](crate::Store) on a durable backend hands each write to its column's writer
//! thread and awaits the result (garbage collection's deletes excepted: nobody waits for them);
//! the runtime's thread runs other tasks meanwhile. One thread per column, so the safety state
//! written before a vote never waits behind a queue of batches. Reads stay on the caller's
//! thread: the logs serve what this life wrote from memory.
//!
//! The threads are named `store-<column>` ([`thread_name`]), so a node can tell their CPU time
//! from the runtime's: on a machine with cores to spare, the store's copies and syncs run beside
//! consensus rather than on its threads.
//!
//! Each thread ends once its writer is dropped, after the writes queued before; dropping a
//! writer waits for that, so a store reopened at the same path finds every file closed.

use crate::backend::Backend;
use crate::column::Column;
use crate::error::StoreError;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// What the writer thread does: one backend call, whose result goes back to the caller.
type Job = Box<dyn FnOnce(&dyn Backend) + Send>;

/// The prefix of every writer thread's name.
pub const THREAD_PREFIX: &str = "store-";

/// The name of `column`'s writer thread (under Linux's 15 bytes).
pub fn thread_name(column: Column) -> String {
    format!("{THREAD_PREFIX}{}", column.name())
}

pub struct ColumnWriter {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl ColumnWriter {
    /// Starts `column`'s writer thread over `backend`.
    pub fn spawn(column: Column, backend: Arc<dyn Backend>) -> Result<Self, StoreError> {
        let (jobs, rx_jobs) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name(thread_name(column))
            .spawn(move || {
                for job in rx_jobs {
                    job(backend.as_ref());
                }
            })
            .map_err(|e| StoreError::backend(column, format!("cannot start its writer: {e}")))?;
        Ok(ColumnWriter {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Queues `job` on the writer thread, behind what was queued before; nobody waits for it.
    pub fn submit(&self, job: impl FnOnce(&dyn Backend) + Send + 'static) {
        if let Some(jobs) = &self.jobs {
            let _ = jobs.send(Box::new(job));
        }
    }

    /// Runs `write` on the writer thread; resolves with its result once it has run.
    pub async fn run<F>(&self, write: F) -> Result<(), StoreError>
    where
        F: FnOnce(&dyn Backend) -> Result<(), StoreError> + Send + 'static,
    {
        let (tx_done, rx_done) = oneshot::channel();
        let job: Job = Box::new(move |backend| {
            let _ = tx_done.send(write(backend));
        });
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            return Err(StoreError::Closed);
        }
        rx_done.await.map_err(|_| StoreError::Closed)?
    }
}

impl Drop for ColumnWriter {
    fn drop(&mut self) {
        // Closing the channel ends the thread once it has run what was queued.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryBackend;
    use bytes::Bytes;
    use futures::FutureExt;

    #[tokio::test]
    async fn writes_run_on_the_columns_thread_in_order() {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
        let writer = ColumnWriter::spawn(Column::Batches, backend.clone()).expect("spawn");
        let (tx_names, rx_names) = std::sync::mpsc::channel();
        for i in 0..3u8 {
            let tx_names = tx_names.clone();
            writer
                .run(move |backend| {
                    let name = std::thread::current().name().map(str::to_owned);
                    let _ = tx_names.send(name);
                    backend.put(Column::Batches, &[i], Bytes::from(vec![i]))
                })
                .await
                .expect("write");
        }
        let names: Vec<_> = rx_names.try_iter().collect();
        assert_eq!(names, vec![Some("store-batches".to_string()); 3]);
        assert_eq!(backend.len(Column::Batches), 3);
    }

    #[tokio::test]
    async fn an_error_reaches_the_caller() {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
        let writer = ColumnWriter::spawn(Column::Safety, backend).expect("spawn");
        let result = writer
            .run(|_| Err(StoreError::backend(Column::Safety, "disk full")))
            .await;
        assert!(result
            .err()
            .is_some_and(|e| e.to_string().contains("disk full")));
    }

    #[test]
    fn dropping_the_writer_waits_for_what_was_queued() {
        let backend: Arc<dyn Backend> = Arc::new(MemoryBackend::default());
        let writer = ColumnWriter::spawn(Column::Blocks, backend.clone()).expect("spawn");
        for i in 0..100u8 {
            // Polled once, so the job is queued, then abandoned without waiting for its result.
            let _ = writer
                .run(move |backend| {
                    std::thread::sleep(std::time::Duration::from_micros(50));
                    backend.put(Column::Blocks, &[i], Bytes::new())
                })
                .now_or_never();
        }
        drop(writer);
        assert_eq!(backend.len(Column::Blocks), 100);
    }
}
