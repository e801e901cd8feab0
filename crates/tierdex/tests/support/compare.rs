//! Comparing an engine answer with the oracle's.
//!
//! Scores must agree to a relative tolerance ([`REL_TOL`]): the engine
//! computes in `f32`, the oracle in `f64`. Documents must agree rank by rank,
//! except among near-ties (consecutive oracle ranks whose scores are within
//! the tolerance of each other), whose order the rounding may change: inside
//! the returned list such a group must hold the same documents; a group that
//! straddles the cut-off may be represented by any of its members.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use tierdex::search::{Mode, SearchResults};

use super::oracle::OracleResult;

/// Relative tolerance on scores.
pub const REL_TOL: f64 = 1e-4;

/// Whether two scores agree to [`REL_TOL`].
pub fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= REL_TOL * a.abs().max(b.abs()).max(1e-6)
}

/// Panics with a readable diff when `engine` and `oracle` disagree.
/// `context` should name the query, mode, k and how to reproduce the case.
pub fn assert_same(engine: &SearchResults, oracle: &OracleResult, k: usize, context: &str) {
    if let Err(why) = compare(engine, oracle, k) {
        panic!("{}", report(engine, oracle, k, context, &why));
    }
}

/// The full failure message for a disagreement `why`.
pub fn report(engine: &SearchResults, oracle: &OracleResult, k: usize, context: &str, why: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "engine and oracle disagree: {why}");
    let _ = writeln!(out, "{context}");
    let _ = writeln!(
        out,
        "mode {:?}, k {k}; count: engine {:?}, oracle {:?} (oracle total matches {})",
        oracle.mode,
        engine.count,
        oracle.count,
        oracle.total()
    );
    let _ = writeln!(
        out,
        "{:>5}  {:>7} {:>12} {:>12}  |  {:>7} {:>12}",
        "rank", "engine", "score", "(oracle's)", "oracle", "score"
    );
    let rows = engine.hits.len().max(oracle.hits.len());
    for i in 0..rows {
        let e = engine.hits.get(i);
        let o = oracle.hits.get(i);
        let mark = match (e, o) {
            (Some(e), Some(o)) if e.doc == o.0 && close(f64::from(e.score), o.1) => " ",
            _ => "*",
        };
        let left = match e {
            Some(e) => {
                let theirs = oracle
                    .score_of(e.doc)
                    .map_or("no match".to_string(), |s| format!("{s:.6}"));
                format!("{:>7} {:>12.6} {:>12}", e.doc, e.score, theirs)
            }
            None => format!("{:>7} {:>12} {:>12}", "-", "", ""),
        };
        let right = match o {
            Some(o) => format!("{:>7} {:>12.6}", o.0, o.1),
            None => format!("{:>7}", "-"),
        };
        let _ = writeln!(out, "{mark}{i:>4}  {left}  |  {right}");
    }
    if let Some(next) = oracle.ranked.get(oracle.hits.len()) {
        let _ = writeln!(
            out,
            "(oracle's next match after the cut-off: doc {} score {:.6})",
            next.0, next.1
        );
    }
    out
}

/// Checks `engine` against `oracle`; `Err` describes the first disagreement.
pub fn compare(engine: &SearchResults, oracle: &OracleResult, k: usize) -> Result<(), String> {
    assert_eq!(oracle.k, k, "oracle result computed for another k");
    // Counts.
    match (oracle.count, engine.count) {
        (Some(want), Some(got)) if want != got => {
            return Err(format!("count {got}, expected {want}"));
        }
        (Some(want), None) => {
            return Err(format!("no count returned, expected {want}"));
        }
        (None, Some(got)) if got != oracle.total() => {
            // A count the mode did not ask for must still be right.
            return Err(format!(
                "unrequested count {got} is wrong: {} documents match",
                oracle.total()
            ));
        }
        _ => {}
    }
    if oracle.mode == Mode::Count {
        if engine.hits.is_empty() {
            return Ok(());
        }
        return Err(format!("{} hits returned in Count mode", engine.hits.len()));
    }
    // Lengths.
    let n = oracle.hits.len();
    if engine.hits.len() != n {
        return Err(format!("{} hits, expected {n}", engine.hits.len()));
    }
    // Every returned document is distinct, matches, and has its score.
    let oracle_score: HashMap<u32, f64> = oracle.ranked.iter().copied().collect();
    let mut seen = HashSet::new();
    for (i, hit) in engine.hits.iter().enumerate() {
        if !seen.insert(hit.doc) {
            return Err(format!("doc {} returned twice (rank {i})", hit.doc));
        }
        let Some(&want) = oracle_score.get(&hit.doc) else {
            return Err(format!("rank {i}: doc {} does not match the query", hit.doc));
        };
        if !close(f64::from(hit.score), want) {
            return Err(format!("rank {i}: doc {} scored {}, oracle {want}", hit.doc, hit.score));
        }
    }
    // Ranks: scores rank by rank, then documents group by group.
    for (i, (hit, want)) in engine.hits.iter().zip(&oracle.hits).enumerate() {
        if !close(f64::from(hit.score), want.1) {
            return Err(format!(
                "rank {i}: score {} (doc {}), oracle's rank-{i} score {} (doc {})",
                hit.score, hit.doc, want.1, want.0
            ));
        }
    }
    let mut start = 0;
    while start < n {
        // The near-tie group starting at `start`, over the oracle's full ranking.
        let mut end = start + 1;
        while end < oracle.ranked.len() && close(oracle.ranked[end - 1].1, oracle.ranked[end].1) {
            end += 1;
        }
        let group = &oracle.ranked[start..end];
        let shown = start..end.min(n);
        let engine_docs: Vec<u32> = engine.hits[shown.clone()].iter().map(|h| h.doc).collect();
        if end == start + 1 {
            if engine_docs[0] != group[0].0 {
                return Err(format!(
                    "rank {start}: doc {}, expected doc {}",
                    engine_docs[0], group[0].0
                ));
            }
        } else if end <= n {
            let mut want: Vec<u32> = group.iter().map(|h| h.0).collect();
            let mut got = engine_docs.clone();
            want.sort_unstable();
            got.sort_unstable();
            if got != want {
                return Err(format!(
                    "ranks {}..{}: near-tied docs {got:?}, expected {want:?}",
                    shown.start, shown.end
                ));
            }
        } else {
            // Straddles the cut-off: any members will do.
            let (lo, hi) = group
                .iter()
                .fold((f64::MAX, f64::MIN), |(lo, hi), h| (lo.min(h.1), hi.max(h.1)));
            for (rank, doc) in shown.clone().zip(&engine_docs) {
                let s = oracle_score[doc];
                if !(close(s, lo) || close(s, hi) || (lo..=hi).contains(&s)) {
                    return Err(format!(
                        "rank {rank}: doc {doc} (oracle score {s}) is not in the near-tie \
                         group at the cut-off (scores {lo}..{hi})"
                    ));
                }
            }
        }
        start = end;
    }
    Ok(())
}
