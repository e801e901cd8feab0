//! Maintenance strategies: what happens to the segments after the buffer is
//! flushed as a new one (DESIGN §5).
//!
//! Every strategy merges only the *newest* segments, so segments stay in
//! insertion order and a merged index numbers its documents exactly as an
//! index built from scratch on the live documents would.
//!
//! * `no-merge`: every flush leaves one more segment (cheapest flushes,
//!   queries visit ever more segments).
//! * `immediate-merge`: every flush merges the whole index into one segment
//!   (one segment to search, every flush rewrites everything).
//! * `geometric` (Lester, Moffat and Zobel's geometric partitioning, r = 3):
//!   partition j holds at most (r − 1)·r^j flush units. A flushed segment
//!   merges with partition 0; while the result exceeds partition j's
//!   capacity it merges with partition j + 1 as well. O(log_r n) segments.
//! * `logarithmic`: the same with r = 2, which is the binary-counter
//!   logarithmic merge (at most one segment per power-of-two size).
//!
//! * `in-place` and `in-place-contiguous` (DESIGN §0): no merges at all;
//!   each flush appends its postings to the terms' chains in one chained
//!   segment ([`crate::update::inplace`]).
//!
//! A segment's partition is implied by its live size: the smallest j whose
//! capacity holds it. The flush unit is the writer's buffer budget in
//! documents.

use crate::index::Strategy;

impl Strategy {
    /// How many of the newest segments to merge after a flush, given the
    /// live sizes of all segments, oldest first (the newest being the one
    /// just flushed), and the flush unit in documents. 0 or 1: no merge.
    pub fn merge_count(self, sizes: &[u64], unit: u64) -> usize {
        let n = sizes.len();
        match self {
            Strategy::NoMerge | Strategy::InPlace | Strategy::InPlaceContiguous => 0,
            Strategy::ImmediateMerge => n,
            Strategy::Geometric => geometric(sizes, unit.max(1), 3),
            Strategy::Logarithmic => geometric(sizes, unit.max(1), 2),
        }
    }
}

/// Capacity of partition `j` in documents: (r − 1)·r^j·unit.
fn capacity(j: u32, unit: u64, r: u64) -> u64 {
    (r - 1).saturating_mul(r.saturating_pow(j)).saturating_mul(unit)
}

/// The partition a segment of `size` documents occupies.
fn partition(size: u64, unit: u64, r: u64) -> u32 {
    let mut j = 0;
    while capacity(j, unit, r) < size {
        j += 1;
    }
    j
}

fn geometric(sizes: &[u64], unit: u64, r: u64) -> usize {
    let Some((&newest, older)) = sizes.split_last() else {
        return 0;
    };
    let mut acc = newest;
    let mut taken = 1;
    let mut j = 0u32;
    let mut next = older.iter().rev().peekable();
    loop {
        if let Some(&&s) = next.peek() {
            if partition(s, unit, r) <= j {
                acc += s;
                taken += 1;
                next.next();
                continue;
            }
        }
        if acc <= capacity(j, unit, r) || next.peek().is_none() {
            break;
        }
        j += 1;
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Simulates `flushes` equal flushes and returns the segment sizes.
    fn simulate(s: Strategy, flushes: usize) -> (Vec<u64>, u64) {
        let mut sizes: Vec<u64> = Vec::new();
        let mut rewritten = 0;
        for _ in 0..flushes {
            sizes.extend([1]);
            let k = s.merge_count(&sizes, 1);
            if k > 1 {
                let merged: u64 = sizes.drain(sizes.len() - k..).sum();
                rewritten += merged;
                sizes.push(merged);
            }
        }
        (sizes, rewritten)
    }

    #[test]
    fn logarithmic_is_a_binary_counter() {
        for n in 1..200usize {
            let (sizes, _) = simulate(Strategy::Logarithmic, n);
            let mut expect: Vec<u64> = (0..usize::BITS)
                .rev()
                .filter(|b| n >> b & 1 == 1)
                .map(|b| 1 << b)
                .collect();
            expect.sort_by(|a, b| b.cmp(a));
            assert_eq!(sizes, expect, "after {n} flushes");
        }
    }

    #[test]
    fn geometric_keeps_partitions_within_capacity() {
        for n in 1..300usize {
            let (sizes, _) = simulate(Strategy::Geometric, n);
            assert_eq!(sizes.iter().sum::<u64>(), n as u64);
            // Oldest first, strictly growing partitions going back in time.
            let parts: Vec<u32> = sizes.iter().map(|&s| partition(s, 1, 3)).collect();
            assert!(parts.windows(2).all(|w| w[0] > w[1]), "{n}: {sizes:?} {parts:?}");
            assert!(sizes.len() <= 1 + (n as f64).log(3.0).ceil() as usize, "{n}: {sizes:?}");
        }
    }

    #[test]
    fn merge_costs_rank_as_expected() {
        let n = 100;
        let (imm, imm_cost) = simulate(Strategy::ImmediateMerge, n);
        let (_, geo_cost) = simulate(Strategy::Geometric, n);
        let (_, log_cost) = simulate(Strategy::Logarithmic, n);
        let (none, none_cost) = simulate(Strategy::NoMerge, n);
        assert_eq!(imm, vec![100]);
        assert_eq!(none.len(), 100);
        assert_eq!(none_cost, 0);
        assert!(geo_cost < imm_cost / 5, "{geo_cost} vs {imm_cost}");
        assert!(log_cost < imm_cost / 5, "{log_cost} vs {imm_cost}");
    }

    #[test]
    fn names_round_trip() {
        for s in Strategy::ALL {
            assert_eq!(s.name().parse::<Strategy>().unwrap(), s);
        }
        assert!("in-place-ish".parse::<Strategy>().is_err());
    }
}
