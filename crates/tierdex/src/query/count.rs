//! Exact counts with bitsets: for plans made of terms and boolean operators,
//! each term's postings are decoded block by block into a bitset of the
//! segment's documents and the bitsets are combined (OR for SHOULD, AND for
//! MUST, AND-NOT for MUST_NOT). No scoring, no merging of cursors, no call
//! per document through the scorer tree. Phrases need positions and are
//! left to the scorers.

pub use crate::common::BitSet;
use crate::error::Result;
use crate::index::SegmentReader;
use crate::query::planner::Plan;

/// True when [`matches`] can evaluate `plan` (no phrase anywhere).
pub fn supported(plan: &Plan) -> bool {
    match plan {
        Plan::Term(_) | Plan::Nothing => true,
        Plan::Phrase(_) => false,
        Plan::Bool(b) => b.must.iter().chain(&b.should).chain(&b.must_not).all(supported),
    }
}

/// Postings a bitset count decodes: every posting of every term.
fn bitset_cost(plan: &Plan) -> f64 {
    match plan {
        Plan::Term(t) => t.doc_freq as f64,
        Plan::Nothing | Plan::Phrase(_) => 0.0,
        Plan::Bool(b) => b.must.iter().chain(&b.should).chain(&b.must_not).map(bitset_cost).sum(),
    }
}

/// Rough work of counting by iterating the scorer tree: a conjunction is led
/// by its cheapest clause and seeks the others (a few units per candidate),
/// a disjunction merges all its clauses (two units per posting).
fn iteration_cost(plan: &Plan) -> f64 {
    match plan {
        Plan::Term(t) => t.doc_freq as f64,
        Plan::Nothing => 0.0,
        Plan::Phrase(p) => p.terms.iter().map(|t| t.doc_freq as f64).sum::<f64>() * 8.0,
        Plan::Bool(b) if !b.must.is_empty() => {
            let lead = b.must.iter().map(iteration_cost).fold(f64::INFINITY, f64::min);
            lead * 3.0 * (b.must.len() + b.must_not.len()) as f64
        }
        Plan::Bool(b) => 2.0 * b.should.iter().map(iteration_cost).sum::<f64>(),
    }
}

/// True when counting `plan` with bitsets is expected to be cheaper than
/// iterating its scorers (and possible: no phrase).
pub fn prefer_bitsets(plan: &Plan) -> bool {
    supported(plan) && bitset_cost(plan) <= iteration_cost(plan)
}

/// The documents of `seg` matching `plan` (which must be [`supported`]).
pub fn matches(plan: &Plan, seg: &SegmentReader) -> Result<BitSet> {
    let n = seg.max_doc();
    Ok(match plan {
        Plan::Nothing | Plan::Phrase(_) => BitSet::new(n),
        Plan::Term(t) => {
            let mut set = BitSet::new(n);
            if let Some(info) = seg.term_info(&t.key)? {
                let mut c = seg.cursor(&info)?;
                c.union_into(set.words_mut());
                if let Some(e) = c.take_error() {
                    return Err(e);
                }
            }
            set
        }
        Plan::Bool(b) => {
            let mut acc = if b.must.is_empty() {
                let mut acc = BitSet::new(n);
                for p in &b.should {
                    acc.union_with(&matches(p, seg)?);
                }
                acc
            } else {
                let mut acc = matches(&b.must[0], seg)?;
                for p in &b.must[1..] {
                    if acc.is_empty() {
                        break;
                    }
                    acc.intersect_with(&matches(p, seg)?);
                }
                acc
            };
            for p in &b.must_not {
                if acc.is_empty() {
                    break;
                }
                acc.subtract(&matches(p, seg)?);
            }
            acc
        }
    })
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
