//! Replacement policies for the byte-budgeted result cache: [`Lru`] and [`Dlirs`].
//!
//! A policy sees only 64-bit key hashes and entry sizes. The cache shard that owns it keeps the values in its own
//! map and drops the keys the policy reports as evicted. Both policies keep their entries in an index-linked slab
//! (nodes addressed by `u32` slots, a free list, one hash map from key to slot), so an operation costs O(1) and
//! allocates nothing once the slab has grown to the working size.

use std::fmt;
use std::str::FromStr;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

/// Bytes charged to the history budget for each remembered non-resident key (ghost).
pub const GHOST_BYTES: u64 = 40;

/// DLIRS keeps 1/`HISTORY_SHARE` of its budget for history. Replays of the
/// benchmark's Zipf stream (`tierdex-bench cache`) at 0.05%-0.5% of the index:
/// 1/8 gave +4.2, +2.4, +0.0, -0.6 hit-rate points over LRU; 1/16 +5.2, +3.4,
/// +0.6, -0.2; 1/32 +5.7, +3.5, +0.8, -0.1 (history beyond that buys less
/// than the entries it displaces).
pub const HISTORY_SHARE: u64 = 32;

/// Decides which entries of one cache shard stay resident within a byte capacity.
pub trait Policy: Send {
    /// `key` is resident and was just read.
    fn hit(&mut self, key: u64);
    /// `key` (not resident) becomes resident with `bytes`; every key that must leave to make room is pushed to
    /// `evicted` (never `key` itself). Precondition: `bytes <= self.max_entry_bytes()` and key not resident.
    fn insert(&mut self, key: u64, bytes: u64, evicted: &mut Vec<u64>);
    /// Forgets `key` (resident or only remembered in history).
    fn remove(&mut self, key: u64);
    /// Forgets everything.
    fn clear(&mut self);
    /// Whether `key` is resident.
    fn contains(&self, key: u64) -> bool;
    /// Bytes of resident entries (sum of their `bytes`).
    fn resident_bytes(&self) -> u64;
    /// Bytes charged for remembered history of non-resident keys (ghosts).
    fn history_bytes(&self) -> u64;
    /// Largest entry that may be inserted.
    fn max_entry_bytes(&self) -> u64;
}

const NIL: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Link {
    prev: u32,
    next: u32,
}

impl Link {
    const UNLINKED: Link = Link { prev: NIL, next: NIL };
}

/// An intrusive doubly linked list threaded through slab nodes by one of their [`Link`]s, chosen by a selector
/// function so a node can sit in several lists. `head` is the oldest end, `tail` the newest.
#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: List = List { head: NIL, tail: NIL };

    fn is_empty(&self) -> bool {
        self.head == NIL
    }

    fn push_back<N>(&mut self, nodes: &mut [N], i: u32, link: fn(&mut N) -> &mut Link) {
        let old = self.tail;
        *link(&mut nodes[i as usize]) = Link { prev: old, next: NIL };
        if old == NIL {
            self.head = i;
        } else {
            link(&mut nodes[old as usize]).next = i;
        }
        self.tail = i;
    }

    fn unlink<N>(&mut self, nodes: &mut [N], i: u32, link: fn(&mut N) -> &mut Link) {
        let Link { prev, next } = *link(&mut nodes[i as usize]);
        if prev == NIL {
            self.head = next;
        } else {
            link(&mut nodes[prev as usize]).next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            link(&mut nodes[next as usize]).prev = prev;
        }
        *link(&mut nodes[i as usize]) = Link::UNLINKED;
    }

    fn move_to_back<N>(&mut self, nodes: &mut [N], i: u32, link: fn(&mut N) -> &mut Link) {
        if self.tail != i {
            self.unlink(nodes, i, link);
            self.push_back(nodes, i, link);
        }
    }
}

/// Nodes addressed by `u32` slot, with released slots reused first.
#[derive(Debug)]
struct Slab<N> {
    nodes: Vec<N>,
    free: Vec<u32>,
}

impl<N> Slab<N> {
    fn new() -> Self {
        Slab {
            nodes: Vec::new(),
            free: Vec::new(),
        }
    }

    fn alloc(&mut self, node: N) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                let i = u32::try_from(self.nodes.len()).expect("more than 2^32 cache entries");
                assert!(i != NIL, "more than 2^32 - 1 cache entries");
                self.nodes.push(node);
                i
            }
        }
    }

    fn release(&mut self, i: u32) {
        self.free.push(i);
    }

    fn clear(&mut self) {
        self.nodes.clear();
        self.free.clear();
    }
}

#[derive(Debug)]
struct LruNode {
    key: u64,
    bytes: u64,
    link: Link,
}

fn lru_link(n: &mut LruNode) -> &mut Link {
    &mut n.link
}

/// Least-recently-used replacement by bytes: evicts the entries read or inserted longest ago until a new one fits.
#[derive(Debug)]
pub struct Lru {
    capacity: u64,
    used: u64,
    map: FxHashMap<u64, u32>,
    slab: Slab<LruNode>,
    order: List,
}

impl Lru {
    /// An empty LRU policy holding at most `capacity` bytes.
    pub fn new(capacity: u64) -> Self {
        Lru {
            capacity,
            used: 0,
            map: FxHashMap::default(),
            slab: Slab::new(),
            order: List::EMPTY,
        }
    }
}

impl Policy for Lru {
    fn hit(&mut self, key: u64) {
        if let Some(&i) = self.map.get(&key) {
            self.order.move_to_back(&mut self.slab.nodes, i, lru_link);
        }
    }

    fn insert(&mut self, key: u64, bytes: u64, evicted: &mut Vec<u64>) {
        assert!(
            bytes <= self.capacity,
            "entry of {bytes} bytes exceeds the capacity of {}",
            self.capacity
        );
        assert!(!self.map.contains_key(&key), "key {key:#x} is already resident");
        while self.used + bytes > self.capacity {
            let i = self.order.head;
            self.order.unlink(&mut self.slab.nodes, i, lru_link);
            let node = &self.slab.nodes[i as usize];
            self.used -= node.bytes;
            self.map.remove(&node.key);
            evicted.push(node.key);
            self.slab.release(i);
        }
        let i = self.slab.alloc(LruNode {
            key,
            bytes,
            link: Link::UNLINKED,
        });
        self.order.push_back(&mut self.slab.nodes, i, lru_link);
        self.map.insert(key, i);
        self.used += bytes;
    }

    fn remove(&mut self, key: u64) {
        if let Some(i) = self.map.remove(&key) {
            self.order.unlink(&mut self.slab.nodes, i, lru_link);
            self.used -= self.slab.nodes[i as usize].bytes;
            self.slab.release(i);
        }
    }

    fn clear(&mut self) {
        self.used = 0;
        self.map.clear();
        self.slab.clear();
        self.order = List::EMPTY;
    }

    fn contains(&self, key: u64) -> bool {
        self.map.contains_key(&key)
    }

    fn resident_bytes(&self) -> u64 {
        self.used
    }

    fn history_bytes(&self) -> u64 {
        0
    }

    fn max_entry_bytes(&self) -> u64 {
        self.capacity
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// Resident, low inter-reference recency: protected.
    Lir,
    /// Resident, high inter-reference recency: in Q, evicted first.
    Hir,
    /// Not resident, remembered in S (and in the ghost list).
    Ghost,
}

#[derive(Debug)]
struct DlirsNode {
    key: u64,
    bytes: u64,
    status: Status,
    /// A resident HIR entry that was LIR until demoted (never in S).
    demoted: bool,
    in_s: bool,
    s: Link,
    /// Link in Q for resident HIR entries, in the ghost list for ghosts.
    q: Link,
}

fn s_link(n: &mut DlirsNode) -> &mut Link {
    &mut n.s
}

fn q_link(n: &mut DlirsNode) -> &mut Link {
    &mut n.q
}

/// DLIRS replacement by bytes (Cong Li, "DLIRS: Improving Low Inter-Reference Recency Set Cache Replacement Policy
/// with Dynamics", SYSTOR 2018): LIRS, which protects entries reused at short intervals from scans and loops, with
/// the split between protected (LIR) and probationary (HIR) bytes adapted to the workload.
///
/// 1/[`HISTORY_SHARE`] of the capacity is reserved for the history of recently evicted keys ([`GHOST_BYTES`] each).
#[derive(Debug)]
pub struct Dlirs {
    resident_cap: u64,
    history_cap: u64,
    lir_limit: u64,
    lir_bytes: u64,
    lir_count: u64,
    resident_bytes: u64,
    resident_count: u64,
    ghost_count: u64,
    demoted_count: u64,
    map: FxHashMap<u64, u32>,
    slab: Slab<DlirsNode>,
    /// Recency stack: head is the bottom (always LIR while any LIR exists), tail the top.
    s: List,
    /// Resident HIR entries; head is evicted next.
    q: List,
    /// Ghosts, oldest first. An entry in both S and Q entered both at once, so Q evicts such entries in S order and
    /// this list is in S order too: its head is the oldest HIR history in S.
    ghosts: List,
}

impl Dlirs {
    /// An empty DLIRS policy holding at most `capacity` bytes of entries and history together.
    pub fn new(capacity: u64) -> Self {
        let history_cap = capacity / HISTORY_SHARE;
        let resident_cap = capacity - history_cap;
        Dlirs {
            resident_cap,
            history_cap,
            lir_limit: resident_cap - resident_cap / 100,
            lir_bytes: 0,
            lir_count: 0,
            resident_bytes: 0,
            resident_count: 0,
            ghost_count: 0,
            demoted_count: 0,
            map: FxHashMap::default(),
            slab: Slab::new(),
            s: List::EMPTY,
            q: List::EMPTY,
            ghosts: List::EMPTY,
        }
    }

    /// Bytes the protected (LIR) entries may occupy.
    pub fn lir_limit(&self) -> u64 {
        self.lir_limit
    }

    /// Bytes targeted for probationary (resident HIR) entries: the resident capacity minus [`Self::lir_limit`].
    pub fn hir_limit(&self) -> u64 {
        self.resident_cap - self.lir_limit
    }

    fn node(&mut self, i: u32) -> &mut DlirsNode {
        &mut self.slab.nodes[i as usize]
    }

    fn status(&self, i: u32) -> Status {
        self.slab.nodes[i as usize].status
    }

    fn set_lir_limit(&mut self, limit: u64) {
        let average = self.resident_bytes.checked_div(self.resident_count).unwrap_or(0);
        let floor = average.max(self.resident_cap / 100).min(self.resident_cap / 2);
        self.lir_limit = limit.clamp(floor, self.resident_cap - floor);
    }

    fn push_top(&mut self, i: u32) {
        if self.node(i).in_s {
            self.s.move_to_back(&mut self.slab.nodes, i, s_link);
        } else {
            self.s.push_back(&mut self.slab.nodes, i, s_link);
            self.node(i).in_s = true;
        }
    }

    fn leave_s(&mut self, i: u32) {
        self.s.unlink(&mut self.slab.nodes, i, s_link);
        self.node(i).in_s = false;
    }

    fn forget_ghost(&mut self, i: u32) {
        if self.node(i).in_s {
            self.leave_s(i);
        }
        self.ghosts.unlink(&mut self.slab.nodes, i, q_link);
        self.ghost_count -= 1;
        let key = self.node(i).key;
        self.map.remove(&key);
        self.slab.release(i);
    }

    /// Removes HIR entries and ghosts from the bottom of S until a LIR entry is there.
    fn prune(&mut self) {
        if self.lir_count == 0 {
            return;
        }
        loop {
            let bottom = self.s.head;
            match self.status(bottom) {
                Status::Lir => return,
                Status::Hir => self.leave_s(bottom),
                Status::Ghost => self.forget_ghost(bottom),
            }
        }
    }

    fn become_lir(&mut self, i: u32) {
        let node = self.node(i);
        node.status = Status::Lir;
        let bytes = node.bytes;
        self.lir_bytes += bytes;
        self.lir_count += 1;
        self.push_top(i);
        self.prune();
    }

    /// Turns the LIR entry at the bottom of S into a demoted resident HIR entry at the tail of Q.
    fn demote_bottom(&mut self) {
        let i = self.s.head;
        self.leave_s(i);
        let node = self.node(i);
        node.status = Status::Hir;
        node.demoted = true;
        let bytes = node.bytes;
        self.lir_bytes -= bytes;
        self.lir_count -= 1;
        self.demoted_count += 1;
        self.q.push_back(&mut self.slab.nodes, i, q_link);
        self.prune();
    }

    /// Demotes bottom LIR entries (never `protect`) while LIR bytes exceed the limit.
    fn enforce_lir_limit(&mut self, protect: u32) {
        while self.lir_bytes > self.lir_limit && self.lir_count > 0 && self.s.head != protect {
            self.demote_bottom();
        }
    }

    fn evict_head(&mut self, evicted: &mut Vec<u64>) {
        let i = self.q.head;
        self.q.unlink(&mut self.slab.nodes, i, q_link);
        let node = self.node(i);
        let (key, bytes, demoted, in_s) = (node.key, node.bytes, node.demoted, node.in_s);
        node.demoted = false;
        self.resident_bytes -= bytes;
        self.resident_count -= 1;
        if demoted {
            self.demoted_count -= 1;
        }
        evicted.push(key);
        if in_s {
            self.node(i).status = Status::Ghost;
            self.ghosts.push_back(&mut self.slab.nodes, i, q_link);
            self.ghost_count += 1;
        } else {
            self.map.remove(&key);
            self.slab.release(i);
        }
    }

    /// Evicts until `incoming` more bytes fit, demoting LIR entries into Q when it runs dry; `protect` (a LIR entry
    /// being inserted, or `NIL`) is never demoted.
    fn make_room(&mut self, incoming: u64, protect: u32, evicted: &mut Vec<u64>) {
        self.enforce_lir_limit(protect);
        while self.resident_bytes + incoming > self.resident_cap {
            if !self.q.is_empty() {
                self.evict_head(evicted);
            } else if self.lir_count > 0 && self.s.head != protect {
                self.demote_bottom();
            } else {
                break;
            }
        }
    }

    /// Drops the oldest ghosts while history exceeds its byte reserve or outnumbers the resident entries.
    fn trim_ghosts(&mut self) {
        while self.ghost_count > 0
            && (self.ghost_count * GHOST_BYTES > self.history_cap || self.ghost_count > self.resident_count)
        {
            self.forget_ghost(self.ghosts.head);
        }
    }
}

/// `max(1, round(numerator / denominator))`, for a non-zero denominator.
fn ratio_step(numerator: u64, denominator: u64) -> u64 {
    ((numerator + denominator / 2) / denominator).max(1)
}

impl Policy for Dlirs {
    fn hit(&mut self, key: u64) {
        let Some(&i) = self.map.get(&key) else {
            return;
        };
        match self.status(i) {
            Status::Lir => {
                let was_bottom = self.s.head == i;
                self.s.move_to_back(&mut self.slab.nodes, i, s_link);
                if was_bottom {
                    self.prune();
                }
            }
            Status::Hir if self.node(i).in_s => {
                self.q.unlink(&mut self.slab.nodes, i, q_link);
                self.become_lir(i);
                self.enforce_lir_limit(i);
            }
            Status::Hir => {
                self.q.move_to_back(&mut self.slab.nodes, i, q_link);
                self.push_top(i);
                let node = self.node(i);
                if node.demoted {
                    node.demoted = false;
                    let bytes = node.bytes;
                    let step = bytes.saturating_mul(ratio_step(self.ghost_count, self.demoted_count));
                    self.demoted_count -= 1;
                    self.set_lir_limit(self.lir_limit.saturating_add(step));
                }
            }
            Status::Ghost => {}
        }
    }

    fn insert(&mut self, key: u64, bytes: u64, evicted: &mut Vec<u64>) {
        assert!(
            bytes <= self.resident_cap,
            "entry of {bytes} bytes exceeds the resident capacity of {}",
            self.resident_cap
        );
        match self.map.get(&key) {
            Some(&i) => {
                assert!(self.status(i) == Status::Ghost, "key {key:#x} is already resident");
                let step = bytes.saturating_mul(ratio_step(self.demoted_count, self.ghost_count));
                self.set_lir_limit(self.lir_limit.saturating_sub(step));
                self.ghosts.unlink(&mut self.slab.nodes, i, q_link);
                self.ghost_count -= 1;
                self.node(i).bytes = bytes;
                self.resident_bytes += bytes;
                self.resident_count += 1;
                self.become_lir(i);
                self.make_room(0, i, evicted);
            }
            None => {
                // With no LIR entry left (all removed or demoted), nothing in S could be promoted: refill LIR directly.
                let warming = self.lir_bytes + bytes <= self.lir_limit && (self.q.is_empty() || self.lir_count == 0);
                self.make_room(bytes, NIL, evicted);
                let i = self.slab.alloc(DlirsNode {
                    key,
                    bytes,
                    status: Status::Hir,
                    demoted: false,
                    in_s: false,
                    s: Link::UNLINKED,
                    q: Link::UNLINKED,
                });
                self.map.insert(key, i);
                self.resident_bytes += bytes;
                self.resident_count += 1;
                if warming {
                    self.become_lir(i);
                } else {
                    self.push_top(i);
                    self.q.push_back(&mut self.slab.nodes, i, q_link);
                }
            }
        }
        self.trim_ghosts();
    }

    fn remove(&mut self, key: u64) {
        let Some(&i) = self.map.get(&key) else {
            return;
        };
        let node = self.node(i);
        let (status, bytes, demoted) = (node.status, node.bytes, node.demoted);
        match status {
            Status::Ghost => self.forget_ghost(i),
            Status::Lir | Status::Hir => {
                if status == Status::Lir {
                    self.lir_bytes -= bytes;
                    self.lir_count -= 1;
                } else {
                    self.q.unlink(&mut self.slab.nodes, i, q_link);
                }
                if demoted {
                    self.demoted_count -= 1;
                }
                if self.node(i).in_s {
                    self.leave_s(i);
                }
                self.resident_bytes -= bytes;
                self.resident_count -= 1;
                self.map.remove(&key);
                self.slab.release(i);
            }
        }
        self.prune();
        self.trim_ghosts();
    }

    fn clear(&mut self) {
        self.lir_limit = self.resident_cap - self.resident_cap / 100;
        self.lir_bytes = 0;
        self.lir_count = 0;
        self.resident_bytes = 0;
        self.resident_count = 0;
        self.ghost_count = 0;
        self.demoted_count = 0;
        self.map.clear();
        self.slab.clear();
        self.s = List::EMPTY;
        self.q = List::EMPTY;
        self.ghosts = List::EMPTY;
    }

    fn contains(&self, key: u64) -> bool {
        self.map.get(&key).is_some_and(|&i| self.status(i) != Status::Ghost)
    }

    fn resident_bytes(&self) -> u64 {
        self.resident_bytes
    }

    fn history_bytes(&self) -> u64 {
        self.ghost_count * GHOST_BYTES
    }

    fn max_entry_bytes(&self) -> u64 {
        self.resident_cap
    }
}

/// The kinds of replacement policy a result cache can be configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicyKind {
    /// [`Lru`].
    Lru,
    /// [`Dlirs`].
    Dlirs,
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PolicyKind::Lru => "lru",
            PolicyKind::Dlirs => "dlirs",
        })
    }
}

impl FromStr for PolicyKind {
    type Err = String;

    fn from_str(s: &str) -> Result<PolicyKind, String> {
        match s {
            "lru" => Ok(PolicyKind::Lru),
            "dlirs" => Ok(PolicyKind::Dlirs),
            _ => Err(format!("unknown cache policy `{s}` (lru, dlirs)")),
        }
    }
}

/// One of the policies, chosen at run time.
#[derive(Debug)]
pub enum AnyPolicy {
    /// Least recently used.
    Lru(Lru),
    /// DLIRS.
    Dlirs(Dlirs),
}

impl AnyPolicy {
    /// An empty policy of `kind` holding at most `capacity` bytes.
    pub fn new(kind: PolicyKind, capacity: u64) -> Self {
        match kind {
            PolicyKind::Lru => AnyPolicy::Lru(Lru::new(capacity)),
            PolicyKind::Dlirs => AnyPolicy::Dlirs(Dlirs::new(capacity)),
        }
    }
}

macro_rules! delegate {
    ($self:ident, $p:ident => $e:expr) => {
        match $self {
            AnyPolicy::Lru($p) => $e,
            AnyPolicy::Dlirs($p) => $e,
        }
    };
}

impl Policy for AnyPolicy {
    fn hit(&mut self, key: u64) {
        delegate!(self, p => p.hit(key))
    }

    fn insert(&mut self, key: u64, bytes: u64, evicted: &mut Vec<u64>) {
        delegate!(self, p => p.insert(key, bytes, evicted))
    }

    fn remove(&mut self, key: u64) {
        delegate!(self, p => p.remove(key))
    }

    fn clear(&mut self) {
        delegate!(self, p => p.clear())
    }

    fn contains(&self, key: u64) -> bool {
        delegate!(self, p => p.contains(key))
    }

    fn resident_bytes(&self) -> u64 {
        delegate!(self, p => p.resident_bytes())
    }

    fn history_bytes(&self) -> u64 {
        delegate!(self, p => p.history_bytes())
    }

    fn max_entry_bytes(&self) -> u64 {
        delegate!(self, p => p.max_entry_bytes())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, VecDeque};

    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    use super::*;

    impl Dlirs {
        /// Recomputes every counter from the lists and checks the structural invariants.
        fn check_structure(&self) {
            let nodes = &self.slab.nodes;
            let walk = |list: List, next: fn(&DlirsNode) -> Link| {
                let mut out = Vec::new();
                let mut i = list.head;
                while i != NIL {
                    out.push(i);
                    i = next(&nodes[i as usize]).next;
                }
                assert_eq!(out.last().copied().unwrap_or(NIL), list.tail);
                out
            };
            let s = walk(self.s, |n| n.s);
            let q = walk(self.q, |n| n.q);
            let ghosts = walk(self.ghosts, |n| n.q);
            let live: Vec<u32> = self.map.values().copied().collect();
            let (mut lir_bytes, mut lir_count, mut resident_bytes, mut resident_count, mut demoted) = (0, 0, 0, 0, 0);
            for &i in &live {
                let n = &nodes[i as usize];
                assert_eq!(self.map[&n.key], i);
                assert_eq!(n.in_s, s.contains(&i));
                match n.status {
                    Status::Lir => {
                        assert!(n.in_s && !n.demoted);
                        lir_bytes += n.bytes;
                        lir_count += 1;
                    }
                    Status::Hir => {
                        assert!(q.contains(&i));
                        assert!(!(n.demoted && n.in_s));
                        demoted += u64::from(n.demoted);
                    }
                    Status::Ghost => assert!(n.in_s && ghosts.contains(&i) && !n.demoted),
                }
                if n.status != Status::Ghost {
                    resident_bytes += n.bytes;
                    resident_count += 1;
                }
            }
            assert_eq!(q.len() + ghosts.len() + lir_count as usize, live.len());
            assert_eq!((lir_bytes, lir_count), (self.lir_bytes, self.lir_count));
            assert_eq!(
                (resident_bytes, resident_count),
                (self.resident_bytes, self.resident_count)
            );
            assert_eq!(ghosts.len() as u64, self.ghost_count);
            assert_eq!(demoted, self.demoted_count);
            if self.lir_count > 0 {
                assert_eq!(
                    nodes[self.s.head as usize].status,
                    Status::Lir,
                    "bottom of S must be LIR"
                );
            }
            let ghost_positions: Vec<usize> = ghosts
                .iter()
                .map(|g| s.iter().position(|x| x == g).expect("ghost in S"))
                .collect();
            assert!(ghost_positions.is_sorted(), "ghost list is in S order");
            assert!(self.ghost_count <= self.resident_count);
            assert_eq!(self.lir_limit + self.hir_limit(), self.resident_cap);
        }
    }

    /// The naive LRU: a queue of `(key, bytes)`, least recently used first.
    struct ModelLru {
        capacity: u64,
        queue: VecDeque<(u64, u64)>,
    }

    impl ModelLru {
        fn position(&self, key: u64) -> Option<usize> {
            self.queue.iter().position(|&(k, _)| k == key)
        }

        fn hit(&mut self, key: u64) {
            let i = self.position(key).unwrap();
            let entry = self.queue.remove(i).unwrap();
            self.queue.push_back(entry);
        }

        fn insert(&mut self, key: u64, bytes: u64) -> Vec<u64> {
            let mut evicted = Vec::new();
            while self.queue.iter().map(|e| e.1).sum::<u64>() + bytes > self.capacity {
                evicted.push(self.queue.pop_front().unwrap().0);
            }
            self.queue.push_back((key, bytes));
            evicted
        }
    }

    #[test]
    fn lru_matches_naive_model() {
        for seed in 0..100u64 {
            let mut rng = Pcg64Mcg::seed_from_u64(seed);
            let capacity = rng.random_range(0..2_000u64);
            let mut lru = Lru::new(capacity);
            let mut model = ModelLru {
                capacity,
                queue: VecDeque::new(),
            };
            let mut evicted = Vec::new();
            for _ in 0..400 {
                let key = rng.random_range(0..48u64);
                match rng.random_range(0..100u32) {
                    0..=59 => {
                        if model.position(key).is_some() {
                            lru.hit(key);
                            model.hit(key);
                        } else {
                            let bytes = rng.random_range(0..=capacity / 3);
                            evicted.clear();
                            lru.insert(key, bytes, &mut evicted);
                            assert_eq!(evicted, model.insert(key, bytes), "seed {seed}");
                        }
                    }
                    60..=94 => {
                        lru.remove(key);
                        if let Some(i) = model.position(key) {
                            model.queue.remove(i);
                        }
                    }
                    _ => {
                        lru.clear();
                        model.queue.clear();
                    }
                }
                for k in 0..48 {
                    assert_eq!(lru.contains(k), model.position(k).is_some(), "seed {seed}");
                }
                assert_eq!(lru.resident_bytes(), model.queue.iter().map(|e| e.1).sum::<u64>());
                assert_eq!(lru.history_bytes(), 0);
            }
        }
    }

    /// Runs random hits, inserts, removes and clears, checking the `Policy` contract against a map of residents.
    fn check_contract(kind: PolicyKind, seed: u64, capacity: u64, keys: u64, ops: usize) {
        let mut rng = Pcg64Mcg::seed_from_u64(seed);
        let mut policy = AnyPolicy::new(kind, capacity);
        let max = policy.max_entry_bytes();
        let mut model: BTreeMap<u64, u64> = BTreeMap::new();
        let mut evicted = Vec::new();
        for _ in 0..ops {
            let key = rng.random_range(0..keys);
            match rng.random_range(0..1_000u32) {
                0..=449 if model.contains_key(&key) => policy.hit(key),
                0..=899 if !model.contains_key(&key) => {
                    let bytes = match rng.random_range(0..10u32) {
                        0 => rng.random_range(0..=max),
                        1 => 0,
                        _ => rng.random_range(0..=max / 8),
                    };
                    evicted.clear();
                    policy.insert(key, bytes, &mut evicted);
                    for e in &evicted {
                        assert!(*e != key, "{kind} seed {seed}: evicted the inserted key");
                        assert!(
                            model.remove(e).is_some(),
                            "{kind} seed {seed}: evicted non-resident {e}"
                        );
                    }
                    model.insert(key, bytes);
                    assert!(policy.contains(key));
                }
                0..=995 => {
                    policy.remove(key);
                    model.remove(&key);
                }
                _ => {
                    policy.clear();
                    model.clear();
                }
            }
            assert!(
                policy.resident_bytes() + policy.history_bytes() <= capacity,
                "{kind} seed {seed}"
            );
            assert_eq!(
                policy.resident_bytes(),
                model.values().sum::<u64>(),
                "{kind} seed {seed}"
            );
            for k in 0..keys {
                assert_eq!(policy.contains(k), model.contains_key(&k), "{kind} seed {seed} key {k}");
            }
            if let AnyPolicy::Dlirs(d) = &policy {
                d.check_structure();
            }
        }
    }

    #[test]
    fn lru_keeps_contract() {
        for seed in 0..60 {
            check_contract(
                PolicyKind::Lru,
                seed,
                [0, 1, 97, 1_000, 5_000][seed as usize % 5],
                40,
                300,
            );
        }
    }

    #[test]
    fn dlirs_keeps_contract() {
        for seed in 0..120 {
            check_contract(
                PolicyKind::Dlirs,
                seed,
                [0, 1, 97, 1_000, 5_000, 20_000][seed as usize % 6],
                40,
                300,
            );
        }
    }

    #[test]
    fn dlirs_keeps_contract_with_ghosts() {
        for seed in 0..20 {
            check_contract(PolicyKind::Dlirs, 1_000 + seed, 4_000 + 500 * seed, 200, 1_500);
        }
    }

    /// Entry sizes from 64 to 191 bytes (128 on average), fixed per key.
    fn size_of(key: u64) -> u64 {
        64 + (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 57)
    }

    /// Hit ratio of a policy with `capacity` bytes over `trace`, missing keys inserted.
    fn hit_ratio(kind: PolicyKind, capacity: u64, trace: &[u64]) -> f64 {
        let mut policy = AnyPolicy::new(kind, capacity);
        let mut evicted = Vec::new();
        let mut hits = 0;
        for &key in trace {
            if policy.contains(key) {
                policy.hit(key);
                hits += 1;
            } else {
                evicted.clear();
                policy.insert(key, size_of(key), &mut evicted);
            }
        }
        hits as f64 / trace.len() as f64
    }

    const CAPACITY: u64 = 128_000;
    const ENTRIES: u64 = CAPACITY / 128;

    #[test]
    fn dlirs_beats_lru_on_hot_set_with_scan() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let hot = ENTRIES * 6 / 10;
        let mut scan = 1_000_000;
        let trace: Vec<u64> = (0..100_000)
            .map(|_| {
                if rng.random_bool(0.5) {
                    rng.random_range(0..hot)
                } else {
                    scan += 1;
                    scan
                }
            })
            .collect();
        let lru = hit_ratio(PolicyKind::Lru, CAPACITY, &trace);
        let dlirs = hit_ratio(PolicyKind::Dlirs, CAPACITY, &trace);
        assert!(dlirs > lru + 0.1, "hot set with scan: dlirs {dlirs:.3}, lru {lru:.3}");
    }

    #[test]
    fn dlirs_beats_lru_on_loop_larger_than_cache() {
        let keys = ENTRIES * 11 / 10;
        let trace: Vec<u64> = (0..20).flat_map(|_| 0..keys).collect();
        let lru = hit_ratio(PolicyKind::Lru, CAPACITY, &trace);
        let dlirs = hit_ratio(PolicyKind::Dlirs, CAPACITY, &trace);
        assert!(
            dlirs > lru + 0.3,
            "loop of 1.1x the cache: dlirs {dlirs:.3}, lru {lru:.3}"
        );
    }

    #[test]
    fn dlirs_follows_lru_on_shifting_recency() {
        let window = ENTRIES / 2;
        let mut rng = Pcg64Mcg::seed_from_u64(11);
        let sliding: Vec<u64> = (0..200_000u64).map(|t| t / 5 + rng.random_range(0..window)).collect();
        let jumping: Vec<u64> = (0..200_000u64)
            .map(|t| t / 5_000 * 1_000_000 + rng.random_range(0..window))
            .collect();
        for (name, trace) in [("sliding", sliding), ("jumping", jumping)] {
            let lru = hit_ratio(PolicyKind::Lru, CAPACITY, &trace);
            let dlirs = hit_ratio(PolicyKind::Dlirs, CAPACITY, &trace);
            assert!(dlirs > lru - 0.03, "{name} working set: dlirs {dlirs:.3}, lru {lru:.3}");
        }
    }

    #[test]
    fn limits_move_with_ghost_and_demoted_hits() {
        // 7,000 bytes for entries after the history reserve.
        let mut d = Dlirs::new(7_000 * HISTORY_SHARE / (HISTORY_SHARE - 1));
        assert_eq!(d.resident_cap, 7_000);
        let mut evicted = Vec::new();
        assert_eq!((d.lir_limit(), d.hir_limit()), (6_930, 70));
        for key in 0..72 {
            d.insert(key, 100, &mut evicted);
        }
        assert_eq!(evicted, [69, 70], "the two newest HIR entries were evicted to ghosts");
        let hir_before = d.hir_limit();
        evicted.clear();
        d.insert(69, 100, &mut evicted);
        assert!(
            d.hir_limit() > hir_before,
            "ghost hit grows HIR: {} -> {}",
            hir_before,
            d.hir_limit()
        );
        assert_eq!(d.lir_limit() + d.hir_limit(), 7_000);
        assert!(d.demoted_count > 0, "the shrunk LIR limit demoted LIR entries");
        assert!(d.contains(0) && d.slab.nodes[d.map[&0] as usize].demoted);
        let lir_before = d.lir_limit();
        d.hit(0);
        assert!(
            d.lir_limit() > lir_before,
            "demoted hit grows LIR: {} -> {}",
            lir_before,
            d.lir_limit()
        );
        d.check_structure();
        d.clear();
        assert_eq!(
            (d.lir_limit(), d.hir_limit(), d.resident_bytes(), d.history_bytes()),
            (6_930, 70, 0, 0)
        );
    }

    #[test]
    fn policy_kind_parses_and_prints() {
        for kind in [PolicyKind::Lru, PolicyKind::Dlirs] {
            assert_eq!(kind.to_string().parse::<PolicyKind>(), Ok(kind));
            assert_eq!(serde_json::to_string(&kind).unwrap(), format!("\"{kind}\""));
        }
        let err = "arc".parse::<PolicyKind>().unwrap_err();
        assert!(err.contains("lru") && err.contains("dlirs"), "{err}");
    }
}
