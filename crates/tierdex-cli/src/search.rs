//! `tierdex search`: run queries against an index.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tierdex::query::parser::render_error;
use tierdex::search::{Mode, Searcher};
use tierdex::Error;

use crate::existing_dir;

/// What to compute for each query.
#[derive(Clone, Copy, clap::ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum ModeArg {
    /// The k best hits.
    TopK,
    /// The k best hits and the exact match count.
    TopKAndCount,
    /// Only the exact match count.
    Count,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::TopK => Mode::TopK,
            ModeArg::TopKAndCount => Mode::TopKAndCount,
            ModeArg::Count => Mode::Count,
        }
    }
}

/// Options of `tierdex search`.
#[derive(clap::Args)]
#[command(
    after_help = "QUERY SYNTAX:\n  a b          either term (ranked by BM25)\n  +a +b        both terms\n  \"a b c\"      exact phrase\n  a -b         a but not b\n  title:a      a in the field `title` only (any field of the index)\n  +(a b) -c    groups\nUnqualified terms search the index's default fields (title and body in the\ndefault schema; see `tierdex inspect`), or those of --default-fields.\n  price:[10 TO 20]  tags:red  date:>=2020-01-01  _exists_:tags  *:*\n               typed fields: exact values, ranges, existence, everything\nA hit shows its first field as a heading and a snippet of the others."
)]
pub struct Args {
    /// Index directory.
    #[arg(value_parser = existing_dir)]
    dir: PathBuf,
    /// Queries; `-` reads one query per line from stdin.
    #[arg(required = true)]
    queries: Vec<String>,
    /// Number of hits.
    #[arg(short, long, default_value_t = 10)]
    k: usize,
    /// What to compute.
    #[arg(long, value_enum, default_value = "top_k")]
    mode: ModeArg,
    /// Show a highlighted snippet of each hit.
    #[arg(long)]
    highlight: bool,
    /// Snippet length in bytes.
    #[arg(long, default_value_t = 200)]
    snippet_bytes: usize,
    /// One JSON object per query on stdout.
    #[arg(long)]
    json: bool,
    /// Fields unqualified query terms search (default: the index's
    /// default fields).
    #[arg(long, value_delimiter = ',')]
    default_fields: Vec<String>,
    #[command(flatten)]
    tier: crate::tier::TierArgs,
    /// Report each query's I/O: bytes requested from the tier, bytes
    /// decoded, read operations, device bytes.
    #[arg(long)]
    io_stats: bool,
    /// Order the hits by these keys instead of by score: `FIELD` (ascending),
    /// `FIELD:desc`, `_score`, `_doc`; keyword, number, date and boolean
    /// fields; documents without a value last. Comma-separated or repeated.
    #[arg(long, value_delimiter = ',')]
    sort: Vec<String>,
    /// Hits skipped before the ones shown (from + k at most 10,000).
    #[arg(long, default_value_t = 0)]
    from: usize,
    /// Show each hit's stored document (`_source`) as JSON.
    #[arg(long)]
    source: bool,
    /// An aggregation over the matches, `FIELD:TYPE[:PARAM]`: `tags:terms`
    /// (`:SIZE`, default 10), `date:date_histogram` (`:month` by default;
    /// `minute` .. `year`, `1M`, or a fixed `12h`, `30d`), `price:histogram:10`,
    /// `price:stats`, `min`, `max`, `avg`, `sum`, `value_count`,
    /// `cardinality`. Repeatable; named by the spec itself.
    #[arg(long = "agg")]
    aggs: Vec<String>,
    /// Aggregations in Elasticsearch's form (the body of `"aggs"`), e.g.
    /// '{"by_tag": {"terms": {"field": "tags"}, "aggs": {...}}}'.
    #[arg(long)]
    aggs_json: Option<String>,
}

/// The `"aggs"` object of the short `--agg FIELD:TYPE[:PARAM]` specs.
fn short_aggs(specs: &[String]) -> Result<serde_json::Map<String, serde_json::Value>, Error> {
    use serde_json::json;
    let bad = |m: String| Error::InvalidArgument(m);
    let mut out = serde_json::Map::new();
    for spec in specs {
        let mut it = spec.splitn(3, ':');
        let (field, ty, param) = (it.next().unwrap_or(""), it.next(), it.next());
        let Some(ty) = ty.filter(|_| !field.is_empty()) else {
            return Err(bad(format!(
                "--agg `{spec}`: expected FIELD:TYPE[:PARAM], e.g. tags:terms"
            )));
        };
        let body = match (ty, param) {
            ("terms", None) => json!({"terms": {"field": field}}),
            ("terms", Some(n)) => {
                let size: u64 = n
                    .parse()
                    .map_err(|_| bad(format!("--agg `{spec}`: the terms size `{n}` is not a number")))?;
                json!({"terms": {"field": field, "size": size}})
            }
            ("date_histogram", p) => {
                let p = p.unwrap_or("month");
                if tierdex::aggs::calendar::CalendarUnit::parse(p).is_some() {
                    json!({"date_histogram": {"field": field, "calendar_interval": p}})
                } else {
                    json!({"date_histogram": {"field": field, "fixed_interval": p}})
                }
            }
            ("histogram", Some(iv)) => {
                let iv: f64 = iv
                    .parse()
                    .map_err(|_| bad(format!("--agg `{spec}`: the interval `{iv}` is not a number")))?;
                json!({"histogram": {"field": field, "interval": iv, "min_doc_count": 1}})
            }
            ("histogram", None) => return Err(bad(format!("--agg `{spec}`: a histogram needs an interval, e.g. {field}:histogram:10"))),
            ("stats" | "min" | "max" | "avg" | "sum" | "value_count" | "cardinality", None) => json!({ ty: {"field": field} }),
            (t, Some(p)) if ["stats", "min", "max", "avg", "sum", "value_count", "cardinality"].contains(&t) => {
                return Err(bad(format!("--agg `{spec}`: [{t}] takes no parameter (`{p}`)")))
            }
            (t, _) => {
                return Err(bad(format!(
                    "--agg `{spec}`: unknown or unsupported short aggregation type [{t}] (terms, date_histogram, histogram, stats, min, max, avg, sum, value_count, cardinality; others through --aggs-json)"
                )))
            }
        };
        out.insert(spec.clone(), body);
    }
    Ok(out)
}

/// The aggregations `--agg` and `--aggs-json` ask for, if any.
fn aggs_of(s: &Searcher, a: &Args) -> Result<Option<tierdex::aggs::Aggregations>, Error> {
    let mut all = short_aggs(&a.aggs)?;
    if let Some(j) = &a.aggs_json {
        let v: serde_json::Value =
            serde_json::from_str(j).map_err(|e| Error::InvalidArgument(format!("--aggs-json is not JSON: {e}")))?;
        let serde_json::Value::Object(m) = v else {
            return Err(Error::InvalidArgument(
                "--aggs-json must be an object of named aggregations".into(),
            ));
        };
        for (k, v) in m {
            if all.insert(k.clone(), v).is_some() {
                return Err(Error::InvalidArgument(format!("aggregation [{k}] is named twice")));
            }
        }
    }
    if all.is_empty() {
        return Ok(None);
    }
    tierdex::aggs::Aggregations::parse(s.schema(), s.query_limits(), &serde_json::Value::Object(all)).map(Some)
}

/// Prints aggregation results (`{"name": result, ...}`) as an indented
/// table: buckets as `key  doc_count` lines with their sub-aggregations
/// below, metrics as `name: value`.
fn print_aggs(out: &mut impl Write, v: &serde_json::Value, depth: usize) -> std::io::Result<()> {
    use serde_json::Value;
    let pad = "  ".repeat(depth);
    let Value::Object(m) = v else { return Ok(()) };
    let show = |x: &Value| match x {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    };
    for (name, r) in m {
        let Value::Object(o) = r else { continue };
        if let Some(buckets) = o.get("buckets") {
            let other = o.get("sum_other_doc_count").and_then(Value::as_u64).filter(|&n| n > 0);
            writeln!(out, "{pad}{name}:")?;
            let list: Vec<(String, &Value)> = match buckets {
                Value::Array(a) => a
                    .iter()
                    .map(|b| {
                        let key = b
                            .get("key_as_string")
                            .or_else(|| b.get("key"))
                            .map_or(String::new(), show);
                        (key, b)
                    })
                    .collect(),
                Value::Object(named) => named.iter().map(|(k, b)| (k.clone(), b)).collect(),
                _ => Vec::new(),
            };
            let width = list.iter().map(|(k, _)| k.chars().count()).max().unwrap_or(0).min(48);
            for (key, b) in list {
                writeln!(out, "{pad}  {key:<width$}  {:>8}", b["doc_count"].as_u64().unwrap_or(0))?;
                let subs: serde_json::Map<String, Value> = b
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| {
                        !matches!(
                            k.as_str(),
                            "key" | "key_as_string" | "doc_count" | "from" | "to" | "from_as_string" | "to_as_string"
                        )
                    })
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                print_aggs(out, &Value::Object(subs), depth + 2)?;
            }
            if let Some(n) = other {
                writeln!(out, "{pad}  {:<width$}  {n:>8}", "(other)")?;
            }
        } else if let Some(c) = o.get("doc_count") {
            writeln!(out, "{pad}{name}: {} documents", show(c))?;
            let subs: serde_json::Map<String, Value> = o
                .iter()
                .filter(|(k, _)| *k != "doc_count")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            print_aggs(out, &Value::Object(subs), depth + 1)?;
        } else if let Some(h) = o.get("hits") {
            writeln!(out, "{pad}{name}: {} hits", show(&h["total"]["value"]))?;
            for hit in h["hits"].as_array().into_iter().flatten() {
                writeln!(out, "{pad}  {}  {}", show(&hit["_id"]), show(&hit["_score"]))?;
            }
        } else if let Some(v) = o.get("value_as_string").or_else(|| o.get("value")) {
            writeln!(out, "{pad}{name}: {}", show(v))?;
        } else {
            let parts: Vec<String> = ["count", "min", "max", "avg", "sum"]
                .iter()
                .filter_map(|k| o.get(*k).map(|v| format!("{k}={}", show(v))))
                .collect();
            writeln!(out, "{pad}{name}: {}", parts.join(" "))?;
        }
    }
    Ok(())
}

/// The sort keys `specs` name (`FIELD[:asc|desc]`, `_score`, `_doc`).
fn sort_of(s: &Searcher, specs: &[String]) -> Result<Vec<tierdex::search::SortField>, Error> {
    let mut list = Vec::new();
    for spec in specs {
        let (name, order) = match spec.rsplit_once(':') {
            Some((n, o @ ("asc" | "desc"))) => (n, Some(o)),
            _ => (spec.as_str(), None),
        };
        list.push(match order {
            Some(o) => serde_json::json!({ name: o }),
            None => serde_json::json!(name),
        });
    }
    tierdex::query::dsl::sort(s.schema(), &serde_json::Value::Array(list))
}

#[derive(Serialize)]
struct JsonHit {
    id: String,
    score: f32,
    title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    snippet: Option<String>,
    /// With --sort: the hit's sort values, its document number last.
    #[serde(skip_serializing_if = "Option::is_none")]
    sort: Option<Vec<tierdex::search::SortValue>>,
    /// With --source: the stored document.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<serde_json::Value>,
}

#[derive(Serialize)]
struct JsonResult<'q> {
    query: &'q str,
    count: Option<u64>,
    hits: Vec<JsonHit>,
    elapsed_us: u64,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    io: Option<crate::tier::QueryIo>,
    /// With --agg or --aggs-json: the aggregations, in Elasticsearch's shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    aggregations: Option<serde_json::Value>,
}

/// Runs `tierdex search`.
pub fn run(a: Args) -> Result<()> {
    let mut searcher = Searcher::open_with(&a.dir, a.tier.open_options())?;
    if !a.default_fields.is_empty() {
        searcher.set_default_fields(&a.default_fields)?;
    }
    let aggs = aggs_of(&searcher, &a)?;
    // A line of stdin that is not UTF-8 is that query's error.
    let mut queries: Vec<crate::lines::Line> = Vec::new();
    for q in &a.queries {
        if q == "-" {
            for line in crate::lines::text_lines(std::io::stdin().lock()) {
                match line.context("reading queries from stdin")? {
                    Ok(l) if l.trim().is_empty() => {}
                    other => queries.push(other),
                }
            }
        } else {
            queries.push(Ok(q.clone()));
        }
    }
    let stdout = std::io::stdout();
    let tty = stdout.is_terminal();
    let mut out = stdout.lock();
    let mut failures = 0;
    for q in &queries {
        let q = match q {
            Ok(q) => q,
            Err(why) => {
                failures += 1;
                eprintln!("error: {why}");
                if a.json {
                    writeln!(out, "{}", serde_json::json!({ "error": why }))?;
                }
                continue;
            }
        };
        if let Err(e) = one(&searcher, &a, aggs.as_ref(), q, tty, &mut out) {
            failures += 1;
            match &e {
                Error::Query(qe) => {
                    eprintln!("error: invalid query");
                    for line in render_error(q, qe).lines() {
                        eprintln!("  {line}");
                    }
                }
                other => eprintln!("error: {other}"),
            }
            if a.json {
                writeln!(out, "{}", serde_json::json!({ "query": q, "error": e.to_string() }))?;
            }
        }
    }
    if failures > 0 {
        bail!("{failures} of {} queries failed", queries.len());
    }
    Ok(())
}

fn one(
    s: &Searcher,
    a: &Args,
    aggs: Option<&tierdex::aggs::Aggregations>,
    q: &str,
    tty: bool,
    out: &mut impl Write,
) -> Result<(), Error> {
    let started = Instant::now();
    let (evaluated, query_io) = crate::tier::measure(true, || -> Result<_, Error> {
        let parsed = s.parse(q)?;
        let plan = s.plan(&parsed)?;
        let results = if a.sort.is_empty() && a.from == 0 && aggs.is_none() {
            s.execute(&plan, a.mode.into(), a.k)?
        } else {
            let mut req = tierdex::search::SearchRequest::new(&parsed, a.k);
            req.mode = a.mode.into();
            req.from = a.from;
            req.sort = sort_of(s, &a.sort)?;
            req.aggs = aggs;
            s.search_request(&req)?
        };
        Ok((plan, results))
    });
    let (plan, results) = evaluated?;
    let elapsed = started.elapsed();
    let query_io = a.io_stats.then_some(query_io);
    let io = |e: std::io::Error| Error::io("<stdout>", e);
    if a.json {
        let mut hits = Vec::with_capacity(results.hits.len());
        for (i, h) in results.hits.iter().enumerate() {
            let doc = s.doc(h.doc)?;
            let snippet = if a.highlight {
                Some(snippet(&s.highlight(&plan, h.doc, a.snippet_bytes)?).render("<b>", "</b>"))
            } else {
                None
            };
            hits.push(JsonHit {
                score: h.score,
                title: doc.text(heading(s)).to_string(),
                sort: results.sort.as_ref().map(|v| v[i].clone()),
                source: a.source.then(|| serde_json::Value::Object(doc.fields.to_map())),
                id: doc.id,
                snippet,
            });
        }
        let r = JsonResult {
            query: q,
            count: results.count,
            hits,
            elapsed_us: elapsed.as_micros() as u64,
            io: query_io,
            aggregations: results.aggregations.clone(),
        };
        writeln!(out, "{}", serde_json::to_string(&r).expect("serialisable")).map_err(io)?;
        return Ok(());
    }
    let (open, close) = if tty { ("\x1b[1m", "\x1b[0m") } else { ("*", "*") };
    let count = results.count.map_or(String::new(), |c| format!("{c} matches, "));
    writeln!(
        out,
        "{q}  ({count}{} shown, {:.2} ms)",
        results.hits.len(),
        elapsed.as_secs_f64() * 1e3
    )
    .map_err(io)?;
    if let Some(qi) = query_io {
        writeln!(
            out,
            "  I/O: {} requested in {} reads, {} decoded (read amplification {:.2}), {} from the device",
            qi.bytes_requested,
            qi.ios,
            qi.bytes_needed,
            qi.bytes_requested as f64 / qi.bytes_needed.max(1) as f64,
            qi.device_bytes.map_or("?".into(), |b| b.to_string())
        )
        .map_err(io)?;
    }
    for (i, h) in results.hits.iter().enumerate() {
        let doc = s.doc(h.doc)?;
        if a.highlight {
            let hl = s.highlight(&plan, h.doc, a.snippet_bytes)?;
            writeln!(
                out,
                "{:>3}. {:>8.4}  {}  {}",
                i + 1,
                h.score,
                doc.id,
                hl.get(heading(s)).render(open, close)
            )
            .map_err(io)?;
            let body = snippet(&hl).render(open, close).replace('\n', " ");
            writeln!(out, "               {body}").map_err(io)?;
        } else {
            writeln!(
                out,
                "{:>3}. {:>8.4}  {}  {}",
                i + 1,
                h.score,
                doc.id,
                doc.text(heading(s))
            )
            .map_err(io)?;
        }
        if let Some(v) = results.sort.as_ref() {
            let keys = &v[i][..v[i].len() - 1];
            writeln!(
                out,
                "               sort: {}",
                serde_json::to_string(keys).expect("serialisable")
            )
            .map_err(io)?;
        }
        if a.source {
            let src = serde_json::Value::Object(doc.fields.to_map());
            writeln!(out, "               {src}").map_err(io)?;
        }
    }
    if let Some(v) = &results.aggregations {
        print_aggs(out, v, 0).map_err(io)?;
    }
    Ok(())
}

/// The field a hit is headed by: the schema's first text field (`title`
/// by default).
fn heading(s: &Searcher) -> &str {
    let schema = s.schema();
    schema.text_field_ids().next().map_or("", |f| schema.name(f))
}

/// The snippet shown under a hit's heading: of the first other field with a
/// match, else of the first other field (`body` by default).
fn snippet(hl: &tierdex::search::Highlight) -> &tierdex::query::highlight::Snippet {
    let others = || hl.fields.iter().skip(1).map(|(_, s)| s);
    others()
        .find(|s| !s.marks.is_empty())
        .or_else(|| others().next())
        .unwrap_or_else(|| hl.get(""))
}
