//! Sorted results: by fields' values (ascending or descending, missing
//! values first or last, the smallest or largest of several), by score and
//! by document; pages by `from` and by `search_after`.
//!
//! Every page ends with the global document number as the last tie-break,
//! and each hit's sort values end with it, so `search_after` with a hit's
//! whole sort values continues exactly after it on the same snapshot (as
//! Elasticsearch's `_shard_doc` does in a point in time).
//!
//! Each segment part keeps its best `from + size` candidates, compared by
//! column codes (keywords by their ordinals in the part's dictionary, so no
//! string is read per document); the survivors' keywords are then read and
//! the parts' candidates merged. A query matching every document, sorted by
//! one field with points, walks the points in value order and stops after
//! `from + size` live documents instead of visiting them all. A query
//! matching many documents walks them too: without a count, a chunk of the
//! points at a time leads the query (only the chunk's documents are
//! tested); with one, the matches are gathered first (and when they are
//! few, their values read one by one instead).

use std::cmp::Ordering;

use serde::{Deserialize, Serialize};

use crate::column::{code_double, code_long, ColumnKind, ColumnReader};
use crate::common::BitSet;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::query::collector::Deadline;
use crate::query::scorer::Scorer;
use crate::query::weight::{Build, Plan, ScoringContext};
use crate::schema::{DocId, Field, TERMINATED};

/// What a sort key is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SortBy {
    /// The relevance score.
    Score,
    /// The document number (index order).
    Doc,
    /// A keyword, number, date or boolean field's value.
    Field(Field),
}

/// One key of a sort.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SortField {
    /// What is compared.
    pub by: SortBy,
    /// Largest first.
    pub descending: bool,
    /// Documents without a value first (else last, the default).
    pub missing_first: bool,
    /// Of several values, the largest (else the smallest; the default is
    /// the largest when descending).
    pub max: bool,
}

impl SortField {
    /// Ascending by `by`, missing values last, the smallest of several.
    pub fn asc(by: SortBy) -> SortField {
        SortField {
            by,
            descending: false,
            missing_first: false,
            max: false,
        }
    }

    /// Descending by `by`, missing values last, the largest of several.
    pub fn desc(by: SortBy) -> SortField {
        SortField {
            by,
            descending: true,
            missing_first: false,
            max: true,
        }
    }
}

impl SortField {
    /// The order of two hits' values for this key, as a sorted search
    /// orders them (for merging the pages of several indices).
    pub fn cmp_values(&self, a: &SortValue, b: &SortValue) -> Ordering {
        use SortValue::{Double, Keyword, Long, Missing};
        let ord = match (a, b) {
            (Missing, Missing) => return Ordering::Equal,
            (Missing, _) => {
                return if self.missing_first {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (_, Missing) => {
                return if self.missing_first {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (Long(x), Long(y)) => x.cmp(y),
            (Double(x), Double(y)) => x.total_cmp(y),
            (Long(x), Double(y)) => (*x as f64).total_cmp(y),
            (Double(x), Long(y)) => x.total_cmp(&(*y as f64)),
            (Keyword(x), Keyword(y)) => x.as_bytes().cmp(y.as_bytes()),
            // Values of one key are of one kind; a keyword sorts after numbers.
            (Keyword(_), _) => Ordering::Greater,
            (_, Keyword(_)) => Ordering::Less,
        };
        if self.descending {
            ord.reverse()
        } else {
            ord
        }
    }
}

/// A hit's value for one sort key, as answers show it and `search_after`
/// takes it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SortValue {
    /// No value.
    Missing,
    /// A long, a date (milliseconds), a boolean (0 or 1), or a document number.
    Long(i64),
    /// A double or a score.
    Double(f64),
    /// A keyword.
    Keyword(String),
}

/// One part of a comparable key.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Missing,
    /// A column code; for keywords within one part, `2 * ordinal + 1`
    /// (even numbers stand between ordinals, for `search_after` bounds).
    Code(u64),
    Str(Box<[u8]>),
    Score(f32),
}

fn cmp_part(a: &Part, b: &Part, f: &SortField) -> Ordering {
    let ord = match (a, b) {
        (Part::Missing, Part::Missing) => return Ordering::Equal,
        (Part::Missing, _) => {
            return if f.missing_first {
                Ordering::Less
            } else {
                Ordering::Greater
            }
        }
        (_, Part::Missing) => {
            return if f.missing_first {
                Ordering::Greater
            } else {
                Ordering::Less
            }
        }
        (Part::Code(x), Part::Code(y)) => x.cmp(y),
        (Part::Str(x), Part::Str(y)) => x.cmp(y),
        (Part::Score(x), Part::Score(y)) => x.total_cmp(y),
        // Parts of one key position are always of one kind.
        _ => Ordering::Equal,
    };
    if f.descending {
        ord.reverse()
    } else {
        ord
    }
}

/// A candidate: its key parts (one per sort field), global document, score.
#[derive(Debug, Clone)]
struct Cand {
    parts: Vec<Part>,
    doc: DocId,
    score: f32,
}

fn cmp_cand(a: &Cand, b: &Cand, spec: &[SortField]) -> Ordering {
    cmp_key(&a.parts, a.doc, b, spec)
}

/// Order of the key `(parts, doc)` against candidate `b`.
#[inline]
fn cmp_key(parts: &[Part], doc: DocId, b: &Cand, spec: &[SortField]) -> Ordering {
    for (i, f) in spec.iter().enumerate() {
        let o = cmp_part(&parts[i], &b.parts[i], f);
        if o != Ordering::Equal {
            return o;
        }
    }
    doc.cmp(&b.doc)
}

/// The best candidates seen, at most `n` (kept loosely: pruned when twice
/// over; once `n` are kept, anything after the `n`-th is refused).
struct Best<'s> {
    n: usize,
    spec: &'s [SortField],
    v: Vec<Cand>,
    /// The `n`-th best after the last prune.
    worst: Option<Cand>,
}

impl<'s> Best<'s> {
    fn new(n: usize, spec: &'s [SortField]) -> Self {
        Best {
            n,
            spec,
            v: Vec::new(),
            worst: None,
        }
    }
    /// Whether a candidate with key `(parts, doc)` cannot be among the best.
    #[inline]
    fn refuses(&self, parts: &[Part], doc: DocId) -> bool {
        self.n == 0
            || self
                .worst
                .as_ref()
                .is_some_and(|w| cmp_key(parts, doc, w, self.spec) != Ordering::Less)
    }
    fn push(&mut self, c: Cand) {
        if self.refuses(&c.parts, c.doc) {
            return;
        }
        self.v.push(c);
        if self.v.len() >= 2 * self.n.max(16) {
            self.prune();
        }
    }
    fn prune(&mut self) {
        let spec = self.spec;
        self.v.sort_by(|a, b| cmp_cand(a, b, spec));
        self.v.truncate(self.n);
        if self.v.len() == self.n {
            self.worst = self.v.last().cloned();
        }
    }
    fn into_sorted(mut self) -> Vec<Cand> {
        self.prune();
        self.v
    }
}

/// A sorted search's page: the hits (global documents, scores) in order
/// and their sort values.
#[derive(Debug, Clone, Default)]
pub struct SortedPage {
    /// Global document numbers and scores, in sort order.
    pub hits: Vec<(DocId, f32)>,
    /// Each hit's sort values, the document number last.
    pub values: Vec<Vec<SortValue>>,
}

/// Checks a sort against the index: fields must be keyword, number, date
/// or boolean fields with doc values.
pub fn check(index: &Index, spec: &[SortField]) -> Result<()> {
    for f in spec {
        if let SortBy::Field(field) = f.by {
            let schema = index.schema();
            let e = schema
                .entry(field)
                .ok_or_else(|| Error::InvalidArgument(format!("sort on unknown field {}", field.id())))?;
            if e.ty.column_kind().is_none() {
                return Err(Error::InvalidArgument(format!(
                    "cannot sort on `{}`, a text field: sort on a keyword, long, double, date or boolean field (e.g. `{}.keyword`)",
                    e.name, e.name
                )));
            }
            if !e.ty.doc_values() {
                return Err(Error::InvalidArgument(format!(
                    "cannot sort on `{}`: it has no doc values (doc_values: false)",
                    e.name
                )));
            }
        }
    }
    Ok(())
}

/// The key parts of `after` (a hit's sort values, the trailing document
/// number optional) for the fields of `spec`, keywords as strings; and the
/// document number when given (-1: before every document, so that every
/// document with equal values comes after).
fn after_parts(index: &Index, spec: &[SortField], after: &[SortValue]) -> Result<(Vec<Part>, Option<i64>)> {
    if after.len() != spec.len() && after.len() != spec.len() + 1 {
        return Err(Error::InvalidArgument(format!(
            "search_after has {} values; the sort has {} keys (and the document number may follow)",
            after.len(),
            spec.len()
        )));
    }
    let bad = |i: usize, what: &str| {
        Error::InvalidArgument(format!("search_after value {} ({:?}) is not {what}", i + 1, after[i]))
    };
    let mut parts = Vec::with_capacity(spec.len());
    for (i, f) in spec.iter().enumerate() {
        let v = &after[i];
        parts.push(match (f.by, v) {
            (_, SortValue::Missing) => Part::Missing,
            (SortBy::Score, SortValue::Double(x)) => Part::Score(*x as f32),
            (SortBy::Score, SortValue::Long(x)) => Part::Score(*x as f32),
            (SortBy::Doc, SortValue::Long(x)) if *x >= 0 => Part::Code(*x as u64),
            (SortBy::Field(field), v) => {
                let kind = index.schema().entry(field).and_then(|e| e.ty.column_kind());
                match (kind, v) {
                    (Some(ColumnKind::Keyword), SortValue::Keyword(s)) => Part::Str(s.as_bytes().into()),
                    (Some(ColumnKind::Double), SortValue::Double(x)) => Part::Code(crate::column::double_code(*x)),
                    (Some(ColumnKind::Double), SortValue::Long(x)) => Part::Code(crate::column::double_code(*x as f64)),
                    (Some(ColumnKind::Long | ColumnKind::Date | ColumnKind::Boolean), SortValue::Long(x)) => {
                        Part::Code(if kind == Some(ColumnKind::Boolean) {
                            *x as u64
                        } else {
                            crate::column::long_code(*x)
                        })
                    }
                    _ => return Err(bad(i, "a value of the sort field's type")),
                }
            }
            _ => return Err(bad(i, "a number")),
        });
    }
    let doc = match after.get(spec.len()) {
        None => None,
        Some(SortValue::Long(d)) if *d >= -1 && *d <= u32::MAX as i64 => Some(*d),
        Some(_) => return Err(bad(spec.len(), "a document number (or -1)")),
    };
    Ok((parts, doc))
}

/// Whether the key `(parts, cdoc)` comes strictly after `(after, doc)` in
/// sort order.
fn is_after(parts: &[Part], cdoc: DocId, after: &[Part], doc: Option<i64>, spec: &[SortField]) -> bool {
    for (i, f) in spec.iter().enumerate() {
        match cmp_part(&parts[i], &after[i], f) {
            Ordering::Greater => return true,
            Ordering::Less => return false,
            Ordering::Equal => {}
        }
    }
    doc.is_some_and(|d| i64::from(cdoc) > d)
}

/// Runs a sorted search of `plan` over `index`: the page of `size` hits
/// after the first `from` (and after `search_after`), with the exact
/// count of matches when `count` is given.
#[allow(clippy::too_many_arguments)]
pub fn search(
    index: &Index,
    scoring: &ScoringContext,
    plan: &Plan,
    spec: &[SortField],
    from: usize,
    size: usize,
    search_after: Option<&[SortValue]>,
    mut count: Option<&mut u64>,
    deadline: &mut Deadline,
    (filters, cutoff): (crate::bloom::FilterUse, Option<crate::query::collector::Cutoff>),
) -> Result<Option<SortedPage>> {
    check(index, spec)?;
    let n = from.saturating_add(size);
    let after = search_after.map(|a| after_parts(index, spec, a)).transpose()?;
    let needs_score = spec.iter().any(|f| f.by == SortBy::Score);
    let mut all: Vec<Cand> = Vec::new();
    let match_all = plan
        .as_any()
        .downcast_ref::<crate::query::column::MatchAllWeight>()
        .is_some();
    for (si, (seg, &base)) in index.segments().iter().zip(index.bases()).enumerate() {
        if deadline.passed() {
            return Ok(None);
        }
        let deleted = index.deletes(si).map(|d| d.bits());
        // A sort by one field's points: a match-all walks them in order; a
        // query matching many documents gathers them in a bit set first,
        // then walks the points to the first `n` of them.
        if match_all && after.is_none() {
            if let Some(found) = walk_points(seg, base, deleted, spec, n, None, None)? {
                if let Some(c) = count.as_deref_mut() {
                    *c += (seg.max_doc() - deleted.map_or(0, |d| d.len() as u32)) as u64;
                }
                all.extend(found);
                continue;
            }
        }
        // A range on the sort field alone: its points, in order, are the
        // matches.
        let exact = match sort_field(spec) {
            Some(f) if count.is_none() && after.is_none() && !match_all => plan.exact_code_range(f),
            _ => None,
        };
        if let Some(range) = exact {
            if let Some(found) = walk_points(seg, base, deleted, spec, n, None, Some(range))? {
                all.extend(found);
                continue;
            }
        }
        let wide = {
            let cost = plan.iteration_cost();
            cost * cost > 4.0 * n as f64 * seg.max_doc() as f64
        };
        // The matches gathered by the wide path when too few of them make
        // the walk worth it: their values are read one by one below.
        let mut gathered: Option<BitSet> = None;
        if !match_all && !needs_score && after.is_none() && wide && walkable(spec) {
            // Without a count, chunks of the points lead the query: only
            // their documents are tested.
            if count.is_none() {
                match walk_points_led(seg, base, deleted, spec, n, plan, scoring, (filters, cutoff), deadline)? {
                    Led::Found(found) => {
                        all.extend(found);
                        continue;
                    }
                    Led::TimedOut => return Ok(None),
                    Led::Declined => {}
                }
            }
            let mut build = Build::new(seg, scoring);
            build.filters = filters;
            build.cutoff = cutoff;
            let mut matched = BitSet::new(seg.max_doc());
            let mut matches = 0u64;
            if crate::query::count::prefer_bitsets(&**plan) {
                matched = plan.matches(seg, cutoff.as_ref())?;
                if let Some(d) = deleted {
                    matched.subtract(d);
                }
                matches = matched.len();
            } else if let Some(mut s) = plan.scorer(build)? {
                // Only the matches are wanted: no scores.
                s.set_count_only();
                let mut doc = s.doc();
                while doc != TERMINATED {
                    if deadline.tick() {
                        return Ok(None);
                    }
                    if !deleted.is_some_and(|d| d.contains(doc)) {
                        matched.insert(doc);
                        matches += 1;
                    }
                    doc = s.advance();
                }
                if let Some(e) = s.take_error() {
                    return Err(e);
                }
            }
            if let Some(c) = count.as_deref_mut() {
                *c += matches;
            }
            // The walk visits about n * max_doc / matches points (all of
            // them within the query's bounds on the field, if it has some);
            // reading the matches' own values costs one read each.
            let bounds = sort_field(spec).and_then(|f| plan.code_bounds(f));
            let points = match sort_field(spec) {
                Some(f) => points_within(seg, f, bounds)?,
                None => seg.max_doc() as u64,
            };
            let walk = n as f64 * points as f64 / matches.max(1) as f64;
            if walk <= 2.0 * matches as f64 {
                if let Some(found) = walk_points(seg, base, deleted, spec, n, Some(&matched), bounds)? {
                    all.extend(found);
                    continue;
                }
            }
            gathered = Some(matched);
        }
        let counted = gathered.is_some();
        let mut s: Box<dyn Scorer + '_> = match gathered {
            Some(m) => Box::new(crate::query::column::DocSetScorer::new(
                crate::query::column::DocSet::Bits(m),
                0.0,
            )),
            None => {
                let mut build = Build::new(seg, scoring);
                build.filters = filters;
                build.cutoff = cutoff;
                let Some(s) = plan.scorer(build)? else {
                    continue;
                };
                s
            }
        };
        let mut readers: Vec<Vec<Option<ColumnReader<'_>>>> = seg
            .parts()
            .iter()
            .map(|p| {
                spec.iter()
                    .map(|f| match f.by {
                        SortBy::Field(field) => p.columns().and_then(|c| c.reader(field.id())),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        // Per part: keyword bounds of search_after as ordinals.
        let mut after_local: Vec<Option<Vec<Part>>> = vec![None; seg.parts().len()];
        let mut best: Vec<Best<'_>> = (0..seg.parts().len()).map(|_| Best::new(n, spec)).collect();
        let mut part = 0usize;
        // The key of the document at hand (no allocation unless it is kept).
        let mut key: Vec<Part> = Vec::with_capacity(spec.len());
        let mut doc = s.doc();
        while doc != TERMINATED {
            if deadline.tick() {
                return Ok(None);
            }
            if deleted.is_some_and(|d| d.contains(doc)) {
                doc = s.advance();
                continue;
            }
            if let (Some(c), false) = (count.as_deref_mut(), counted) {
                *c += 1;
            }
            while part + 1 < seg.parts().len() && seg.parts()[part + 1].base <= doc {
                part += 1;
            }
            let p = &seg.parts()[part];
            let local = doc - p.base;
            key.clear();
            let score = if needs_score { s.score() } else { 0.0 };
            for (i, f) in spec.iter().enumerate() {
                key.push(match f.by {
                    SortBy::Score => Part::Score(score),
                    SortBy::Doc => Part::Code((base + doc) as u64),
                    SortBy::Field(_) => match readers[part][i].as_mut() {
                        None => Part::Missing,
                        Some(r) => match r.extreme(local, !f.max)? {
                            None => Part::Missing,
                            Some(c) if r.meta().kind == ColumnKind::Keyword => Part::Code(2 * c + 1),
                            Some(c) => Part::Code(c),
                        },
                    },
                });
            }
            if let Some((a, adoc)) = &after {
                if after_local[part].is_none() {
                    after_local[part] = Some(local_after(a, spec, &mut readers[part])?);
                }
                if !is_after(&key, base + doc, after_local[part].as_ref().expect("set"), *adoc, spec) {
                    doc = s.advance();
                    continue;
                }
            }
            if !best[part].refuses(&key, base + doc) {
                best[part].push(Cand {
                    parts: key.clone(),
                    doc: base + doc,
                    score,
                });
            }
            doc = s.advance();
        }
        if let Some(e) = s.take_error() {
            return Err(e);
        }
        for (pi, b) in best.into_iter().enumerate() {
            let mut found = b.into_sorted();
            to_strings(&mut found, spec, &mut readers[pi])?;
            all.extend(found);
        }
    }
    all.sort_by(|a, b| cmp_cand(a, b, spec));
    let page: Vec<Cand> = all.into_iter().skip(from).take(size).collect();
    let mut out = SortedPage::default();
    for c in page {
        let mut values: Vec<SortValue> = Vec::with_capacity(spec.len() + 1);
        for (i, f) in spec.iter().enumerate() {
            values.push(match (&c.parts[i], f.by) {
                (Part::Missing, _) => SortValue::Missing,
                (Part::Score(x), _) => SortValue::Double(*x as f64),
                (Part::Str(s), _) => SortValue::Keyword(String::from_utf8_lossy(s).into_owned()),
                (Part::Code(x), SortBy::Doc) => SortValue::Long(*x as i64),
                (Part::Code(x), SortBy::Field(field)) => {
                    match index.schema().entry(field).and_then(|e| e.ty.column_kind()) {
                        Some(ColumnKind::Double) => SortValue::Double(code_double(*x)),
                        Some(ColumnKind::Boolean) => SortValue::Long(*x as i64),
                        _ => SortValue::Long(code_long(*x)),
                    }
                }
                (Part::Code(x), SortBy::Score) => SortValue::Long(*x as i64),
            });
        }
        values.push(SortValue::Long(c.doc as i64));
        out.hits.push((c.doc, c.score));
        out.values.push(values);
    }
    Ok(Some(out))
}

/// The search_after key in one part's terms: keywords as ordinal positions
/// (`2 * ordinal + 1` for a value the part holds, `2 * insertion point`
/// between two).
fn local_after(after: &[Part], spec: &[SortField], readers: &mut [Option<ColumnReader<'_>>]) -> Result<Vec<Part>> {
    let mut out = Vec::with_capacity(after.len());
    for (i, p) in after.iter().enumerate() {
        out.push(match (p, spec[i].by, readers[i].as_mut()) {
            (Part::Str(s), SortBy::Field(_), Some(r)) => match r.ord_of(s)? {
                Ok(o) => Part::Code(2 * o + 1),
                Err(at) => Part::Code(2 * at),
            },
            // A part without the field: every document lacks it, and a
            // keyword bound compares only with missing values.
            (Part::Str(_), _, None) => Part::Code(0),
            (p, _, _) => p.clone(),
        });
    }
    Ok(out)
}

/// Replaces the keyword ordinals of `cands` (of one part) by their strings.
fn to_strings(cands: &mut [Cand], spec: &[SortField], readers: &mut [Option<ColumnReader<'_>>]) -> Result<()> {
    let mut buf = Vec::new();
    for (i, _) in spec.iter().enumerate() {
        let Some(r) = readers[i].as_mut() else {
            continue;
        };
        if r.meta().kind != ColumnKind::Keyword {
            continue;
        }
        for c in cands.iter_mut() {
            if let Part::Code(x) = c.parts[i] {
                r.term(x / 2, &mut buf)?;
                c.parts[i] = Part::Str(buf.as_slice().into());
            }
        }
    }
    Ok(())
}

/// The one field `spec` sorts by, when it sorts by one field.
fn sort_field(spec: &[SortField]) -> Option<Field> {
    match spec {
        [SortField {
            by: SortBy::Field(f), ..
        }] => Some(*f),
        _ => None,
    }
}

/// The points a walk of `r` visits: those within `bounds` when the column
/// is single-valued (a document's sort value is then its only value), else
/// all of them; and whether the bounds applied.
fn walk_run(r: &mut ColumnReader<'_>, bounds: Option<(u64, u64)>) -> Result<(crate::column::PointRun, bool)> {
    Ok(match bounds.filter(|_| !r.meta().multi) {
        Some((lo, hi)) => (r.point_run(lo, hi)?, true),
        None => (r.all_points(), false),
    })
}

/// The points of `field` in `seg` a walk visits: those within `bounds`
/// (where the column is single-valued), else all of them.
fn points_within(seg: &crate::index::SegmentReader, field: Field, bounds: Option<(u64, u64)>) -> Result<u64> {
    let mut total = 0;
    for p in seg.parts() {
        let Some(mut r) = p.columns().and_then(|c| c.reader(field.id())) else {
            continue;
        };
        let (run, _) = walk_run(&mut r, bounds)?;
        total += run.end - run.start;
    }
    Ok(total)
}

/// What [`walk_points_led`] came to.
enum Led {
    /// The segment's first `n` matches in the sort's order.
    Found(Vec<Cand>),
    /// The chunks would cost more than iterating the query: not walked.
    Declined,
    /// The deadline passed.
    TimedOut,
}

/// A query matching many documents, sorted by one field with points, no
/// count wanted: the points are walked in value order a chunk at a time,
/// each chunk's documents (in document order) leading a conjunction with
/// the query, until `n` matches are found. A chunk ends with a whole group
/// of equal values, so nothing after it can precede what it found. The
/// first chunk is sized for about `4n` matches at the query's estimated
/// density ([`Weight::estimated_matches`](crate::query::weight::Weight::estimated_matches))
/// and each next one is eight times larger; once the points tested
/// pass half the query's iteration cost (fewer matches than estimated), the
/// walk stops and the caller iterates the query instead.
#[allow(clippy::too_many_arguments)]
fn walk_points_led(
    seg: &crate::index::SegmentReader,
    base: DocId,
    deleted: Option<&BitSet>,
    spec: &[SortField],
    n: usize,
    plan: &Plan,
    scoring: &ScoringContext,
    (filters, cutoff): (crate::bloom::FilterUse, Option<crate::query::collector::Cutoff>),
    deadline: &mut Deadline,
) -> Result<Led> {
    use crate::query::column::{DocSet, DocSetScorer};
    let ([f], true) = (spec, walkable(spec)) else {
        return Ok(Led::Declined);
    };
    let SortBy::Field(field) = f.by else {
        return Ok(Led::Declined);
    };
    let cost = plan.iteration_cost().max(1.0);
    let expected = plan.estimated_matches(seg.max_doc() as f64).max(1.0);
    // The first chunk: about 4n matches expected.
    let first = (4 * n) as f64 * seg.max_doc() as f64 / expected;
    if first > cost / 4.0 {
        return Ok(Led::Declined);
    }
    let budget = cost / 2.0;
    let mut tested = 0f64;
    let mut out = Vec::new();
    for p in seg.parts() {
        let Some(mut r) = p.columns().and_then(|c| c.reader(field.id())) else {
            if p.max_doc > 0 {
                return Ok(Led::Declined);
            }
            continue;
        };
        if !r.has_points() {
            return Ok(Led::Declined);
        }
        let keyword = r.meta().kind == ColumnKind::Keyword;
        let multi = r.meta().multi;
        // Every match has a value within the query's bounds on the field
        // (a range on it, say): only their points are walked.
        let (all, bounded) = walk_run(&mut r, plan.code_bounds(field))?;
        let mut seen = std::collections::HashSet::new();
        let mut found: Vec<Cand> = Vec::new();
        // The first chunk's share of this part's walk.
        let share = (all.end - all.start) as f64 / seg.max_doc().max(1) as f64;
        let mut chunk = (first * share).clamp(64.0, 1e9) as u64;
        // Positions still to walk: [lo, hi).
        let (mut lo, mut hi) = (all.start, all.end);
        let mut docs: Vec<DocId> = Vec::new();
        let mut lead: Vec<DocId> = Vec::new();
        while found.len() < n && lo < hi {
            if deadline.passed() {
                return Ok(Led::TimedOut);
            }
            if tested > budget {
                return Ok(Led::Declined);
            }
            // The chunk's positions [a, b), extended to the end of its last
            // group of equal values.
            let take = chunk.min(hi - lo);
            let (a, b) = if f.descending {
                let mut a = hi - take;
                if a > lo {
                    let edge = r.point_code(a)?;
                    while a > lo && r.point_code(a - 1)? == edge {
                        a -= 1;
                    }
                }
                (a, hi)
            } else {
                let mut b = lo + take;
                if b < hi {
                    let edge = r.point_code(b - 1)?;
                    while b < hi && r.point_code(b)? == edge {
                        b += 1;
                    }
                }
                (lo, b)
            };
            if f.descending {
                hi = a;
            } else {
                lo = b;
            }
            tested += (b - a) as f64;
            chunk = chunk.saturating_mul(8);
            docs.clear();
            r.point_docs(crate::column::PointRun { start: a, end: b }, |d| docs.push(p.base + d))?;
            // A document of several values counts at its first position in
            // the walk (its smallest ascending, its largest descending).
            let first_seen = |i: usize| if f.descending { docs.len() - 1 - i } else { i };
            lead.clear();
            for i in 0..docs.len() {
                let doc = docs[first_seen(i)];
                if deleted.is_some_and(|d| d.contains(doc)) || (multi && !seen.insert(doc)) {
                    continue;
                }
                lead.push(doc);
            }
            if lead.is_empty() {
                continue;
            }
            // The chunk's documents in document order: a bit set when they
            // are many.
            let set = if lead.len() * 32 > seg.max_doc() as usize {
                let mut bits = BitSet::new(seg.max_doc());
                lead.iter().for_each(|&d| bits.insert(d));
                DocSet::Bits(bits)
            } else {
                lead.sort_unstable();
                lead.dedup();
                DocSet::List(std::mem::take(&mut lead))
            };
            let mut build = Build::new(seg, scoring);
            build.filters = filters;
            build.cutoff = cutoff;
            let lead_scorer: Box<dyn Scorer + '_> = Box::new(DocSetScorer::new(set, 0.0));
            let Some(mut led) = plan.scorer_led(build, lead_scorer)? else {
                return Ok(Led::Found(out));
            };
            led.set_count_only();
            let mut matched: Vec<DocId> = Vec::new();
            let mut doc = led.doc();
            while doc != TERMINATED {
                if deadline.tick() {
                    return Ok(Led::TimedOut);
                }
                matched.push(doc);
                doc = led.advance();
            }
            if let Some(e) = led.take_error() {
                return Err(e);
            }
            if matched.is_empty() {
                continue;
            }
            // The matches' values, read at their positions.
            let mut hits: Vec<(u64, DocId)> = Vec::with_capacity(matched.len());
            let mut taken = std::collections::HashSet::new();
            for i in 0..docs.len() {
                let at = first_seen(i);
                let doc = docs[at];
                if matched.binary_search(&doc).is_ok() && (!multi || taken.insert(doc)) {
                    hits.push((r.point_code(a + at as u64)?, doc));
                }
            }
            if f.descending {
                hits.sort_unstable_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            } else {
                hits.sort_unstable();
            }
            found.extend(hits.into_iter().map(|(code, doc)| Cand {
                parts: vec![if keyword {
                    Part::Code(2 * code + 1)
                } else {
                    Part::Code(code)
                }],
                doc: base + doc,
                score: 0.0,
            }));
        }
        if found.len() < n && !bounded && r.meta().docs_with_value < p.max_doc {
            // Matches without a value would follow: the caller's path
            // handles them.
            return Ok(Led::Declined);
        }
        found.truncate(n);
        let mut readers = vec![Some(r)];
        to_strings(&mut found, spec, &mut readers)?;
        out.extend(found);
    }
    Ok(Led::Found(out))
}

/// Whether `spec` is one field sorted by its points' order: ascending by
/// the smallest value or descending by the largest, missing values last.
fn walkable(spec: &[SortField]) -> bool {
    matches!(spec, [f] if matches!(f.by, SortBy::Field(_)) && !f.missing_first && f.max == f.descending)
}

/// A match-all sort by one field with points, ascending by the smallest
/// value or descending by the largest, missing values last: the first `n`
/// live documents of each part in the points' order. `None` when the sort
/// is not of that shape.
fn walk_points(
    seg: &crate::index::SegmentReader,
    base: DocId,
    deleted: Option<&BitSet>,
    spec: &[SortField],
    n: usize,
    accept: Option<&BitSet>,
    bounds: Option<(u64, u64)>,
) -> Result<Option<Vec<Cand>>> {
    if !walkable(spec) {
        return Ok(None);
    }
    let [f] = spec else {
        return Ok(None);
    };
    let SortBy::Field(field) = f.by else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for p in seg.parts() {
        let Some(mut r) = p.columns().and_then(|c| c.reader(field.id())) else {
            if p.max_doc > 0 {
                // Documents without the field: missing values, last.
                return Ok(None);
            }
            continue;
        };
        if !r.has_points() || (r.meta().docs_with_value as u64) < (n as u64).min(p.max_doc as u64) {
            return Ok(None);
        }
        let keyword = r.meta().kind == ColumnKind::Keyword;
        // Every accepted document has a value within `bounds`: only their
        // points are walked (a document's sort value is its only value).
        let (all, bounded) = walk_run(&mut r, bounds)?;
        if bounds.is_some() && !bounded && accept.is_none() {
            // The bounds are the matches: a multi-valued column cannot walk them.
            return Ok(None);
        }
        let mut seen = std::collections::HashSet::new();
        let mut found: Vec<Cand> = Vec::new();
        let mut pos_iter: Box<dyn Iterator<Item = u64>> = if f.descending {
            Box::new((all.start..all.end).rev())
        } else {
            Box::new(all.start..all.end)
        };
        // Descending walks ties in reverse document order: a group of equal
        // values is gathered whole and ordered by document.
        let mut group: Vec<Cand> = Vec::new();
        let mut group_code = None;
        let flush = |group: &mut Vec<Cand>, found: &mut Vec<Cand>| {
            group.sort_by_key(|c| c.doc);
            found.append(group);
        };
        for pos in pos_iter.by_ref() {
            let code = r.point_code(pos)?;
            if group_code != Some(code) {
                flush(&mut group, &mut found);
                if found.len() >= n {
                    break;
                }
                group_code = Some(code);
            }
            let local = r.point_doc(pos)?;
            let doc = p.base + local;
            if deleted.is_some_and(|d| d.contains(doc))
                || accept.is_some_and(|a| !a.contains(doc))
                || !seen.insert(local)
            {
                continue;
            }
            let part = if keyword {
                Part::Code(2 * code + 1)
            } else {
                Part::Code(code)
            };
            group.push(Cand {
                parts: vec![part],
                doc: base + doc,
                score: 0.0,
            });
        }
        flush(&mut group, &mut found);
        found.truncate(n);
        let valueless = match (accept, bounded) {
            // Every wanted document has a value within the bounds.
            (_, true) => false,
            // Some wanted document may have no value.
            (Some(_), false) => r.meta().docs_with_value < p.max_doc,
            (None, false) => (seen.len() as u64) < p.max_doc as u64,
        };
        if found.len() < n && valueless {
            // Fewer live documents with values than wanted: the missing
            // ones would follow; the general path handles them.
            return Ok(None);
        }
        let mut readers = vec![Some(r)];
        to_strings(&mut found, spec, &mut readers)?;
        out.extend(found);
    }
    Ok(Some(out))
}
