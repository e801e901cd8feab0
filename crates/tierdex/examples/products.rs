//! An index of your own fields kept up to date while it is searched: a
//! product catalogue with a name and a description, documents added,
//! replaced and deleted through the writer, queries with field prefixes and
//! default fields.
//!
//! `cargo run -p tierdex --example products`

use tierdex::{AnalyzerConfig, Document, Format, IndexWriter, Mode, Schema, Strategy, WriterOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let schema = Schema::from_json(
        r#"{"fields": [
              {"name": "name", "type": "text"},
              {"name": "description", "type": "text", "phrase_filters": true,
               "analyzer": {"stemming": true, "stop_words": true}}
            ],
            "default_fields": ["name", "description"]}"#,
    )?;
    let writer = IndexWriter::create_with_schema(
        dir.path(),
        schema,
        AnalyzerConfig::default(),
        Format::default(),
        Strategy::InPlace,
        WriterOptions::default(),
    )?;
    let product = |id: &str, name: &str, description: &str| {
        Document::new(id)
            .with_text("name", name)
            .with_text("description", description)
    };
    writer.add(vec![
        product("k1", "Red kettle", "Boils water in two minutes"),
        product("t1", "Blue teapot", "A teapot that keeps tea warm; not a kettle"),
        product("f1", "Water filter", "Filters tap water"),
    ])?;
    // A document whose id exists replaces it.
    writer.add(vec![product("k1", "Red kettle", "Boils water in ninety seconds")])?;
    writer.flush()?;

    let searcher = writer.refresh()?;
    for query in [
        "kettle",
        "name:kettle",
        "description:boiling",
        "\"tap water\"",
        "water -filter",
    ] {
        let results = searcher.search(query, Mode::TopKAndCount, 10)?;
        let ids: Vec<String> = results
            .hits
            .iter()
            .map(|h| searcher.doc_id(h.doc))
            .collect::<Result<_, _>>()?;
        println!("{query:24} {} match(es): {ids:?}", results.count.unwrap_or(0));
    }

    writer.delete(vec!["t1".into()])?;
    let searcher = writer.refresh()?;
    println!("after deleting t1: {} documents", searcher.num_docs());
    // A field the schema lacks is refused, never dropped.
    let bad = Document::new("x").with_text("price", "3");
    println!("adding a price: {}", writer.add(vec![bad]).unwrap_err());
    Ok(())
}
