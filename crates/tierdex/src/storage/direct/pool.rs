//! The shared buffer pool: fixed 4 KiB frames, a page map, CLOCK eviction.
//!
//! All bookkeeping (page map, frame states, pin counts, clock hand, counters)
//! sits behind one mutex that is held only for that bookkeeping, never across
//! device I/O or while copying bytes out. A frame goes
//! `Free -> Loading -> Ready -> (evicted) -> Loading ...`; a reader that finds
//! its page `Loading` pins it and waits on a condition variable until the
//! loader publishes it (`Ready`) or gives up (`Failed`). Pinned frames are
//! never evicted, so a pinned `Ready` frame's bytes are immutable and can be
//! read without the lock.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use rustc_hash::FxHashMap;

use super::buf::AlignedBuf;
use super::PAGE;
use crate::error::{Error, Result};

/// The fewest frames a pool may have.
pub const MIN_POOL_PAGES: usize = 4;

/// (file id, page number).
type PageKey = (u64, u64);

/// Why a load failed, kept on the frame for the readers that waited for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Failure {
    errno: Option<i32>,
    kind: io::ErrorKind,
}

impl Failure {
    pub(super) fn of(e: &io::Error) -> Failure {
        Failure {
            errno: e.raw_os_error(),
            kind: e.kind(),
        }
    }

    pub(super) fn to_io_error(self) -> io::Error {
        match self.errno {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::new(self.kind, "the read of this page by another reader failed"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameState {
    /// On the free list.
    Free,
    /// Being read from the device by the reader that pinned it first.
    Loading,
    /// Holds the page named by its key.
    Ready,
    /// The load failed; freed when the last pin goes.
    Failed(Failure),
}

#[derive(Debug, Clone, Copy)]
struct FrameMeta {
    key: PageKey,
    state: FrameState,
    pins: u32,
    referenced: bool,
}

struct State {
    map: FxHashMap<PageKey, u32>,
    meta: Vec<FrameMeta>,
    free: Vec<u32>,
    hand: usize,
    pinned: usize,
    waiters: usize,
    resident: usize,
    hits: u64,
    misses: u64,
    evictions: u64,
}

impl State {
    fn pin(&mut self, f: u32) {
        let m = &mut self.meta[f as usize];
        if m.pins == 0 {
            self.pinned += 1;
        }
        m.pins += 1;
    }

    fn unpin(&mut self, f: u32) {
        let m = &mut self.meta[f as usize];
        debug_assert!(m.pins > 0);
        m.pins = m.pins.saturating_sub(1);
        if m.pins == 0 {
            self.pinned -= 1;
            if matches!(m.state, FrameState::Failed(_)) {
                m.state = FrameState::Free;
                self.free.push(f);
            }
        }
    }

    /// A frame for a new page (unmapped, unpinned): a free one, else the CLOCK
    /// victim (an unpinned `Ready` frame whose second chance is used up).
    /// `None` when every frame is pinned.
    fn take_frame(&mut self) -> Option<u32> {
        if let Some(f) = self.free.pop() {
            return Some(f);
        }
        let n = self.meta.len();
        if self.pinned >= n {
            return None;
        }
        // Unpinned frames that are not free are `Ready` (loading and failed
        // frames are always pinned), so two sweeps find one.
        for _ in 0..2 * n {
            let f = self.hand;
            self.hand = if f + 1 == n { 0 } else { f + 1 };
            let m = &mut self.meta[f];
            if m.pins > 0 || m.state != FrameState::Ready {
                continue;
            }
            if m.referenced {
                m.referenced = false;
                continue;
            }
            let key = m.key;
            m.state = FrameState::Free;
            self.map.remove(&key);
            self.resident -= 1;
            self.evictions += 1;
            return Some(f as u32);
        }
        None
    }

    /// Maps `key` to a new frame in the `Loading` state, pinned once.
    fn start_load(&mut self, key: PageKey) -> Option<u32> {
        let f = self.take_frame()?;
        self.meta[f as usize] = FrameMeta {
            key,
            state: FrameState::Loading,
            pins: 0,
            referenced: true,
        };
        self.pin(f);
        self.map.insert(key, f);
        Some(f)
    }

    fn finish_load(&mut self, f: u32, failure: Option<Failure>) {
        let m = &mut self.meta[f as usize];
        if m.state != FrameState::Loading {
            return;
        }
        match failure {
            None => {
                m.state = FrameState::Ready;
                self.resident += 1;
            }
            Some(failure) => {
                m.state = FrameState::Failed(failure);
                let key = m.key;
                if self.map.get(&key) == Some(&f) {
                    self.map.remove(&key);
                }
            }
        }
    }
}

/// Where the bytes of one page of a read come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Slot {
    /// Resident: pinned, copy it.
    Hit(u32),
    /// Being loaded by another reader: pinned, wait for it.
    Wait(u32),
    /// Missing, this reader loads it into the frame (pinned, `Loading`).
    Load(u32),
    /// Missing and no frame is free (all pinned): read it into private scratch.
    Bypass,
}

/// Counters of a [`BufferPool`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PoolStats {
    /// Pages that reads found in the pool (resident, or being loaded by another reader).
    pub hits: u64,
    /// Pages that reads and prefetches had to fetch from the device.
    pub misses: u64,
    /// Resident pages dropped to make room for others.
    pub evictions: u64,
    /// Pages resident now.
    pub resident_pages: usize,
}

/// A bounded pool of 4 KiB page frames shared by all files opened with it (and by all threads).
///
/// The frames are allocated once, aligned for O_DIRECT; nothing grows later.
pub struct BufferPool {
    frames: AlignedBuf,
    state: Mutex<State>,
    loaded: Condvar,
    next_file_id: AtomicU64,
}

impl std::fmt::Debug for BufferPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BufferPool")
            .field("pages", &self.frames.pages())
            .field("stats", &self.stats())
            .finish()
    }
}

impl BufferPool {
    /// A pool of `bytes / 4096` frames; at least [`MIN_POOL_PAGES`] are required.
    pub fn new(bytes: usize) -> Result<Arc<BufferPool>> {
        let pages = bytes / PAGE;
        if pages < MIN_POOL_PAGES {
            return Err(Error::InvalidArgument(format!(
                "a buffer pool of {bytes} bytes holds {pages} pages of {PAGE} bytes; at least {MIN_POOL_PAGES} \
                 ({} bytes) are needed",
                MIN_POOL_PAGES * PAGE
            )));
        }
        if pages > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "a buffer pool of {bytes} bytes has more than {} pages",
                u32::MAX
            )));
        }
        let frames = AlignedBuf::new(pages).ok_or_else(|| {
            Error::InvalidArgument(format!("cannot allocate a buffer pool of {} bytes", pages * PAGE))
        })?;
        let free_meta = FrameMeta {
            key: (u64::MAX, u64::MAX),
            state: FrameState::Free,
            pins: 0,
            referenced: false,
        };
        Ok(Arc::new(BufferPool {
            frames,
            state: Mutex::new(State {
                map: FxHashMap::default(),
                meta: vec![free_meta; pages],
                // Popped from the end: frames are handed out in address order.
                free: (0..pages as u32).rev().collect(),
                hand: 0,
                pinned: 0,
                waiters: 0,
                resident: 0,
                hits: 0,
                misses: 0,
                evictions: 0,
            }),
            loaded: Condvar::new(),
            next_file_id: AtomicU64::new(0),
        }))
    }

    /// Size of the pool in bytes (a whole number of 4 KiB frames).
    pub fn capacity_bytes(&self) -> usize {
        self.frames.pages() * PAGE
    }

    /// Number of 4 KiB frames.
    pub fn capacity_pages(&self) -> usize {
        self.frames.pages()
    }

    /// Hits, misses, evictions and resident pages so far.
    pub fn stats(&self) -> PoolStats {
        let st = self.lock();
        PoolStats {
            hits: st.hits,
            misses: st.misses,
            evictions: st.evictions,
            resident_pages: st.resident,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing panics while the lock is held; recover the state anyway.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn new_file_id(&self) -> u64 {
        self.next_file_id.fetch_add(1, Ordering::Relaxed)
    }

    /// First byte of frame `f`.
    #[inline]
    pub(super) fn frame_ptr(&self, f: u32) -> *mut u8 {
        self.frames.page_ptr(f as usize)
    }

    /// Looks up `pages` of `file` for a read: one slot per page, every frame
    /// in a slot pinned once.
    pub(super) fn acquire_read(&self, file: u64, pages: std::ops::Range<u64>) -> Vec<Slot> {
        let mut st = self.lock();
        let mut slots = Vec::with_capacity((pages.end - pages.start) as usize);
        for page in pages {
            let key = (file, page);
            if let Some(&f) = st.map.get(&key) {
                st.pin(f);
                st.hits += 1;
                let m = &mut st.meta[f as usize];
                m.referenced = true;
                slots.push(if m.state == FrameState::Ready {
                    Slot::Hit(f)
                } else {
                    Slot::Wait(f)
                });
            } else {
                st.misses += 1;
                slots.push(match st.start_load(key) {
                    Some(f) => Slot::Load(f),
                    None => Slot::Bypass,
                });
            }
        }
        slots
    }

    /// Starts loads for the `pages` of `file` that are not in the pool, in
    /// order, until no frame is left. Returns `(page, frame)` for each load;
    /// resident pages get their reference bit set.
    pub(super) fn acquire_prefetch(&self, file: u64, pages: &[u64]) -> Vec<(u64, u32)> {
        let mut st = self.lock();
        let mut loads = Vec::new();
        for &page in pages {
            let key = (file, page);
            if let Some(&f) = st.map.get(&key) {
                st.meta[f as usize].referenced = true;
                continue;
            }
            match st.start_load(key) {
                Some(f) => {
                    st.misses += 1;
                    loads.push((page, f));
                }
                None => break,
            }
        }
        loads
    }

    /// Publishes the loads of `loads` (`Ready`, or `Failed` with `failure`),
    /// wakes their waiters, unpins `unpin`, then waits until every frame of
    /// `wait` is loaded. The frames of `wait` stay pinned. Returns the failure
    /// of a waited-for frame, if any.
    pub(super) fn finish(
        &self,
        loads: &[u32],
        failure: Option<Failure>,
        unpin: &[u32],
        wait: &[u32],
    ) -> std::result::Result<(), Failure> {
        let mut st = self.lock();
        for &f in loads {
            st.finish_load(f, failure);
        }
        for &f in unpin {
            st.unpin(f);
        }
        if !loads.is_empty() && st.waiters > 0 {
            self.loaded.notify_all();
        }
        let mut result = Ok(());
        for &f in wait {
            loop {
                match st.meta[f as usize].state {
                    FrameState::Loading => {
                        st.waiters += 1;
                        st = self.loaded.wait(st).unwrap_or_else(|e| e.into_inner());
                        st.waiters -= 1;
                    }
                    FrameState::Failed(failure) => {
                        result = Err(failure);
                        break;
                    }
                    _ => break,
                }
            }
            if result.is_err() {
                break;
            }
        }
        result
    }

    /// Unpins `frames`.
    pub(super) fn release(&self, frames: &[u32]) {
        if frames.is_empty() {
            return;
        }
        let mut st = self.lock();
        for &f in frames {
            st.unpin(f);
        }
    }

    /// Frees every unpinned frame of `file` (called when the file is closed).
    pub(super) fn forget_file(&self, file: u64) {
        let mut st = self.lock();
        for f in 0..st.meta.len() {
            let m = st.meta[f];
            if m.key.0 == file && m.pins == 0 && m.state == FrameState::Ready {
                st.meta[f].state = FrameState::Free;
                st.map.remove(&m.key);
                st.resident -= 1;
                st.free.push(f as u32);
            }
        }
    }

    /// Checks the bookkeeping invariants (tests).
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let st = self.lock();
        let mut pinned = 0;
        let mut ready = 0;
        for (f, m) in st.meta.iter().enumerate() {
            if m.pins > 0 {
                pinned += 1;
            }
            match m.state {
                FrameState::Ready => {
                    ready += 1;
                    assert_eq!(st.map.get(&m.key), Some(&(f as u32)), "ready frame {f} not mapped");
                }
                FrameState::Loading => assert!(m.pins > 0, "loading frame {f} unpinned"),
                FrameState::Failed(_) => assert!(m.pins > 0, "failed frame {f} unpinned"),
                FrameState::Free => assert!(st.free.contains(&(f as u32)), "free frame {f} not on the free list"),
            }
        }
        assert_eq!(pinned, st.pinned);
        assert_eq!(ready, st.resident);
        for (&key, &f) in &st.map {
            assert_eq!(st.meta[f as usize].key, key);
        }
    }

    /// Pins currently held (tests).
    #[cfg(test)]
    pub(super) fn pinned_frames(&self) -> usize {
        self.lock().pinned
    }
}
