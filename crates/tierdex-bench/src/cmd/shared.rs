//! What the subcommands share: the repository, progress bars, building
//! the engines, the corpus copy and run names.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex_bench::engines::{Engine, EngineSpec};

/// The repository's root directory.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root")
}

/// A progress bar of `len` steps, labelled `what`.
pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} ({eta}) {msg}")
            .expect("template")
            .progress_chars("=> "),
    );
    pb.set_prefix(what.to_string());
    pb
}

/// Builds each engine of `specs` once and returns its variants, in order,
/// with the reasons for those left out: a peer whose build fails, or a
/// variant whose options the built `tierdex` does not have. A failing
/// tierdex build is an error.
pub(crate) fn build_engines(specs: &[EngineSpec], repo: &Path) -> Result<(Vec<Engine>, Vec<String>)> {
    let mut built: BTreeMap<String, Option<Engine>> = BTreeMap::new();
    let (mut engines, mut left_out) = (Vec::new(), Vec::new());
    for spec in specs {
        let name = spec.program_name();
        if !built.contains_key(name) {
            eprintln!("building {name} ...");
            let program = match Engine::build(name, repo) {
                Ok(e) => Some(e),
                Err(e) if !spec.is_tierdex() => {
                    eprintln!("warning: {} left out: {e:#}", spec.base);
                    left_out.push(format!("{}: the build failed: {e:#}", spec.base));
                    None
                }
                Err(e) => return Err(e),
            };
            built.insert(name.to_string(), program);
        }
        let Some(program) = &built[name] else {
            continue;
        };
        let e = program.variant(spec.clone())?;
        let missing = e.missing_flags()?;
        if !missing.is_empty() {
            let msg = format!(
                "{}: `tierdex query-stream` has no {} yet",
                spec.name,
                missing.join(", ")
            );
            eprintln!("warning: {msg}; left out");
            left_out.push(msg);
            continue;
        }
        engines.push(e);
    }
    Ok((engines, left_out))
}

/// Names a run after its corpus (and document cap): work and results directories.
pub(crate) fn run_name(corpus: &Path, docs: Option<u64>) -> String {
    format!("{}{}", stem(corpus), docs.map_or(String::new(), |d| format!("-{d}")))
}

/// The search-benchmark-game command file next to the repository, when present.
pub(crate) fn default_command_file(repo: &Path) -> Option<PathBuf> {
    Some(repo.join("../shared/queries/search-benchmark-game/commands.txt")).filter(|p| p.exists())
}

/// A file's name up to its first dot.
pub(crate) fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.split('.').next().unwrap_or("corpus").to_string()
}

/// Names of the bench protocol's typed fields (`bench/PROTOCOL.md`).
pub(crate) const TYPED_FIELDS: [&str; 5] = ["date", "category", "tags", "price", "popularity"];

/// The Elasticsearch-style mapping of a typed corpus (the protocol's
/// fields), written next to the corpus copy for `tierdex index --mapping`.
pub(crate) fn typed_mapping() -> serde_json::Value {
    tierdex::corpus::gen::typed::mapping()
}

/// A JSON lines file, zstd or gzip compressed (recognised by their magic
/// bytes) or plain.
pub(crate) fn open_lines(path: &Path) -> Result<Box<dyn BufRead>> {
    let mut file = std::fs::File::open(path).with_context(|| format!("reading {}", path.display()))?;
    let mut magic = [0u8; 4];
    let n = file.read(&mut magic)?;
    file.seek(SeekFrom::Start(0))?;
    let reader: Box<dyn Read> = match &magic[..n] {
        [0x28, 0xB5, 0x2F, 0xFD] => Box::new(zstd::stream::read::Decoder::new(file)?),
        [0x1F, 0x8B, ..] => Box::new(flate2::read::MultiGzDecoder::new(file)),
        _ => Box::new(file),
    };
    Ok(Box::new(BufReader::with_capacity(1 << 20, reader)))
}

/// Whether the first record of a JSON lines corpus has any of the
/// protocol's typed fields (a directory of text files has none).
pub(crate) fn corpus_has_typed_fields(source: &Path) -> Result<bool> {
    if source.is_dir() {
        return Ok(false);
    }
    for line in open_lines(source)?.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line.trim_start_matches('\u{feff}'))
            .with_context(|| format!("the first record of {}", source.display()))?;
        return Ok(TYPED_FIELDS.iter().any(|f| v.get(f).is_some_and(|x| !x.is_null())));
    }
    Ok(false)
}

/// One record of the corpus copy: id, title and body, and the typed fields
/// it has (copied as they are: the engines check them).
#[derive(serde::Serialize)]
struct OutRecord<'a> {
    id: &'a str,
    title: &'a str,
    body: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    date: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tags: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    price: Option<&'a serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    popularity: Option<&'a serde_json::Value>,
}

/// The corpus copy [`prepare_corpus`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Prepared {
    /// Documents in it.
    pub docs: u64,
    /// With typed fields: the same documents with id, title and body only
    /// (`<out>-text.jsonl`), for a tierdex whose `index` has no mappings yet.
    pub text_only: Option<PathBuf>,
}

/// Writes the first `limit` documents of `source` as plain JSON lines
/// (`{"id","title","body"}`, plus the typed fields of the bench protocol
/// when `typed`), unless an identical copy is already there. A JSON lines
/// source is read record by record (`id` or `url`, a string or an integer;
/// `title` and `body` strings or null; other keys dropped); a directory goes
/// through tierdex's corpus reader (title and body only).
pub(crate) fn prepare_corpus(source: &Path, limit: Option<u64>, out: &Path, typed: bool) -> Result<Prepared> {
    let meta = std::fs::metadata(source).with_context(|| format!("reading {}", source.display()))?;
    let stamp = format!("{} {} {:?} typed={typed}", source.display(), meta.len(), limit);
    let stamp_path = out.with_extension("stamp");
    let text_only = typed.then(|| out.with_file_name(format!("{}-text.jsonl", stem(out))));
    if out.exists()
        && text_only.as_ref().is_none_or(|t| t.exists())
        && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str())
    {
        let docs = std::fs::read_to_string(out.with_extension("docs"))?.trim().parse()?;
        return Ok(Prepared { docs, text_only });
    }
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    let mut text_w = match &text_only {
        Some(t) => Some(BufWriter::new(std::fs::File::create(t)?)),
        None => None,
    };
    let pb = bar(limit.unwrap_or(0), "corpus");
    let mut n = 0u64;
    let mut write = |id: &str, title: &str, body: &str, v: Option<&serde_json::Value>| -> Result<()> {
        let typed_field = |f: &str| v.filter(|_| typed).and_then(|v| v.get(f)).filter(|x| !x.is_null());
        let rec = OutRecord {
            id,
            title,
            body,
            date: typed_field("date"),
            category: typed_field("category"),
            tags: typed_field("tags"),
            price: typed_field("price"),
            popularity: typed_field("popularity"),
        };
        serde_json::to_writer(&mut w, &rec)?;
        w.write_all(b"\n")?;
        if let Some(t) = text_w.as_mut() {
            serde_json::to_writer(&mut *t, &serde_json::json!({"id": id, "title": title, "body": body}))?;
            t.write_all(b"\n")?;
        }
        Ok(())
    };
    let done = |n: u64| limit.is_some_and(|l| n >= l);
    if source.is_dir() {
        for doc in Corpus::open(&[source.to_path_buf()], ReadOptions::default())? {
            let doc = doc?;
            write(&doc.id, doc.title(), doc.body(), None)?;
            n += 1;
            if done(n) {
                break;
            }
        }
    } else {
        for (i, line) in open_lines(source)?.lines().enumerate() {
            let line = line.with_context(|| format!("{}:{}", source.display(), i + 1))?;
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                &line
            };
            if line.trim().is_empty() {
                continue;
            }
            let at = || format!("{}:{}", source.display(), i + 1);
            let v: serde_json::Value = serde_json::from_str(line).with_context(at)?;
            let text = |f: &str| -> Result<&str> {
                match v.get(f) {
                    None | Some(serde_json::Value::Null) => Ok(""),
                    Some(serde_json::Value::String(s)) => Ok(s),
                    Some(_) => bail!("{}: field `{f}` must be a string", at()),
                }
            };
            let id = match v.get("id").or_else(|| v.get("url")) {
                Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
                Some(serde_json::Value::Number(x)) if x.is_u64() || x.is_i64() => x.to_string(),
                _ => bail!(
                    "{}: missing or bad `id` (or `url`): a non-empty string or an integer",
                    at()
                ),
            };
            write(&id, text("title")?, text("body")?, Some(&v))?;
            n += 1;
            if n.is_multiple_of(4096) {
                pb.set_position(n);
            }
            if done(n) {
                break;
            }
        }
    }
    w.flush()?;
    if let Some(t) = text_w.as_mut() {
        t.flush()?;
    }
    pb.finish_and_clear();
    if n == 0 {
        bail!("{} holds no documents", source.display());
    }
    std::fs::write(out.with_extension("docs"), n.to_string())?;
    std::fs::write(stamp_path, stamp)?;
    Ok(Prepared { docs: n, text_only })
}

/// Whether `dir` holds a complete index of `engine`.
pub(crate) fn index_complete(engine: &str, dir: &Path) -> bool {
    match engine {
        "tierdex" => dir.join("manifest.json").is_file(),
        "tantivy" => dir.join("meta.json").is_file(),
        _ => std::fs::read_dir(dir).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("segments_"))
        }),
    }
}

/// "first / peak / last MiB" of RSS samples `[[secs, bytes], ...]`.
pub(crate) fn rss_summary(v: &serde_json::Value) -> String {
    let b: Vec<f64> = v
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s[1].as_f64())
        .map(|x| x / 1048576.0)
        .collect();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => format!(
            "{f:.0} MiB at start, {:.0} MiB peak, {l:.0} MiB at the end ({} samples)",
            b.iter().copied().fold(0.0, f64::max),
            b.len()
        ),
        _ => "none".into(),
    }
}

/// How much of the corpus is indexed and which queries are asked: the same
/// options for `compare` and `limited`.
#[derive(clap::Args)]
pub struct CorpusQueries {
    /// Index only the first N documents.
    #[arg(long)]
    pub docs: Option<u64>,
    /// Command file (`MODE<TAB>QUERY`); default: the search-benchmark-game
    /// file in ../shared/queries when present.
    #[arg(long)]
    pub queries: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierdex::corpus::gen::{write_corpus, GenOptions};

    fn lines(p: &Path) -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn corpus_copies_keep_or_drop_typed_fields() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("t.jsonl.zst");
        let opts = GenOptions {
            docs: 300,
            vocab_size: 1000,
            median_body_tokens: 5.0,
            typed: true,
            ..GenOptions::default()
        };
        write_corpus(&opts, &source, &|_| {}).unwrap();
        assert!(corpus_has_typed_fields(&source).unwrap());

        let out = dir.path().join("corpus.jsonl");
        let p = prepare_corpus(&source, Some(200), &out, true).unwrap();
        assert_eq!(p.docs, 200);
        let (full, text) = (lines(&out), lines(p.text_only.as_ref().unwrap()));
        assert_eq!((full.len(), text.len()), (200, 200));
        for (f, t) in full.iter().zip(&text) {
            assert_eq!((&f["id"], &f["title"], &f["body"]), (&t["id"], &t["title"], &t["body"]));
            assert_eq!(t.as_object().unwrap().len(), 3);
            assert!(
                f["date"].is_string() && f["tags"].is_array() && f["popularity"].is_u64(),
                "{f}"
            );
        }
        assert!(full.iter().any(|f| f.get("price").is_none()));
        // Reused while the stamp matches; rewritten without typed fields when asked.
        let before = std::fs::metadata(&out).unwrap().modified().unwrap();
        assert_eq!(prepare_corpus(&source, Some(200), &out, true).unwrap(), p);
        assert_eq!(std::fs::metadata(&out).unwrap().modified().unwrap(), before);
        let plain = prepare_corpus(&source, Some(200), &out, false).unwrap();
        assert_eq!((plain.docs, plain.text_only), (200, None));
        assert!(lines(&out).iter().all(|v| v.as_object().unwrap().len() == 3));

        // `url` and integer ids, null text, other keys dropped; bad records name their line.
        let odd = dir.path().join("odd.jsonl");
        std::fs::write(
            &odd,
            "{\"url\": \"u1\", \"title\": null, \"body\": \"b\", \"x\": 1}\n\n{\"id\": 7, \"title\": \"t\"}\n",
        )
        .unwrap();
        assert!(!corpus_has_typed_fields(&odd).unwrap());
        let p = prepare_corpus(&odd, None, &dir.path().join("o.jsonl"), false).unwrap();
        assert_eq!(p.docs, 2);
        let v = lines(&dir.path().join("o.jsonl"));
        assert_eq!(v[0], serde_json::json!({"id": "u1", "title": "", "body": "b"}));
        assert_eq!(v[1]["id"], "7");
        std::fs::write(&odd, "{\"id\": \"a\"}\n{\"title\": 3, \"id\": \"b\"}\n").unwrap();
        let e = prepare_corpus(&odd, None, &dir.path().join("o2.jsonl"), false).unwrap_err();
        assert!(format!("{e:#}").contains("odd.jsonl:2"), "{e:#}");
    }
}
