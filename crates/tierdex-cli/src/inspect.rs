//! `tierdex inspect`: segments, files, statistics and terms of an index.

use std::path::PathBuf;

use anyhow::Result;
use serde_json::json;
use tierdex::index::{Index, OpenOptions};

use crate::{existing_dir, human_bytes};

/// Options of `tierdex inspect`.
#[derive(clap::Args)]
pub struct Args {
    /// Index directory.
    #[arg(value_parser = existing_dir)]
    dir: PathBuf,
    /// Verify the checksum of every page of every file.
    #[arg(long)]
    verify: bool,
    /// Show the N most frequent terms of each field.
    #[arg(long, default_value_t = 10)]
    terms: usize,
    /// Output JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `tierdex inspect`.
pub fn run(a: Args) -> Result<()> {
    let index = Index::open(
        &a.dir,
        OpenOptions {
            verify: a.verify,
            ..Default::default()
        },
    )?;
    let m = index.manifest();
    let mut top_terms = serde_json::Map::new();
    let mut term_counts = serde_json::Map::new();
    let schema = index.schema();
    for f in schema.fields() {
        let mut terms = index.field_terms(f)?;
        term_counts.insert(schema.name(f).into(), terms.len().into());
        terms.sort_by(|x, y| y.doc_freq.cmp(&x.doc_freq).then_with(|| x.term.cmp(&y.term)));
        terms.truncate(a.terms);
        let list: Vec<_> = terms
            .iter()
            .map(|t| json!({"term": t.term, "doc_freq": t.doc_freq, "total_term_freq": t.total_term_freq}))
            .collect();
        top_terms.insert(schema.name(f).into(), list.into());
    }
    if a.json {
        let v = json!({
            "dir": a.dir,
            "docs": index.live_docs(),
            "deleted_docs": index.num_docs() - index.live_docs(),
            "strategy": m.strategy,
            "applied_seq": m.applied_seq,
            "unapplied_log_records": index.unapplied_log_records(),
            "analyzer": m.analyzer,
            "codec": m.codec,
            "layout": m.layout,
            "bloom": m.bloom,
            "verified": a.verify,
            "segments": m.segments,
            "schema": schema,
            "fields": schema.fields().map(|f| (schema.name(f), index.field_stats(f))).collect::<std::collections::BTreeMap<_, _>>(),
            "terms": term_counts,
            "top_terms": top_terms,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let total: u64 = m.segments.iter().map(|s| s.bytes()).sum();
    println!("index {}", a.dir.display());
    println!(
        "  {} documents ({} deleted, not yet compacted), {} segment(s), {}, codec {}, layout {}, strategy {}, analyzer {}",
        index.live_docs(),
        index.num_docs() - index.live_docs(),
        m.segments.len(),
        human_bytes(total),
        m.codec,
        m.layout,
        m.strategy,
        m.analyzer
            .name()
            .map_or_else(|| serde_json::to_string(&m.analyzer).unwrap_or_default(), str::to_string)
    );
    let filtered: Vec<&str> = schema
        .fields()
        .filter(|&f| schema.phrase_filters(f))
        .map(|f| schema.name(f))
        .collect();
    match m.bloom.map(|b| (b, b.shape())) {
        Some(_) if filtered.is_empty() => println!("  no field has phrase Bloom filters"),
        Some((b, Ok(shape))) => println!(
            "  phrase Bloom filters on the terms of {} (stop words excluded) in at most {} of a segment's documents \
             (or {}): {} bytes and {} hashes per filter (expected {} neighbours, false-positive rate {})",
            schema
                .fields()
                .filter(|&f| schema.phrase_filters(f))
                .map(|f| schema.name(f))
                .collect::<Vec<_>>()
                .join(", "),
            if b.max_doc_share >= 1.0 {
                "all".to_string()
            } else {
                format!("{:.2}%", b.max_doc_share * 100.0)
            },
            b.min_doc_ceiling,
            shape.bytes,
            shape.hashes,
            b.expected,
            b.fpr
        ),
        Some((_, Err(e))) => println!("  phrase Bloom filters: unusable parameters ({e})"),
        None => println!("  no phrase Bloom filters"),
    }
    if a.verify {
        println!("  every page of every file verified: OK");
    }
    if index.unapplied_log_records() > 0 {
        println!(
            "  {} acknowledged batches are only in the write-ahead log, not in the segments above \
             (a writer applies them: a running one at its next flush, else `tierdex compact`)",
            index.unapplied_log_records()
        );
    }
    let width = schema.names().iter().map(|n| n.len()).max().unwrap_or(0);
    for f in schema.fields() {
        let s = index.field_stats(f);
        let name = schema.name(f);
        let entry = schema.entry(f).expect("a field of the schema");
        if entry.ty.column_kind().is_some() {
            // Columns: documents with a value and values, over segment parts.
            let (mut docs, mut values) = (0u64, 0u64);
            for seg in index.segments() {
                for part in seg.parts() {
                    if let Some(c) = part.columns().and_then(|c| c.column(f.id())) {
                        docs += c.meta.docs_with_value as u64;
                        values += c.meta.value_count;
                    }
                }
            }
            let source = entry.source.as_deref().map_or(String::new(), |p| format!(" of `{p}`"));
            let what = match (entry.ty.indexed(), entry.ty.doc_values()) {
                (true, true) => "points and doc values",
                (true, false) => "points",
                (false, true) => "doc values",
                (false, false) => "_source only",
            };
            println!(
                "  field {name:width$}: {}{source}, {docs} docs with a value, {values} values ({what}; deleted documents counted)",
                entry.ty.name()
            );
            continue;
        }
        let default = if schema.default_fields().contains(&f) {
            ", searched by default"
        } else {
            ""
        };
        println!(
            "  field {name:width$}: {} docs with text, {} tokens (avg {:.1}), {} distinct terms{default}",
            s.doc_count,
            s.sum_total_term_freq,
            s.sum_total_term_freq as f64 / s.doc_count.max(1) as f64,
            term_counts[name]
        );
    }
    for s in &m.segments {
        println!(
            "  segment {}: {} docs ({} deleted), {} terms, {}",
            s.name,
            s.max_doc,
            s.deletes.map_or(0, |d| d.count),
            s.num_terms,
            human_bytes(s.bytes())
        );
        for (ext, info) in &s.files {
            println!(
                "    .{ext:4} {:>12}  checksum {:016x}",
                human_bytes(info.content_len),
                info.checksum
            );
        }
    }
    for f in schema.fields() {
        let list = top_terms[schema.name(f)].as_array().cloned().unwrap_or_default();
        if list.is_empty() {
            continue;
        }
        let shown: Vec<String> = list
            .iter()
            .map(|t| format!("{} ({})", t["term"].as_str().unwrap_or(""), t["doc_freq"]))
            .collect();
        println!("  top {} terms: {}", schema.name(f), shown.join(", "));
    }
    Ok(())
}
