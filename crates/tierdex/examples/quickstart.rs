//! Builds an index of a generated corpus, then answers a few queries with
//! counts and highlighted snippets.
//!
//! `cargo run --release -p tierdex --example quickstart [DOCS]`

use tierdex::corpus::gen::{GenOptions, Generator};
use tierdex::{build_index, IndexOptions, Mode, Searcher};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let docs: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse().map_err(|e| format!("DOCS must be a number: {e}"))?,
        None => 10_000,
    };
    let dir = tempfile::tempdir()?;
    let generator = Generator::new(GenOptions {
        docs,
        ..GenOptions::default()
    });
    let stats = build_index(generator.docs().map(Ok), dir.path(), &IndexOptions::default())?;
    println!(
        "indexed {} documents in {:.1} s",
        stats.docs,
        stats.index_secs + stats.merge_secs
    );

    let searcher = Searcher::open(dir.path())?;
    // Queries from the words of the first document, so that they match.
    let first = searcher.doc(0)?;
    let title: Vec<&str> = first.title().split_whitespace().collect();
    let body: Vec<&str> = first.body().split_whitespace().collect();
    let queries = [
        title[0].to_string(),
        format!("+{} +{}", title[0], body[0]),
        format!("\"{} {}\"", body[1], body[2]),
        format!("title:{}", title[0]),
    ];
    for query in &queries {
        let results = searcher.search(query, Mode::TopKAndCount, 3)?;
        println!("{query}: {} matches", results.count.unwrap_or(0));
        let plan = searcher.plan(&searcher.parse(query)?)?;
        for hit in &results.hits {
            let doc = searcher.doc(hit.doc)?;
            let snippet = searcher.highlight(&plan, hit.doc, 120)?;
            println!("  {:.3} {} {:?}", hit.score, doc.id, doc.title());
            println!("        {}", snippet.body().render("[", "]").replace('\n', " "));
        }
    }
    Ok(())
}
