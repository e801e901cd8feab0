//! The engine's modules form layers that only point down (issue #19).
//!
//! Each top-level module of `src/` has a rank in [`LAYERS`]; a module may
//! name (`crate::m`) only modules of a lower rank. A new module must be
//! given its place here; an upward reference fails this test with the file
//! and line that made it. The order is written down in the README's module
//! map.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first. A module may use only the modules before it.
const LAYERS: &[&str] = &[
    // common: document numbers, bit sets, error kinds
    "common", "error", // text analysis and integer codecs
    "analysis", "codec",   // where bytes come from
    "storage", // columns: keyword, number, date and boolean values (doc values, points)
    "column",  // fields and documents, and the readers that produce documents
    "schema", "corpus", // postings: phrase filters, term dictionary, layout and cursors
    "bloom", "termdict", "layout",   // stored documents and ids
    "store",    // an index: manifest, segments, deletes
    "index",    // building segments
    "indexing", // queries: parse, plan, weights, scorers, collectors
    "query",    // aggregations over a query's matches
    "aggs",     // the reading facade
    "search",   // result cache
    "cache",    // writing while searching
    "update",   // snapshot repositories
    "snapshot",
];

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to (`None`: the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    match first.strip_suffix(".rs") {
        Some("lib") => None,
        Some(m) => Some(m.to_string()),
        None => Some(first),
    }
}

/// Every `crate::name` on a line that is not a comment.
fn crate_refs(line: &str) -> Vec<String> {
    let code = line.trim_start();
    if code.starts_with("//") {
        return Vec::new();
    }
    let code = code.split(" //").next().unwrap_or(code);
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `$crate::`, `tierdex_crate::`…
        }
        let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            out.push(name);
        }
    }
    out
}

#[test]
fn modules_only_use_lower_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rank: BTreeMap<&str, usize> = LAYERS.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    for file in &files {
        let Some(module) = module_of(&src, file) else {
            continue;
        };
        let Some(&own) = rank.get(module.as_str()) else {
            violations.push(format!(
                "{}: module `{module}` has no layer: add it to LAYERS in tests/layers.rs",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for used in crate_refs(line) {
                if used == module {
                    continue;
                }
                match rank.get(used.as_str()) {
                    Some(&r) if r < own => {}
                    Some(_) => violations.push(format!(
                        "{}:{}: `{module}` uses `crate::{used}`, a layer above it",
                        file.strip_prefix(&src).unwrap().display(),
                        n + 1
                    )),
                    // Re-exports at the crate root (`crate::Error`) and items
                    // of lib.rs: the root sits above every module.
                    None if used.chars().next().is_some_and(|c| c.is_uppercase()) => violations.push(format!(
                        "{}:{}: `{module}` uses `crate::{used}` from the crate root: name its module",
                        file.strip_prefix(&src).unwrap().display(),
                        n + 1
                    )),
                    None => violations.push(format!(
                        "{}:{}: `crate::{used}` is not a known module",
                        file.strip_prefix(&src).unwrap().display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "{} upward or unknown references:\n{}",
        violations.len(),
        violations.join("\n")
    );
}

#[test]
fn the_checker_sees_references() {
    assert_eq!(crate_refs("use crate::index::Index;"), vec!["index"]);
    assert_eq!(crate_refs("    // crate::query in a comment"), Vec::<String>::new());
    assert_eq!(
        crate_refs("let x = crate::a::f(crate::b::g()); // crate::c"),
        vec!["a", "b"]
    );
    assert_eq!(crate_refs("$crate::x"), Vec::<String>::new());
}
