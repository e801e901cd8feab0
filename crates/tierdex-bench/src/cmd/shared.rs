//! What the subcommands share: the repository, progress bars, building
//! the engines, the corpus copy and run names.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
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
        if !built.contains_key(&spec.base) {
            eprintln!("building {} ...", spec.base);
            let program = match Engine::build(&spec.base, repo) {
                Ok(e) => Some(e),
                Err(e) if !spec.is_tierdex() => {
                    eprintln!("warning: {} left out: {e:#}", spec.base);
                    left_out.push(format!("{}: the build failed: {e:#}", spec.base));
                    None
                }
                Err(e) => return Err(e),
            };
            built.insert(spec.base.clone(), program);
        }
        let Some(program) = &built[&spec.base] else {
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

/// Writes the first `limit` documents of `source` as plain JSON lines
/// (`{"id","title","body"}`), unless an identical copy is already there.
pub(crate) fn prepare_corpus(source: &Path, limit: Option<u64>, out: &Path) -> Result<u64> {
    let meta = std::fs::metadata(source).with_context(|| format!("reading {}", source.display()))?;
    let stamp = format!("{} {} {:?}", source.display(), meta.len(), limit);
    let stamp_path = out.with_extension("stamp");
    if out.exists() && std::fs::read_to_string(&stamp_path).ok().as_deref() == Some(stamp.as_str()) {
        let docs = std::fs::read_to_string(out.with_extension("docs"))?.trim().parse()?;
        return Ok(docs);
    }
    let corpus = Corpus::open(&[source.to_path_buf()], ReadOptions::default())?;
    let mut w = BufWriter::new(std::fs::File::create(out)?);
    let pb = bar(limit.unwrap_or(0), "corpus");
    let mut n = 0u64;
    for doc in corpus {
        let doc = doc?;
        serde_json::to_writer(
            &mut w,
            &serde_json::json!({"id": doc.id, "title": doc.title(), "body": doc.body()}),
        )?;
        w.write_all(b"\n")?;
        n += 1;
        if n.is_multiple_of(4096) {
            pb.set_position(n);
        }
        if limit.is_some_and(|l| n >= l) {
            break;
        }
    }
    w.flush()?;
    pb.finish_and_clear();
    if n == 0 {
        bail!("{} holds no documents", source.display());
    }
    std::fs::write(out.with_extension("docs"), n.to_string())?;
    std::fs::write(stamp_path, stamp)?;
    Ok(n)
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
