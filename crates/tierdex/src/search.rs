//! The public search entry point: [`Searcher`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::aggs::collect::{collect_segment, SegmentPass};
use crate::aggs::{Aggregations, AggsPartial};
use crate::bloom::FilterUse;
use crate::error::{Error, Result};
use std::sync::Arc;

use crate::index::{Index, OpenOptions};
use crate::query::ast;
use crate::query::boolean::Conjunction;
pub use crate::query::collector::Hit;
use crate::query::collector::{Cutoff, Deadline, TopK};
use crate::query::column::{DocSet, DocSetScorer};
use crate::query::count;
use crate::query::global::GlobalStats;
use crate::query::highlight::make_snippet;
pub use crate::query::highlight::Highlight;
pub use crate::query::limits::QueryLimits;
use crate::query::planner::{prefetch_zones, Planner};
pub use crate::query::sort::{SortBy, SortField, SortValue};
pub use crate::query::weight::Plan;
use crate::query::weight::{BoxedScorer, Build, ScoringContext, SegmentJob};
use crate::schema::{DocId, Document, Field, Schema, TERMINATED};

/// What a search returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The k best hits.
    #[default]
    TopK,
    /// The k best hits and the exact number of matches.
    TopKAndCount,
    /// Only the exact number of matches.
    Count,
}

impl std::str::FromStr for Mode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Mode> {
        match s.to_ascii_lowercase().as_str() {
            "top_k" | "topk" | "top_10" | "top_100" | "top_1000" => Ok(Mode::TopK),
            "top_k_and_count" | "top_10_count" | "top_k_count" => Ok(Mode::TopKAndCount),
            "count" => Ok(Mode::Count),
            _ => Err(Error::InvalidArgument(format!(
                "unknown mode `{s}` (expected top_k, top_k_and_count or count)"
            ))),
        }
    }
}

/// The mode and k of a benchmark-protocol mode name (`TOP_10`, `TOP_100`,
/// `TOP_1000`, `TOP_10_COUNT`, `COUNT`; see `bench/PROTOCOL.md`).
pub fn protocol_mode(name: &str) -> Option<(Mode, usize)> {
    Some(match name {
        "TOP_10" => (Mode::TopK, 10),
        "TOP_100" => (Mode::TopK, 100),
        "TOP_1000" => (Mode::TopK, 1000),
        "TOP_10_COUNT" => (Mode::TopKAndCount, 10),
        "COUNT" => (Mode::Count, 0),
        _ => return None,
    })
}

/// The answer to one query.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SearchResults {
    /// Best hits, by descending score then ascending doc number (or in the
    /// order of the request's sort).
    pub hits: Vec<Hit>,
    /// Exact number of matching documents (modes with a count).
    pub count: Option<u64>,
    /// With a sort: each hit's sort values, its document number last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<Vec<Vec<SortValue>>>,
    /// The aggregations' results, in Elasticsearch's shape (requests with
    /// [`SearchRequest::aggs`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregations: Option<serde_json::Value>,
}

/// The most hits a page may reach (`from + size`), as Elasticsearch's
/// `index.max_result_window`.
pub const MAX_RESULT_WINDOW: usize = 10_000;

/// A search with sorting and paging (the plain [`Searcher::search`] is the
/// `k` best by score).
#[derive(Debug, Clone)]
pub struct SearchRequest<'q> {
    /// The query.
    pub query: &'q ast::Query,
    /// Whether hits, a count, or both are wanted.
    pub mode: Mode,
    /// Hits on the page.
    pub size: usize,
    /// Hits skipped before the page.
    pub from: usize,
    /// The order (empty: by score, best first).
    pub sort: Vec<SortField>,
    /// Start after this hit's sort values (with a sort, or by score).
    pub search_after: Option<Vec<SortValue>>,
    /// When to stop (see [`Searcher::search_until`]).
    pub deadline: Option<std::time::Instant>,
    /// Aggregations computed over the matches, in the same pass as the
    /// hits (`None`: none).
    pub aggs: Option<&'q Aggregations>,
}

impl<'q> SearchRequest<'q> {
    /// The first `size` hits of `query` by score, with a count.
    pub fn new(query: &'q ast::Query, size: usize) -> SearchRequest<'q> {
        SearchRequest {
            query,
            mode: Mode::TopKAndCount,
            size,
            from: 0,
            sort: Vec::new(),
            search_after: None,
            deadline: None,
            aggs: None,
        }
    }
}

/// An open index, ready to answer queries from any number of threads.
pub struct Searcher {
    index: Arc<Index>,
    scoring: ScoringContext,
    /// Statistics over several indices that scores come from (a view made
    /// by [`Searcher::with_global_stats`]).
    global: Option<Arc<GlobalStats>>,
    snapshot: u64,
    phrase_filters: FilterUse,
    /// The fields unqualified query terms search.
    default_fields: Vec<Field>,
    limits: QueryLimits,
}

/// Source of [`Searcher::snapshot`] numbers: increasing over the process.
static SNAPSHOTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Searcher {
    /// Opens the index in `dir` with default options.
    pub fn open(dir: &Path) -> Result<Searcher> {
        Self::open_with(dir, OpenOptions::default())
    }

    /// Opens the index in `dir`.
    pub fn open_with(dir: &Path, options: OpenOptions) -> Result<Searcher> {
        let mut s = Self::from_index(Index::open(dir, options)?);
        s.phrase_filters = options.phrase_filters;
        Ok(s)
    }

    /// A searcher over an index already open (a writer's snapshot).
    pub fn from_index(index: Index) -> Searcher {
        let scoring = ScoringContext::new(&index);
        let snapshot = SNAPSHOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Searcher {
            default_fields: index.schema().default_fields().to_vec(),
            index: Arc::new(index),
            scoring,
            global: None,
            snapshot,
            phrase_filters: FilterUse::Auto,
            limits: QueryLimits::default(),
        }
    }

    /// The statistics of `query` summed over `searchers` (one per index).
    pub fn gather_global_stats(searchers: &[&Searcher], query: &ast::Query) -> Result<GlobalStats> {
        let mut g = GlobalStats::default();
        for s in searchers {
            g.merge(&s.global_stats(query)?);
        }
        Ok(g)
    }

    /// This index's part of the statistics of `query` over several indices
    /// (see [`crate::query::global`]): each field's counts, and the
    /// document frequency of every term planning looks up, also in clauses
    /// that match nothing here (a required term this index lacks empties
    /// its plan, but the other indices still score the other terms).
    pub fn global_stats(&self, query: &ast::Query) -> Result<GlobalStats> {
        let schema = self.index.schema();
        let mut g = GlobalStats::default();
        for f in schema.fields() {
            g.add_field(schema.name(f), self.index.field_stats(f));
        }
        let seen = std::cell::RefCell::new(Vec::new());
        self.planner(None).recording(&seen).plan(query)?;
        for (field, term, df) in seen.into_inner() {
            g.set_term(schema.name(field), term, df);
        }
        Ok(g)
    }

    /// A view of the same snapshot that scores with `global`, statistics
    /// over several indices (see [`crate::query::global`]); the result
    /// cache must not mix its answers with this searcher's own.
    pub fn with_global_stats(&self, global: Arc<GlobalStats>) -> Searcher {
        Searcher {
            index: self.index.clone(),
            scoring: self.scoring.with_global(&self.index, &global),
            global: Some(global),
            snapshot: self.snapshot,
            phrase_filters: self.phrase_filters,
            default_fields: self.default_fields.clone(),
            limits: self.limits,
        }
    }

    /// The index's schema.
    pub fn schema(&self) -> &Schema {
        self.index.schema()
    }

    /// Makes unqualified query terms search the fields named `names`
    /// instead of the schema's default fields.
    pub fn set_default_fields<S: AsRef<str>>(&mut self, names: &[S]) -> Result<()> {
        self.default_fields = self.index.schema().resolve(names)?;
        // Results computed before answered another question.
        self.snapshot = SNAPSHOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// The fields unqualified query terms search.
    pub fn default_fields(&self) -> &[Field] {
        &self.default_fields
    }

    /// Parses `query` against the index's fields, within the query limits.
    pub fn parse(&self, query: &str) -> Result<ast::Query> {
        Ok(crate::query::parser::parse_limited(
            query,
            self.index.schema(),
            &self.limits,
        )?)
    }

    /// Sets the size limits of the queries this searcher parses and plans
    /// ([`QueryLimits::default`] until then); refuses limits that cannot
    /// be honoured ([`QueryLimits::validate`]).
    pub fn set_query_limits(&mut self, limits: QueryLimits) -> Result<()> {
        limits.validate()?;
        self.limits = limits;
        Ok(())
    }

    /// The size limits of the queries this searcher parses and plans.
    pub fn query_limits(&self) -> &QueryLimits {
        &self.limits
    }

    /// Sets when phrase queries test their Bloom filters (indexes built
    /// with them; [`FilterUse::Auto`] by default).
    pub fn set_phrase_filters(&mut self, using: FilterUse) {
        self.phrase_filters = using;
    }

    /// This view of the index: a number unique in the process, larger for
    /// searchers opened later. Results computed on one snapshot are valid
    /// only for it (the result cache is keyed by it).
    pub fn snapshot(&self) -> u64 {
        self.snapshot
    }

    /// Acknowledged batches that were only in the write-ahead log when the
    /// index was opened, and that this searcher does not see (see
    /// [`Index::unapplied_log_records`]).
    pub fn unapplied_log_records(&self) -> u64 {
        self.index.unapplied_log_records()
    }

    /// The underlying index.
    pub fn index(&self) -> &Index {
        &self.index
    }

    /// Parses and runs `query`.
    pub fn search(&self, query: &str, mode: Mode, k: usize) -> Result<SearchResults> {
        let q = self.parse(query)?;
        self.search_parsed(&q, mode, k)
    }

    /// Plans a parsed query against this index (refusing queries over the
    /// query limits with [`Error::InvalidArgument`]).
    pub fn plan(&self, query: &ast::Query) -> Result<Plan> {
        self.planner(None).plan(query)
    }

    /// A planner with this searcher's default fields and query limits,
    /// stopping at `cutoff`.
    pub(crate) fn planner(&self, cutoff: Option<Cutoff>) -> Planner<'_> {
        Planner::with_default_fields(&self.index, &self.default_fields)
            .with_limits(self.limits)
            .with_cutoff(cutoff)
            .with_global(self.global.as_deref())
    }

    /// Runs an already parsed query.
    pub fn search_parsed(&self, query: &ast::Query, mode: Mode, k: usize) -> Result<SearchResults> {
        self.search_until(query, mode, k, None)
    }

    /// Runs an already parsed query, stopping with [`Error::TimedOut`] once
    /// `deadline` has passed: checked before each term lookup of planning,
    /// before opening each cursor and each term of a bitset count, between
    /// segments and every 1,024 documents.
    pub fn search_until(
        &self,
        query: &ast::Query,
        mode: Mode,
        k: usize,
        deadline: Option<std::time::Instant>,
    ) -> Result<SearchResults> {
        let started = std::time::Instant::now();
        let plan = self.planner(Cutoff::new(deadline, started)).plan(query)?;
        self.execute_from(&plan, mode, k, deadline, started)
    }

    /// Runs a search with sorting and paging: `from + size` may reach
    /// [`MAX_RESULT_WINDOW`]; beyond, page with `search_after`. With
    /// [`SearchRequest::aggs`], every match is visited once for the hits,
    /// the exact count and the aggregations ([`SearchResults::aggregations`]);
    /// `Mode::Count` or `size` 0 computes no score unless a `top_hits`
    /// orders by score.
    pub fn search_request(&self, req: &SearchRequest<'_>) -> Result<SearchResults> {
        let window = req.from.saturating_add(req.size);
        if window > MAX_RESULT_WINDOW {
            return Err(Error::InvalidArgument(format!(
                "from + size is {window}, over the result window of {MAX_RESULT_WINDOW}: page deeper with search_after"
            )));
        }
        if let Some(aggs) = req.aggs.filter(|a| !a.is_empty()) {
            return self.search_with_aggs(req, aggs);
        }
        let started = std::time::Instant::now();
        let plan = self.planner(Cutoff::new(req.deadline, started)).plan(req.query)?;
        let by_score = req.sort.is_empty() || req.sort == [SortField::desc(SortBy::Score)];
        if req.mode == Mode::Count || (by_score && req.search_after.is_none()) {
            let mut r = self.execute_from(&plan, req.mode, window, req.deadline, started)?;
            r.hits.drain(..req.from.min(r.hits.len()));
            if !req.sort.is_empty() && req.mode != Mode::Count {
                r.sort = Some(
                    r.hits
                        .iter()
                        .map(|h| vec![SortValue::Double(h.score as f64), SortValue::Long(h.doc as i64)])
                        .collect(),
                );
            }
            return Ok(r);
        }
        let sort = if req.sort.is_empty() {
            vec![SortField::desc(SortBy::Score)]
        } else {
            req.sort.clone()
        };
        let mut clock = Deadline::new(req.deadline);
        let mut total = 0u64;
        let want_count = req.mode == Mode::TopKAndCount;
        let page = crate::query::sort::search(
            &self.index,
            &self.scoring,
            &plan,
            &sort,
            req.from,
            req.size,
            req.search_after.as_deref(),
            want_count.then_some(&mut total),
            &mut clock,
            (self.phrase_filters, Cutoff::new(req.deadline, started)),
        )?
        .ok_or_else(|| Error::TimedOut(started.elapsed().as_millis() as u64))?;
        Ok(SearchResults {
            hits: page.hits.iter().map(|&(doc, score)| Hit { doc, score }).collect(),
            count: want_count.then_some(total),
            sort: Some(page.values),
            aggregations: None,
        })
    }

    /// Runs a plan.
    pub fn execute(&self, plan: &Plan, mode: Mode, k: usize) -> Result<SearchResults> {
        self.execute_until(plan, mode, k, None)
    }

    /// Runs a plan until `deadline` (see [`Searcher::search_until`]).
    pub fn execute_until(
        &self,
        plan: &Plan,
        mode: Mode,
        k: usize,
        deadline: Option<std::time::Instant>,
    ) -> Result<SearchResults> {
        self.execute_from(plan, mode, k, deadline, std::time::Instant::now())
    }

    /// [`Searcher::execute_until`] of a query that started at `started`.
    fn execute_from(
        &self,
        plan: &Plan,
        mode: Mode,
        k: usize,
        deadline: Option<std::time::Instant>,
        started: std::time::Instant,
    ) -> Result<SearchResults> {
        let cutoff = Cutoff::new(deadline, started);
        let mut clock = Deadline::new(deadline);
        let stopped = || Error::TimedOut(started.elapsed().as_millis() as u64);
        let k = if mode == Mode::Count { 0 } else { k };
        let want_count = mode != Mode::TopK;
        // A count the index knows (a single term's document frequency), or
        // one taken with bitsets, leaves the top-k free to skip what cannot
        // compete.
        let known_count = match want_count {
            true => plan.known_count(&self.index)?,
            false => None,
        };
        let bitset_count =
            want_count && known_count.is_none() && count::count_with_bitsets(&**plan, self.index.num_docs());
        let mut top = TopK::new(k);
        let mut total = 0u64;
        for (i, (seg, &base)) in self.index.segments().iter().zip(self.index.bases()).enumerate() {
            if clock.passed() {
                return Err(stopped());
            }
            let deleted = self.index.deletes(i).map(|d| d.bits());
            let mut matched = None;
            if bitset_count {
                let mut m = plan.matches(seg, cutoff.as_ref())?;
                if let Some(d) = deleted {
                    m.subtract(d);
                }
                let n = m.len();
                total += n;
                matched = Some((m, n));
            }
            if k == 0 && (known_count.is_some() || bitset_count) {
                continue;
            }
            let mut build = Build::new(seg, &self.scoring);
            build.filters = self.phrase_filters;
            build.cutoff = cutoff;
            let tier = self.index.storage().options();
            if tier.prefetches() {
                build.prefetch = prefetch_zones(&**plan, seg, tier.prefetch_threshold)?;
            }
            // The count's matches, when few (against the work of iterating
            // the query, and in number: block-max skipping would otherwise
            // score fewer), lead the top-k pass: only they are scored.
            if let Some((m, n)) = matched {
                let share = seg.max_doc() as f64 / self.index.num_docs().max(1) as f64;
                if (n as f64) * 4.0 < plan.iteration_cost() * share && n <= 512 + 32 * k as u64 {
                    if n == 0 {
                        continue;
                    }
                    let Some(s) = plan.scorer(build)? else {
                        continue;
                    };
                    // The query's own conjunction keeps its block-max
                    // windows (joined by this 0-scoring lead, it would
                    // score every candidate).
                    let lead: BoxedScorer<'_> = Box::new(DocSetScorer::new(DocSet::Bits(m), 0.0));
                    let mut led = Conjunction::new(vec![lead, s]);
                    let mut job = SegmentJob {
                        base,
                        top: Some(&mut top),
                        count: None,
                        deleted,
                        deadline: &mut clock,
                    };
                    if !job.run(&mut led)? {
                        return Err(stopped());
                    }
                    continue;
                }
            }
            let counting = want_count && known_count.is_none() && !bitset_count;
            let mut job = SegmentJob {
                base,
                top: (k > 0).then_some(&mut top),
                count: counting.then_some(&mut total),
                deleted,
                deadline: &mut clock,
            };
            if !plan.collect(build, &mut job)? {
                return Err(stopped());
            }
        }
        Ok(SearchResults {
            hits: top.into_hits(),
            count: want_count.then(|| known_count.unwrap_or(total)),
            sort: None,
            aggregations: None,
        })
    }

    /// The aggregations' partial results of `query`'s matches, one per
    /// segment part with a match (what scale-out gathers and merges; see
    /// [`AggsPartial::merge`]). `top_hits` hits are resolved.
    pub fn aggregate_parts(&self, query: &ast::Query, aggs: &Aggregations) -> Result<Vec<AggsPartial>> {
        let started = std::time::Instant::now();
        let plan = self.planner(None).plan(query)?;
        let mut count = 0;
        let (parts, done) = self.aggregate_pass(&plan, aggs, None, &mut count, None, started)?;
        if !done {
            return Err(Error::TimedOut(started.elapsed().as_millis() as u64));
        }
        Ok(parts)
    }

    /// Every live document `query` matches, in document order (what a
    /// delete-by-query removes); stops with [`Error::TimedOut`] past
    /// `deadline`.
    pub fn matching_docs(&self, query: &ast::Query, deadline: Option<std::time::Instant>) -> Result<Vec<DocId>> {
        let started = std::time::Instant::now();
        let cutoff = Cutoff::new(deadline, started);
        let plan = self.planner(cutoff).plan(query)?;
        let mut out = Vec::new();
        for (i, (seg, &base)) in self.index.segments().iter().zip(self.index.bases()).enumerate() {
            crate::query::collector::check(cutoff.as_ref())?;
            let mut m = plan.matches(seg, cutoff.as_ref())?;
            if let Some(d) = self.index.deletes(i) {
                m.subtract(d.bits());
            }
            let mut d = m.next(0);
            while d != crate::schema::TERMINATED {
                out.push(base + d);
                d = m.next(d + 1);
            }
        }
        Ok(out)
    }

    /// The aggregations of `query`'s matches, merged and resolved: the
    /// intermediate a shard would send.
    pub fn aggregate(&self, query: &ast::Query, aggs: &Aggregations) -> Result<AggsPartial> {
        let mut merged = AggsPartial::empty(aggs);
        for p in self.aggregate_parts(query, aggs)? {
            merged.merge(p);
        }
        Ok(merged)
    }

    /// One pass over every segment: aggregations, the count, and the best
    /// hits by score when `top` is given. Returns the partials (resolved)
    /// and false when the deadline stopped it.
    fn aggregate_pass(
        &self,
        plan: &Plan,
        aggs: &Aggregations,
        mut top: Option<&mut TopK>,
        count: &mut u64,
        deadline: Option<std::time::Instant>,
        started: std::time::Instant,
    ) -> Result<(Vec<AggsPartial>, bool)> {
        let cutoff = Cutoff::new(deadline, started);
        let mut clock = Deadline::new(deadline);
        let filters = aggs
            .filter_queries()
            .iter()
            .map(|q| self.planner(cutoff).plan(q))
            .collect::<Result<Vec<_>>>()?;
        let scores = top.is_some() || aggs.needs_scores();
        let mut parts = Vec::new();
        for (i, (seg, &base)) in self.index.segments().iter().zip(self.index.bases()).enumerate() {
            if clock.passed() {
                return Ok((parts, false));
            }
            let mut build = Build::new(seg, &self.scoring);
            build.filters = self.phrase_filters;
            build.cutoff = cutoff;
            let tier = self.index.storage().options();
            if tier.prefetches() {
                build.prefetch = prefetch_zones(&**plan, seg, tier.prefetch_threshold)?;
            }
            let job = SegmentPass {
                base,
                deleted: self.index.deletes(i).map(|d| d.bits()),
                top: top.as_deref_mut(),
                count,
                scores,
                deadline: &mut clock,
            };
            if !collect_segment(seg, build, plan, &filters, aggs, job, &mut parts)? {
                return Ok((parts, false));
            }
        }
        for p in &mut parts {
            p.resolve(aggs, &mut |d| self.doc(d))?;
        }
        Ok((parts, true))
    }

    /// [`Searcher::search_request`] with aggregations: the hits by score,
    /// the count and the aggregations in one pass over the matches (a page
    /// sorted by fields, or after `search_after`, is found by the sorted
    /// search, and the aggregations by a pass of their own).
    fn search_with_aggs(&self, req: &SearchRequest<'_>, aggs: &Aggregations) -> Result<SearchResults> {
        let started = std::time::Instant::now();
        let plan = self.planner(Cutoff::new(req.deadline, started)).plan(req.query)?;
        let by_score = req.sort.is_empty() || req.sort == [SortField::desc(SortBy::Score)];
        let window = req.from.saturating_add(req.size);
        let one_pass = req.mode == Mode::Count || (by_score && req.search_after.is_none());
        let mut results = if one_pass {
            SearchResults::default()
        } else {
            self.search_request(&SearchRequest {
                aggs: None,
                ..req.clone()
            })?
        };
        let mut top = (one_pass && req.mode != Mode::Count && window > 0).then(|| TopK::new(window));
        let mut count = 0u64;
        let (parts, done) = self.aggregate_pass(&plan, aggs, top.as_mut(), &mut count, req.deadline, started)?;
        if !done {
            return Err(Error::TimedOut(started.elapsed().as_millis() as u64));
        }
        let mut merged = AggsPartial::empty(aggs);
        for p in parts {
            merged.merge(p);
        }
        if one_pass {
            let mut hits = top.map(TopK::into_hits).unwrap_or_default();
            hits.drain(..req.from.min(hits.len()));
            if !req.sort.is_empty() && req.mode != Mode::Count {
                results.sort = Some(
                    hits.iter()
                        .map(|h| vec![SortValue::Double(h.score as f64), SortValue::Long(h.doc as i64)])
                        .collect(),
                );
            }
            results.hits = hits;
            results.count = (req.mode != Mode::TopK).then_some(count);
        }
        results.aggregations = Some(crate::aggs::finalize(aggs, &merged)?);
        Ok(results)
    }

    /// The stored document `doc` (a number from [`Hit::doc`]).
    pub fn doc(&self, doc: DocId) -> Result<Document> {
        let (seg, local) = self.locate(doc)?;
        self.index.segments()[seg].document(local)
    }

    /// The live document with external id `id` (its `_source`), if any.
    pub fn get(&self, id: &str) -> Result<Option<Document>> {
        match self.index.find_id(id)? {
            Some(doc) => self.doc(doc).map(Some),
            None => Ok(None),
        }
    }

    /// The external id of document `doc` (without reading the stored document).
    pub fn doc_id(&self, doc: DocId) -> Result<String> {
        let (seg, local) = self.locate(doc)?;
        let mut id = String::new();
        self.index.segments()[seg].external_id(local, &mut id)?;
        Ok(id)
    }

    fn locate(&self, doc: DocId) -> Result<(usize, DocId)> {
        self.index.locate(doc).ok_or_else(|| {
            Error::NotFound(format!(
                "document {doc} does not exist (the index holds {})",
                self.index.num_docs()
            ))
        })
    }

    /// A snippet of about `max_bytes` of every stored field of `doc` (the
    /// whole text of fields shorter than that), marking the positive terms
    /// of `plan` from their stored offsets.
    pub fn highlight(&self, plan: &Plan, doc: DocId, max_bytes: usize) -> Result<Highlight> {
        let (si, local) = self.locate(doc)?;
        let seg = &self.index.segments()[si];
        let stored = seg.document(local)?;
        let mut terms = Vec::new();
        plan.terms(true, &mut terms);
        let schema = self.index.schema();
        let mut marks: Vec<Vec<(u32, u32)>> = vec![Vec::new(); schema.len()];
        let mut offsets = Vec::new();
        for t in terms {
            let Some(info) = seg.term_info(&t.key)? else {
                continue;
            };
            let mut c = seg.cursor(&info)?;
            if c.seek(local) == local {
                c.offsets(&mut offsets);
                if let Some(m) = marks.get_mut(t.field.index()) {
                    m.extend_from_slice(&offsets);
                }
            }
            if let Some(e) = c.take_error() {
                return Err(e);
            }
        }
        Ok(Highlight {
            fields: schema
                .fields()
                .filter(|&f| schema.stored(f))
                .map(|f| {
                    let entry = &schema.entries()[f.index()];
                    let text = crate::schema::field_text(entry, &stored);
                    (entry.name.clone(), make_snippet(&text, &marks[f.index()], max_bytes))
                })
                .collect(),
        })
    }

    /// Number of live (not deleted) documents in the index.
    pub fn num_docs(&self) -> u64 {
        self.index.live_docs()
    }
}

const _: () = assert!(TERMINATED == u32::MAX);
