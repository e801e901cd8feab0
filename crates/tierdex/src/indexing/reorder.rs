//! Document reordering by recursive graph bisection (BP; Dhulipala et al.,
//! KDD 2016, with the move gains of Mackenzie et al.): documents that share
//! terms get nearby numbers, so postings have smaller gaps (smaller
//! blocks) and a block's score bound is closer to its documents' scores
//! (more blocks skipped by top-k).
//!
//! The documents are split in two halves; documents swap between them while
//! a swap lowers the estimated cost of the terms' postings (a term costs
//! about `d * log2(n / (d + 1))` bits in a half of `n` documents where it is
//! in `d`); then each half is split the same way, down to partitions of
//! [`BpParams::min_partition`] documents. Only terms in at least
//! [`BpParams::min_doc_freq`] documents take part: rarer terms cost little
//! and would dominate the time.

use serde::{Deserialize, Serialize};

/// Parameters of the bisection (the defaults are Lucene's
/// `BPIndexReorderer`'s but for [`BpParams::max_iters`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BpParams {
    /// Terms in fewer documents are left out of the forward index.
    pub min_doc_freq: u32,
    /// Terms in more than this fraction of the documents are left out.
    pub max_doc_freq_ratio: f32,
    /// Partitions below twice this many documents are not split.
    pub min_partition: u32,
    /// Rounds of swaps per split, at most (fewer once none pays). 8, not
    /// Lucene's 20: on Wikipedia the later rounds move few documents, and
    /// 8 keeps 99.4% of 20's cost reduction (log-gap cost 47.63M -> 31.04M
    /// against 30.94M) in half the bisection's time.
    pub max_iters: u32,
    /// Most postings the forward index holds (4 bytes each; 0: no limit):
    /// beyond it, the most frequent terms are left out first (they carry
    /// the least about which documents belong together).
    pub max_postings: u64,
    /// The least share of the log-gap cost ([`log_gap_cost`]) the
    /// reordering must be expected to save for it to be done: the
    /// expectation comes from bisecting a sample of the documents first
    /// (at most [`SAMPLE_DOCS`] of one source). 0: always reordered,
    /// without a sample. Documents whose terms are drawn independently of
    /// each other (no topics to group) save little and keep their order.
    pub min_gain: f32,
}

/// Documents the sample of [`BpParams::min_gain`] bisects, at most.
pub const SAMPLE_DOCS: u32 = 32_768;

/// [`BpParams::min_gain`] of `tierdex index --reorder auto`, the default:
/// on Wikipedia a sample saves about a third of the cost (and queries on
/// the reordered index run 1.16x faster), on generated documents whose
/// words are drawn independently about a tenth (queries gain nothing).
pub const AUTO_MIN_GAIN: f32 = 0.15;

impl Default for BpParams {
    fn default() -> Self {
        BpParams {
            min_doc_freq: 4096,
            max_doc_freq_ratio: 1.0,
            min_partition: 32,
            max_iters: 8,
            max_postings: 0,
            min_gain: 0.0,
        }
    }
}

impl BpParams {
    /// Whether a term in `doc_freq` of `max_doc` documents takes part.
    pub fn selects(&self, doc_freq: u64, max_doc: u64) -> bool {
        doc_freq >= u64::from(self.min_doc_freq.max(2))
            && doc_freq as f64 <= f64::from(self.max_doc_freq_ratio) * max_doc as f64
    }

    /// The highest document frequency a term may have and take part, given
    /// the frequencies of the terms [`Self::selects`] takes: all of them
    /// while their postings fit in [`Self::max_postings`], otherwise the
    /// most frequent left out until they do.
    pub fn doc_freq_cap(&self, mut selected: Vec<u64>) -> u64 {
        let mut total: u64 = selected.iter().sum();
        if self.max_postings == 0 || total <= self.max_postings {
            return u64::MAX;
        }
        selected.sort_unstable();
        while let Some(&df) = selected.last() {
            if total <= self.max_postings {
                return df;
            }
            // Every term of this frequency goes.
            while selected.last() == Some(&df) {
                selected.pop();
                total -= df;
            }
        }
        0
    }
}

/// Each document's selected terms (numbered densely), in compressed-row
/// form: document `d`'s terms are `terms[offsets[d]..offsets[d + 1]]`.
#[derive(Debug, Default)]
pub struct ForwardIndex {
    offsets: Vec<u64>,
    terms: Vec<u32>,
    num_terms: u32,
}

impl ForwardIndex {
    /// Built in two passes over the same postings: `visit(f)` calls
    /// `f(term, doc)` for every posting of every selected term (terms
    /// numbered densely from 0, documents below `max_doc`), once to count
    /// and once to fill, the same postings both times.
    pub fn build<E>(
        max_doc: u32,
        mut visit: impl FnMut(&mut dyn FnMut(u32, u32)) -> std::result::Result<(), E>,
    ) -> std::result::Result<ForwardIndex, E> {
        let mut counts = vec![0u64; max_doc as usize + 1];
        let mut num_terms = 0u32;
        visit(&mut |term, doc| {
            counts[doc as usize + 1] += 1;
            num_terms = num_terms.max(term + 1);
        })?;
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let offsets = counts.clone();
        let mut terms = vec![0u32; *counts.last().unwrap_or(&0) as usize];
        visit(&mut |term, doc| {
            let at = &mut counts[doc as usize];
            terms[*at as usize] = term;
            *at += 1;
        })?;
        Ok(ForwardIndex {
            offsets,
            terms,
            num_terms,
        })
    }

    /// Built from parts on up to `threads` threads: part `p` holds the
    /// documents `parts[p]` (the parts contiguous and in order from 0, as
    /// a merge's sources are), and `visit(p, f)` calls `f(term, doc)` for
    /// every posting of its documents, terms numbered below `num_terms`
    /// and ascending within a document; called twice per part (to count,
    /// then to fill), the same postings both times. The same index as
    /// [`ForwardIndex::build`] over the parts in order.
    pub fn build_parts<E: Send>(
        parts: &[std::ops::Range<u32>],
        num_terms: u32,
        threads: usize,
        visit: impl Fn(usize, &mut dyn FnMut(u32, u32)) -> std::result::Result<(), E> + Sync,
    ) -> std::result::Result<ForwardIndex, E> {
        let max_doc = parts.last().map_or(0, |p| p.end);
        assert!(
            parts
                .iter()
                .enumerate()
                .all(|(i, p)| p.start <= p.end && p.start == if i == 0 { 0 } else { parts[i - 1].end }),
            "forward index parts must be contiguous from 0"
        );
        let mut counts = vec![0u64; max_doc as usize + 1];
        {
            // Part p counts into counts[start + 1..end + 1].
            let mut rest = &mut counts[1..];
            let mut slices = Vec::with_capacity(parts.len());
            for p in parts {
                let (own, tail) = rest.split_at_mut((p.end - p.start) as usize);
                slices.push(own);
                rest = tail;
            }
            on_threads(threads, slices, |i, own| {
                let start = parts[i].start;
                visit(i, &mut |_, doc| own[(doc - start) as usize] += 1)
            })?;
        }
        for i in 1..counts.len() {
            counts[i] += counts[i - 1];
        }
        let offsets = counts;
        let mut terms = vec![0u32; *offsets.last().unwrap_or(&0) as usize];
        {
            let mut rest = &mut terms[..];
            let mut slices = Vec::with_capacity(parts.len());
            for p in parts {
                let len = offsets[p.end as usize] - offsets[p.start as usize];
                let (own, tail) = rest.split_at_mut(len as usize);
                slices.push(own);
                rest = tail;
            }
            on_threads(threads, slices, |i, own| {
                let p = &parts[i];
                let base = offsets[p.start as usize];
                // Where each document's next term goes, within `own`.
                let mut next: Vec<u64> = offsets[p.start as usize..p.end as usize]
                    .iter()
                    .map(|o| o - base)
                    .collect();
                visit(i, &mut |term, doc| {
                    let at = &mut next[(doc - p.start) as usize];
                    own[*at as usize] = term;
                    *at += 1;
                })
            })?;
        }
        Ok(ForwardIndex {
            offsets,
            terms,
            num_terms,
        })
    }

    /// Documents.
    pub fn docs(&self) -> u32 {
        (self.offsets.len().max(1) - 1) as u32
    }

    /// Postings held (document-term pairs).
    pub fn len(&self) -> usize {
        self.terms.len()
    }

    /// True when no document holds a selected term.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    fn terms(&self, doc: u32) -> &[u32] {
        &self.terms[self.offsets[doc as usize] as usize..self.offsets[doc as usize + 1] as usize]
    }
}

/// Runs `work(i, item)` for every item on up to `threads` scoped threads
/// (items taken in order as threads free up); the first error is returned
/// once all have stopped.
fn on_threads<T: Send, E: Send>(
    threads: usize,
    items: Vec<T>,
    work: impl Fn(usize, T) -> std::result::Result<(), E> + Sync,
) -> std::result::Result<(), E> {
    let threads = threads.clamp(1, items.len().max(1));
    let queue = std::sync::Mutex::new(items.into_iter().enumerate());
    let failed = std::sync::atomic::AtomicBool::new(false);
    let run = || -> std::result::Result<(), E> {
        loop {
            if failed.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
            let Some((i, item)) = next else { return Ok(()) };
            if let Err(e) = work(i, item) {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
                return Err(e);
            }
        }
    };
    if threads == 1 {
        return run();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (1..threads).map(|_| s.spawn(run)).collect();
        let mut result = run();
        for h in handles {
            let r = h.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            if result.is_ok() {
                result = r;
            }
        }
        result
    })
}

/// What a task of the bisection reuses from split to split (one per
/// running task; spares are kept in [`Bisection::spare`]).
struct Scratch {
    /// Per term: documents of the left and right halves holding it (zero
    /// between splits).
    left: Vec<u32>,
    right: Vec<u32>,
    /// Per term, this round: what moving one of its documents to the other
    /// half gains (for a document on the left, on the right).
    to_right: Vec<f32>,
    to_left: Vec<f32>,
    /// The terms of the split's documents, once each.
    touched: Vec<u32>,
    /// Per document of the split: its preference for the right half (see
    /// [`split`]), in the split's order and ranked.
    gains: Vec<(f32, u32)>,
    ranked: Vec<(f32, u32)>,
}

impl Scratch {
    fn new(num_terms: u32) -> Scratch {
        Scratch {
            left: vec![0; num_terms as usize],
            right: vec![0; num_terms as usize],
            to_right: vec![0.0; num_terms as usize],
            to_left: vec![0.0; num_terms as usize],
            touched: Vec::new(),
            gains: Vec::new(),
            ranked: Vec::new(),
        }
    }
}

/// Partitions at least this large are split by parallel tasks (their
/// halves in parallel, their documents' gains computed in parallel).
const PARALLEL_DOCS: usize = 4096;

/// What every split shares.
struct Bisection<'a> {
    fwd: &'a ForwardIndex,
    params: &'a BpParams,
    /// log2(d + 1) for every degree a half can hold.
    log: Vec<f32>,
    /// Partitions at least this large are split by parallel tasks
    /// ([`usize::MAX`]: no thread pool).
    parallel_docs: usize,
    /// Scratch space the finished parallel tasks left for the next ones.
    spare: std::sync::Mutex<Vec<Scratch>>,
}

impl Bisection<'_> {
    fn scratch(&self) -> Scratch {
        let spare = self.spare.lock().map(|mut s| s.pop());
        spare.ok().flatten().unwrap_or_else(|| Scratch::new(self.fwd.num_terms))
    }

    fn give_back(&self, scratch: Scratch) {
        if let Ok(mut spare) = self.spare.lock() {
            spare.push(scratch);
        }
    }
}

/// The new order of `fwd`'s documents: `order[new] = old`. Runs on up to
/// `threads` threads (the halves of a split go on as parallel tasks, and a
/// large split's gains are computed in parallel); the order does not depend
/// on the number of threads.
pub fn bisect(fwd: &ForwardIndex, params: &BpParams, threads: usize) -> Vec<u32> {
    bisect_from(fwd, params, threads, PARALLEL_DOCS)
}

/// [`bisect`], with parallel tasks from partitions of `parallel_docs`.
fn bisect_from(fwd: &ForwardIndex, params: &BpParams, threads: usize, parallel_docs: usize) -> Vec<u32> {
    let mut docs: Vec<u32> = (0..fwd.docs()).collect();
    if fwd.is_empty() {
        return docs;
    }
    let pool = match threads > 1 {
        true => rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("tierdex-bp-{i}"))
            .build()
            .inspect_err(|e| tracing::warn!("bisection on one thread: no thread pool ({e})"))
            .ok(),
        false => None,
    };
    let bp = Bisection {
        fwd,
        params,
        log: (0..=fwd.docs() as usize + 1).map(|d| ((d + 1) as f32).log2()).collect(),
        parallel_docs: if pool.is_some() { parallel_docs } else { usize::MAX },
        spare: std::sync::Mutex::new(Vec::new()),
    };
    let mut scratch = Scratch::new(fwd.num_terms);
    match &pool {
        Some(pool) => pool.install(|| recurse(&mut docs, &bp, &mut scratch)),
        None => recurse(&mut docs, &bp, &mut scratch),
    }
    docs
}

fn recurse(docs: &mut [u32], bp: &Bisection, scratch: &mut Scratch) {
    if docs.len() < 2 * bp.params.min_partition.max(2) as usize {
        return;
    }
    split(docs, bp, scratch);
    let parallel = docs.len() >= bp.parallel_docs;
    let mid = docs.len() / 2;
    let (left, right) = docs.split_at_mut(mid);
    if parallel {
        rayon::join(
            || {
                let mut own = bp.scratch();
                recurse(left, bp, &mut own);
                bp.give_back(own);
            },
            || recurse(right, bp, scratch),
        );
    } else {
        recurse(left, bp, scratch);
        recurse(right, bp, scratch);
    }
}

/// Preferences in descending order, ties by document: a total order, so
/// that the selection's pivot is the same document however it is found.
fn by_gain(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Moves documents between `docs`' halves (each in document order, and
/// left so) while that pays.
fn split(docs: &mut [u32], bp: &Bisection, scratch: &mut Scratch) {
    let (fwd, log) = (bp.fwd, &bp.log);
    let parallel = docs.len() >= bp.parallel_docs;
    let mid = docs.len() / 2;
    let Scratch {
        left,
        right,
        to_right,
        to_left,
        touched,
        gains,
        ranked,
    } = scratch;
    touched.clear();
    for (i, &d) in docs.iter().enumerate() {
        for &t in fwd.terms(d) {
            let t = t as usize;
            if left[t] == 0 && right[t] == 0 {
                touched.push(t as u32);
            }
            match i < mid {
                true => left[t] += 1,
                false => right[t] += 1,
            }
        }
    }
    let n_right = docs.len() - mid;
    for _ in 0..bp.params.max_iters {
        // The gain of moving a document to the other half: for each of its
        // terms, log2(d_to + 1) - log2(d_from) (the derivative of the cost,
        // the document itself left out of its half's degree).
        for &t in touched.iter() {
            let (l, r) = (left[t as usize] as usize, right[t as usize] as usize);
            to_right[t as usize] = log[r] - log[l.saturating_sub(1)];
            to_left[t as usize] = log[l] - log[r.saturating_sub(1)];
        }
        // Each document's preference for the right half: what moving there
        // gains a document on the left, what staying there saves one on the
        // right.
        let (to_right, to_left) = (&*to_right, &*to_left);
        let preference = |(i, &d): (usize, &u32)| match i < mid {
            true => (sum_over(to_right, fwd.terms(d)), d),
            false => (-sum_over(to_left, fwd.terms(d)), d),
        };
        if parallel {
            use rayon::prelude::*;
            docs.par_iter().enumerate().map(preference).collect_into_vec(gains);
        } else {
            gains.clear();
            gains.extend(docs.iter().enumerate().map(preference));
        }
        // The right half becomes the documents that prefer it most (as
        // swapping the best-gaining pairs while their gains sum above zero,
        // but found by selection, not by sorting both halves).
        ranked.clear();
        ranked.extend_from_slice(gains);
        let (_, &mut pivot, _) = ranked.select_nth_unstable_by(n_right - 1, by_gain);
        let goes_right = |g: &(f32, u32)| by_gain(g, &pivot).is_le();
        let mut swaps = 0;
        for (i, g) in gains.iter().enumerate() {
            let (from, to) = match (i < mid, goes_right(g)) {
                (true, true) => (&mut *left, &mut *right),
                (false, false) => (&mut *right, &mut *left),
                _ => continue,
            };
            for &t in fwd.terms(g.1) {
                from[t as usize] -= 1;
                to[t as usize] += 1;
            }
            swaps += 1;
        }
        // Both halves rebuilt in document order (the next round then reads
        // the forward index ascending, not at random): a merge of the two
        // sorted halves.
        if swaps > 0 {
            let (gl, gr) = gains.split_at(mid);
            let (mut l, mut r) = (gl.iter().peekable(), gr.iter().peekable());
            let (mut at_left, mut at_right) = (0, mid);
            while l.peek().is_some() || r.peek().is_some() {
                let g = match (l.peek(), r.peek()) {
                    (Some(a), Some(b)) if a.1 < b.1 => l.next(),
                    (Some(_), None) => l.next(),
                    _ => r.next(),
                };
                let Some(g) = g else { break };
                let slot = match goes_right(g) {
                    true => &mut at_right,
                    false => &mut at_left,
                };
                docs[*slot] = g.1;
                *slot += 1;
            }
        }
        if swaps == 0 {
            break;
        }
    }
    for &t in touched.iter() {
        left[t as usize] = 0;
        right[t as usize] = 0;
    }
}

/// The sum of `per_term` over `terms`, on four accumulators (one would
/// wait on each addition's latency).
#[inline]
fn sum_over(per_term: &[f32], terms: &[u32]) -> f32 {
    let mut acc = [0f32; 4];
    let mut quads = terms.chunks_exact(4);
    for q in quads.by_ref() {
        for (a, &t) in acc.iter_mut().zip(q) {
            *a += per_term[t as usize];
        }
    }
    let rest: f32 = quads.remainder().iter().map(|&t| per_term[t as usize]).sum();
    (acc[0] + acc[1]) + (acc[2] + acc[3]) + rest
}

/// The cost the bisection lowers: for each term, `d * log2(n / (d + 1))`
/// summed over consecutive partitions of `size` documents of `order`.
pub fn log_gap_cost(fwd: &ForwardIndex, order: &[u32], size: usize) -> f64 {
    let mut deg = vec![0u32; fwd.num_terms as usize];
    let mut cost = 0.0;
    for chunk in order.chunks(size.max(1)) {
        for &d in chunk {
            fwd.terms(d).iter().for_each(|&t| deg[t as usize] += 1);
        }
        let n = chunk.len() as f64;
        for &d in chunk {
            for &t in fwd.terms(d) {
                let k = deg[t as usize];
                if k > 0 {
                    cost += f64::from(k) * (n / f64::from(k + 1)).log2();
                    deg[t as usize] = 0;
                }
            }
        }
    }
    cost
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    /// Documents drawn from `topics` disjoint vocabularies, shuffled.
    fn topical(docs: u32, topics: u32, seed: u64) -> ForwardIndex {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(seed);
        let per = 20u32;
        let lists: Vec<Vec<u32>> = (0..docs)
            .map(|_| {
                let topic = rng.random_range(0..topics);
                let mut t: Vec<u32> = (0..8).map(|_| topic * per + rng.random_range(0..per)).collect();
                t.sort_unstable();
                t.dedup();
                t
            })
            .collect();
        ForwardIndex::build::<()>(docs, |f| {
            for (d, ts) in lists.iter().enumerate() {
                ts.iter().for_each(|&t| f(t, d as u32));
            }
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn the_order_is_a_permutation_and_groups_topics() {
        let fwd = topical(4096, 16, 7);
        let params = BpParams {
            min_doc_freq: 2,
            ..BpParams::default()
        };
        for threads in [1, 3] {
            let order = bisect(&fwd, &params, threads);
            let mut seen = order.clone();
            seen.sort_unstable();
            assert_eq!(seen, (0..4096).collect::<Vec<_>>(), "a permutation");
            let before = log_gap_cost(&fwd, &(0..4096).collect::<Vec<_>>(), 64);
            let after = log_gap_cost(&fwd, &order, 64);
            assert!(after < 0.6 * before, "{threads} threads: cost {before} -> {after}");
        }
    }

    #[test]
    fn threads_do_not_change_the_order() {
        let fwd = topical(3000, 9, 3);
        let params = BpParams {
            min_doc_freq: 2,
            min_partition: 8,
            ..BpParams::default()
        };
        let one = bisect(&fwd, &params, 1);
        assert_ne!(one, (0..3000).collect::<Vec<_>>());
        for threads in [2, 4] {
            assert_eq!(bisect(&fwd, &params, threads), one, "{threads} threads");
            // Parallel tasks and parallel gains down to small partitions.
            for parallel_docs in [16, 700] {
                let order = bisect_from(&fwd, &params, threads, parallel_docs);
                assert_eq!(order, one, "{threads} threads, parallel from {parallel_docs}");
            }
        }
    }

    #[test]
    fn a_split_keeps_each_half_in_document_order_and_lowers_the_cost() {
        let fwd = topical(2000, 8, 11);
        let params = BpParams {
            min_doc_freq: 2,
            ..BpParams::default()
        };
        for parallel_docs in [usize::MAX, 64] {
            let bp = Bisection {
                fwd: &fwd,
                params: &params,
                log: (0..=2001).map(|d| ((d + 1) as f32).log2()).collect(),
                parallel_docs,
                spare: std::sync::Mutex::new(Vec::new()),
            };
            let mut docs: Vec<u32> = (0..2000).collect();
            split(&mut docs, &bp, &mut Scratch::new(fwd.num_terms));
            let (l, r) = docs.split_at(1000);
            assert!(l.is_sorted() && r.is_sorted(), "halves in document order");
            let mut all = docs.clone();
            all.sort_unstable();
            assert_eq!(all, (0..2000).collect::<Vec<_>>());
            let before = log_gap_cost(&fwd, &(0..2000).collect::<Vec<_>>(), 1000);
            let after = log_gap_cost(&fwd, &docs, 1000);
            assert!(after < 0.9 * before, "cost {before} -> {after}");
        }
    }

    #[test]
    fn the_most_frequent_terms_go_first_beyond_the_postings_limit() {
        let p = BpParams {
            max_postings: 100,
            ..BpParams::default()
        };
        assert_eq!(p.doc_freq_cap(vec![10, 20, 30]), u64::MAX);
        assert_eq!(p.doc_freq_cap(vec![50, 10, 60, 40]), 50);
        assert_eq!(p.doc_freq_cap(vec![60, 60, 5]), 5);
        assert_eq!(p.doc_freq_cap(vec![200]), 0);
        assert_eq!(BpParams::default().doc_freq_cap(vec![u64::MAX / 4; 3]), u64::MAX);
    }

    #[test]
    fn the_forward_index_holds_every_posting() {
        let fwd = ForwardIndex::build::<()>(4, |f| {
            for (t, d) in [(0, 3), (1, 0), (2, 3), (0, 1)] {
                f(t, d);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(fwd.docs(), 4);
        assert_eq!(fwd.len(), 4);
        assert_eq!(fwd.terms(0), &[1]);
        assert_eq!(fwd.terms(1), &[0]);
        assert_eq!(fwd.terms(2), &[] as &[u32]);
        assert_eq!(fwd.terms(3), &[0, 2]);
    }

    #[test]
    fn a_forward_index_built_in_parts_is_the_one_built_whole() {
        let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
        // Part sizes, some empty; each document's terms ascending.
        let sizes = [0u32, 37, 1, 0, 120, 64, 3];
        let max_doc: u32 = sizes.iter().sum();
        let rows: Vec<Vec<u32>> = (0..max_doc)
            .map(|_| {
                let mut t: Vec<u32> = (0..rng.random_range(0..12)).map(|_| rng.random_range(0..50)).collect();
                t.sort_unstable();
                t.dedup();
                t
            })
            .collect();
        let mut parts = Vec::new();
        let mut start = 0;
        for s in sizes {
            parts.push(start..start + s);
            start += s;
        }
        // Postings visited term by term, as a merge reads them.
        let visit_range = |r: std::ops::Range<u32>, f: &mut dyn FnMut(u32, u32)| {
            for t in 0..50 {
                for d in r.clone() {
                    if rows[d as usize].contains(&t) {
                        f(t, d);
                    }
                }
            }
        };
        let whole = ForwardIndex::build::<()>(max_doc, |f| {
            visit_range(0..max_doc, f);
            Ok(())
        })
        .unwrap();
        for threads in [1, 2, 5] {
            let built = ForwardIndex::build_parts::<()>(&parts, 50, threads, |p, f| {
                visit_range(parts[p].clone(), f);
                Ok(())
            })
            .unwrap();
            assert_eq!(built.offsets, whole.offsets, "{threads} threads");
            assert_eq!(built.terms, whole.terms, "{threads} threads");
            for d in 0..max_doc {
                assert_eq!(built.terms(d), rows[d as usize].as_slice());
            }
        }
        // A part's error is the build's.
        let failed = ForwardIndex::build_parts(&parts, 50, 3, |p, f| match p {
            4 => Err(format!("part {p}")),
            _ => {
                visit_range(parts[p].clone(), f);
                Ok(())
            }
        });
        assert_eq!(failed.err(), Some("part 4".to_string()));
    }

    #[test]
    fn small_or_empty_inputs_keep_their_order() {
        let empty = ForwardIndex::build::<()>(0, |_| Ok(())).unwrap();
        assert!(bisect(&empty, &BpParams::default(), 2).is_empty());
        let few = topical(40, 2, 1);
        assert_eq!(bisect(&few, &BpParams::default(), 2), (0..40).collect::<Vec<_>>());
    }
}
