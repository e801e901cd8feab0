//! `query`: answers `MODE<TAB>QUERY` lines from stdin with one JSON line
//! each, in input order.

use std::collections::HashMap;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{ensure, Context, Result};
use serde::Serialize;
use tantivy::collector::sort_key::{ComparatorEnum, SortByErasedType};
use tantivy::aggregation::AggregationCollector;
use tantivy::collector::{Count, TopDocs};
use tantivy::directory::MmapDirectory;
use tantivy::query::{Query, QueryParser};
use tantivy::schema::{Field, OwnedValue, Value};
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Score, Searcher, TantivyDocument};

use crate::aggs;
use crate::schema::{self, TypedFields};
use crate::structured::{self, SortBy, SortKey};

/// What a line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The top n hits, no count.
    Top(usize),
    /// The top 10 hits and the exact count.
    TopCount,
    /// The exact count only.
    Count,
}

impl Mode {
    fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "TOP_10" => Mode::Top(10),
            "TOP_100" => Mode::Top(100),
            "TOP_1000" => Mode::Top(1000),
            "TOP_10_COUNT" => Mode::TopCount,
            "COUNT" => Mode::Count,
            _ => return None,
        })
    }
}

#[derive(Serialize)]
struct Hit {
    id: String,
    /// `null` for a field sort (scores are not computed for it).
    score: Option<f32>,
    /// The sort values, with a sort.
    #[serde(skip_serializing_if = "Option::is_none")]
    sort: Option<Vec<serde_json::Value>>,
}

#[derive(Serialize)]
struct Answer {
    count: Option<u64>,
    hits: Vec<Hit>,
    elapsed_us: u64,
    /// The request's `aggs`, in Elasticsearch's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    aggregations: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct ErrorAnswer {
    error: String,
    elapsed_us: u64,
}

/// An opened index, shared by the worker threads.
struct Engine {
    searcher: Searcher,
    parser: QueryParser,
    id: Field,
    typed: Option<TypedFields>,
    /// The smallest and largest `date` of the index (monthly histograms' ranges).
    dates: Option<(i64, i64)>,
}

/// Hits in sort order with their sort values.
type SortedHits = Vec<(Vec<OwnedValue>, DocAddress)>;

/// Hits with their score (unsorted queries) or sort values (sorted ones).
type Hits = Vec<(Option<Score>, Option<Vec<OwnedValue>>, DocAddress)>;

/// The sort key computer of a key. Missing values sort last both ways:
/// `None` is the lowest value for `Natural` (descending) and for
/// `ReverseNoneLower` (ascending).
fn sort_key(k: &SortKey) -> (SortByErasedType, ComparatorEnum) {
    let by = match &k.by {
        SortBy::Score => SortByErasedType::for_score(),
        SortBy::Field(f) => SortByErasedType::for_field(f),
    };
    let comparator = if k.desc {
        ComparatorEnum::Natural
    } else {
        ComparatorEnum::ReverseNoneLower
    };
    (by, comparator)
}

/// A sort value as JSON: dates as epoch milliseconds, missing as null.
fn sort_json(v: OwnedValue) -> serde_json::Value {
    match v {
        OwnedValue::Null => serde_json::Value::Null,
        OwnedValue::Str(s) => serde_json::Value::String(s),
        OwnedValue::I64(i) => i.into(),
        OwnedValue::U64(u) => u.into(),
        OwnedValue::F64(f) => f.into(),
        OwnedValue::Bool(b) => b.into(),
        OwnedValue::Date(d) => d.into_timestamp_millis().into(),
        other => serde_json::Value::String(format!("{other:?}")),
    }
}

impl Engine {
    fn open(dir: &Path) -> Result<(Engine, IndexReader)> {
        let meta = std::fs::metadata(dir).with_context(|| format!("cannot open index directory {}", dir.display()))?;
        ensure!(meta.is_dir(), "index path {} is not a directory", dir.display());
        ensure!(
            dir.join("meta.json").is_file(),
            "{} is not a tantivy index (no meta.json): build it with `index` first",
            dir.display()
        );
        let directory =
            MmapDirectory::open(dir).with_context(|| format!("cannot open index directory {}", dir.display()))?;
        let index = Index::open(directory).with_context(|| format!("cannot open the index in {}", dir.display()))?;
        schema::register_tokenizer(&index);
        let fields = schema::fields_of(&index)?;
        // No reloading, no query cache (tantivy has none): one searcher on
        // the index as committed.
        let reader: IndexReader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .context("cannot open an index reader")?;
        let searcher = reader.searcher();
        let dates = match fields.typed {
            Some(_) => aggs::date_bounds(&searcher, "date").context("reading the date column's bounds")?,
            None => None,
        };
        // Unqualified terms go to title and body (a SHOULD clause per field,
        // scores summed); the default operator is OR.
        let parser = QueryParser::for_index(&index, vec![fields.title, fields.body]);
        Ok((
            Engine {
                searcher,
                parser,
                id: fields.id,
                typed: fields.typed,
                dates,
            },
            reader,
        ))
    }

    /// The first hits of `query` in the order of `keys` (1 to 3 keys), and
    /// the count for `TOP_10_COUNT`.
    fn sorted(&self, query: &dyn Query, keys: &[SortKey], mode: Mode) -> Result<(Option<u64>, SortedHits), String> {
        let n = match mode {
            Mode::Top(n) => n,
            _ => 10,
        };
        let search_error = |e: tantivy::TantivyError| format!("search error: {e}");
        macro_rules! run {
            ($computer:expr, $flatten:expr) => {{
                let top = TopDocs::with_limit(n).order_by($computer);
                let (count, hits) = if mode == Mode::TopCount {
                    let (hits, count) = self.searcher.search(query, &(top, Count)).map_err(search_error)?;
                    (Some(count as u64), hits)
                } else {
                    (None, self.searcher.search(query, &top).map_err(search_error)?)
                };
                (count, hits.into_iter().map(|(k, a)| ($flatten(k), a)).collect())
            }};
        }
        Ok(match keys {
            [a] => run!(sort_key(a), |k| vec![k]),
            [a, b] => run!((sort_key(a), sort_key(b)), |(x, y)| vec![x, y]),
            [a, b, c] => run!((sort_key(a), sort_key(b), sort_key(c)), |(x, y, z)| vec![x, y, z]),
            _ => return Err(format!("{} sort keys: 1 to 3 are supported", keys.len())),
        })
    }

    /// The JSON answer (without newline) to one input line.
    /// A query that makes tantivy panic is answered with an error (the
    /// panic message also goes to stderr) and the stream goes on.
    fn answer(&self, line: &[u8]) -> String {
        let result =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.evaluate(line))).unwrap_or_else(|panic| {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_string());
                Err(format!("engine panicked: {message}"))
            });
        match result {
            Ok(answer) => serde_json::to_string(&answer),
            Err(error) => serde_json::to_string(&ErrorAnswer { error, elapsed_us: 0 }),
        }
        .expect("JSON serialisation of an answer")
    }

    fn evaluate(&self, line: &[u8]) -> Result<Answer, String> {
        let line = std::str::from_utf8(line).map_err(|e| format!("input line is not UTF-8: {e}"))?;
        let (mode, text) = line
            .split_once('\t')
            .ok_or_else(|| "expected MODE<TAB>QUERY".to_string())?;
        let mode = Mode::parse(mode).ok_or_else(|| {
            format!("unknown mode {mode:?} (expected TOP_10, TOP_100, TOP_1000, TOP_10_COUNT or COUNT)")
        })?;

        // Timed: parsing and searching.
        let start = Instant::now();
        let (query, sort, aggs): (Box<dyn Query>, Vec<SortKey>, Option<serde_json::Value>) =
            if structured::is_json(text) {
                let r = structured::parse(text, &self.parser, self.typed.as_ref())
                    .map_err(|e| format!("bad query: {e}"))?;
                (r.query, r.sort, r.aggs)
            } else {
                let q = self
                    .parser
                    .parse_query(text)
                    .map_err(|e| format!("query parse error: {e}"))?;
                (q, Vec::new(), None)
            };
        let search_error = |e: tantivy::TantivyError| format!("search error: {e}");
        if let Some(aggs) = aggs {
            if !sort.is_empty() {
                return Err("bad query: `aggs` with a `sort` is not supported".into());
            }
            let request =
                aggs::parse(&aggs, self.typed.as_ref(), self.dates).map_err(|e| format!("bad query: {e}"))?;
            let collector = AggregationCollector::from_aggs(request.tantivy.clone(), Default::default());
            let (count, top, result) = match mode {
                Mode::Count => {
                    let (count, r) = self.searcher.search(&*query, &(Count, collector)).map_err(search_error)?;
                    (Some(count as u64), Vec::new(), r)
                }
                Mode::Top(n) => {
                    let (top, r) = self
                        .searcher
                        .search(&*query, &(TopDocs::with_limit(n).order_by_score(), collector))
                        .map_err(search_error)?;
                    (None, top, r)
                }
                Mode::TopCount => {
                    let (top, count, r) = self
                        .searcher
                        .search(&*query, &(TopDocs::with_limit(10).order_by_score(), Count, collector))
                        .map_err(search_error)?;
                    (Some(count as u64), top, r)
                }
            };
            let aggregations = request.answer(&result)?;
            let elapsed_us = start.elapsed().as_micros() as u64;
            let hits = top.into_iter().map(|(s, a)| (Some(s), None, a)).collect();
            return self.finish(count, hits, elapsed_us, Some(aggregations));
        }
        let (count, top): (Option<u64>, Hits) = match mode {
            Mode::Count => {
                let count = self.searcher.search(&*query, &Count).map_err(search_error)?;
                (Some(count as u64), Vec::new())
            }
            _ if !sort.is_empty() => {
                let (count, hits) = self.sorted(&*query, &sort, mode)?;
                (count, hits.into_iter().map(|(k, a)| (None, Some(k), a)).collect())
            }
            Mode::Top(n) => {
                let top = self
                    .searcher
                    .search(&*query, &TopDocs::with_limit(n).order_by_score())
                    .map_err(search_error)?;
                (None, top.into_iter().map(|(s, a)| (Some(s), None, a)).collect())
            }
            Mode::TopCount => {
                let (top, count) = self
                    .searcher
                    .search(&*query, &(TopDocs::with_limit(10).order_by_score(), Count))
                    .map_err(search_error)?;
                (
                    Some(count as u64),
                    top.into_iter().map(|(s, a)| (Some(s), None, a)).collect(),
                )
            }
        };
        let elapsed_us = start.elapsed().as_micros() as u64;
        self.finish(count, top, elapsed_us, None)
    }

    /// The answer, with the stored ids of the hits (not timed).
    fn finish(
        &self,
        count: Option<u64>,
        top: Hits,
        elapsed_us: u64,
        aggregations: Option<serde_json::Value>,
    ) -> Result<Answer, String> {
        let mut hits = Vec::with_capacity(top.len());
        for (score, sort, address) in top {
            let doc: TantivyDocument = self
                .searcher
                .doc(address)
                .map_err(|e| format!("cannot read stored document {address:?}: {e}"))?;
            let id = doc
                .get_first(self.id)
                .and_then(|v| v.as_str())
                .ok_or_else(|| format!("stored document {address:?} has no id"))?
                .to_owned();
            let sort = sort.map(|values| values.into_iter().map(sort_json).collect());
            hits.push(Hit { id, score, sort });
        }
        Ok(Answer {
            count,
            hits,
            elapsed_us,
            aggregations,
        })
    }
}

/// Reads one line without its `\n` (or `\r\n`); false at end of input.
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> io::Result<bool> {
    buf.clear();
    if input.read_until(b'\n', buf)? == 0 {
        return Ok(false);
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    Ok(true)
}

pub fn run(dir: &Path, threads: usize) -> Result<()> {
    ensure!(threads >= 1, "--threads must be at least 1");
    let (engine, _reader) = Engine::open(dir)?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());

    if threads == 1 {
        let mut input = io::stdin().lock();
        let mut line = Vec::new();
        while read_line(&mut input, &mut line).context("cannot read stdin")? {
            let answer = engine.answer(&line);
            out.write_all(answer.as_bytes())?;
            out.write_all(b"\n")?;
            out.flush().context("cannot write stdout")?;
        }
        return Ok(());
    }

    // A reader thread numbers the lines, N workers take them from a shared
    // queue, and this thread writes their answers back in input order.
    let (line_tx, line_rx) = mpsc::sync_channel::<(u64, Vec<u8>)>(threads * 4);
    // Shared by the workers only: when they are all gone, sending fails
    // instead of blocking.
    let line_rx = Arc::new(Mutex::new(line_rx));
    let (answer_tx, answer_rx) = mpsc::channel::<(u64, String)>();
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..threads {
            let answer_tx = answer_tx.clone();
            let line_rx = Arc::clone(&line_rx);
            let engine = &engine;
            scope.spawn(move || loop {
                let next = line_rx.lock().expect("line queue lock").recv();
                let Ok((seq, line)) = next else { break };
                if answer_tx.send((seq, engine.answer(&line))).is_err() {
                    break;
                }
            });
        }
        drop(answer_tx);
        drop(line_rx);

        let reader = scope.spawn(move || -> io::Result<()> {
            let mut input = io::stdin().lock();
            let mut seq = 0u64;
            loop {
                let mut line = Vec::new();
                if !read_line(&mut input, &mut line)? {
                    return Ok(());
                }
                if line_tx.send((seq, line)).is_err() {
                    return Ok(()); // workers gone: the writer failed
                }
                seq += 1;
            }
        });

        let write_result = (|| -> io::Result<()> {
            let mut pending: HashMap<u64, String> = HashMap::new();
            let mut next = 0u64;
            loop {
                let (seq, answer) = match answer_rx.try_recv() {
                    Ok(message) => message,
                    Err(mpsc::TryRecvError::Empty) => {
                        // Nothing ready: let the reader see what we have.
                        out.flush()?;
                        match answer_rx.recv() {
                            Ok(message) => message,
                            Err(_) => break,
                        }
                    }
                    Err(mpsc::TryRecvError::Disconnected) => break,
                };
                pending.insert(seq, answer);
                while let Some(answer) = pending.remove(&next) {
                    out.write_all(answer.as_bytes())?;
                    out.write_all(b"\n")?;
                    next += 1;
                }
            }
            debug_assert!(pending.is_empty());
            out.flush()
        })();
        // On a write error, dropping the receiver stops the workers, whose
        // exit stops the reader (unless it is blocked on stdin: then the
        // process exits when the input ends).
        drop(answer_rx);
        write_result.context("cannot write stdout")?;
        reader
            .join()
            .expect("reader thread panicked")
            .context("cannot read stdin")?;
        Ok(())
    })
}
