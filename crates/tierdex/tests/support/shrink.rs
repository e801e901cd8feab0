//! Shrinking a failing query to a smaller one that still fails.

use tierdex::query::ast::{Clause, Query};

/// Smaller variants of `query`: a clause removed, a clause alone, a clause
/// shrunk, a phrase word removed, a minimum's query without the minimum or
/// shrunk under it.
pub fn smaller(query: &Query) -> Vec<Query> {
    let mut out = Vec::new();
    match query {
        Query::Boolean(clauses) => {
            for (i, c) in clauses.iter().enumerate() {
                out.push(c.query.clone());
                if clauses.len() > 1 {
                    let mut rest = clauses.clone();
                    rest.remove(i);
                    out.push(Query::Boolean(rest));
                }
                for sub in smaller(&c.query) {
                    let mut cl: Vec<Clause> = clauses.clone();
                    cl[i].query = sub;
                    out.push(Query::Boolean(cl));
                }
            }
        }
        Query::MinShouldMatch { query: inner, min } => {
            out.push((**inner).clone());
            for sub in smaller(inner) {
                out.push(Query::MinShouldMatch {
                    query: Box::new(sub),
                    min: *min,
                });
            }
        }
        Query::Phrase { field, text } => {
            let words: Vec<&str> = text.split_whitespace().collect();
            for i in 0..words.len() {
                let mut w = words.clone();
                w.remove(i);
                if !w.is_empty() {
                    out.push(Query::Phrase {
                        field: *field,
                        text: w.join(" "),
                    });
                }
            }
        }
        _ => {}
    }
    out
}

/// Greedily shrinks `query` while `fails` holds, calling `fails` at most
/// `budget` times.
pub fn shrink(query: &Query, mut budget: usize, mut fails: impl FnMut(&Query) -> bool) -> Query {
    let mut current = query.clone();
    'outer: loop {
        for candidate in smaller(&current) {
            if budget == 0 {
                break 'outer;
            }
            budget -= 1;
            if fails(&candidate) {
                current = candidate;
                continue 'outer;
            }
        }
        break;
    }
    current
}
