//! Exact counts with bitsets: for plans made of terms and boolean operators,
//! each term's postings are decoded block by block into a bitset of the
//! segment's documents and the bitsets are combined (OR for SHOULD, AND for
//! MUST, AND-NOT for MUST_NOT). No scoring, no merging of cursors, no call
//! per document through the scorer tree. Phrases need positions and are
//! left to the scorers.

pub use crate::common::BitSet;
use crate::query::weight::Weight;

/// True when counting `plan` with bitsets ([`Weight::matches`]) is possible
/// (no phrase anywhere) and expected to be cheaper than iterating its
/// scorers.
pub fn prefer_bitsets(plan: &dyn Weight) -> bool {
    plan.bitset_cost().is_some_and(|c| c <= plan.iteration_cost())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_operations() {
        let mut a = BitSet::new(200);
        let mut b = BitSet::new(200);
        for d in [0, 63, 64, 199] {
            a.insert(d);
        }
        for d in [63, 100, 199] {
            b.insert(d);
        }
        b.insert(500);
        let mut u = a.clone();
        u.union_with(&b);
        assert_eq!(u.len(), 5);
        let mut i = a.clone();
        i.intersect_with(&b);
        assert_eq!(i.len(), 2);
        assert!(i.contains(199) && !i.contains(0));
        a.subtract(&b);
        assert_eq!(a.len(), 2);
        assert!(!BitSet::new(10).contains(3));
    }
}
