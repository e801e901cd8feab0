//! `tierdex-bench maintenance`: the maintenance workload (issue #6).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use tierdex::corpus::{Corpus, ReadOptions};
use tierdex::search::Searcher;
use tierdex_bench::workload;

/// Options of `tierdex-bench maintenance`.
#[derive(clap::Args)]
pub struct Args {
    /// Flushes (equal batches).
    #[arg(long, default_value_t = 100)]
    pub flushes: usize,
    /// Documents per batch.
    #[arg(long, default_value_t = 20_000)]
    pub docs_per_flush: usize,
    /// A JSON-lines corpus to split into the batches (default: the seeded
    /// generated corpus).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Seed of the generated corpus and of the queries.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Strategies to run (default: all).
    #[arg(long, value_delimiter = ',', value_parser = |s: &str| s.parse::<tierdex::update::Strategy>().map_err(|e| e.to_string()))]
    pub strategies: Vec<tierdex::update::Strategy>,
    /// Queries per workload category in the fixed query set (16 categories,
    /// drawn from an index of the first batch).
    #[arg(long, default_value_t = 10)]
    pub queries_per_category: usize,
    /// Passes over the query set after each flush (the best counts).
    #[arg(long, default_value_t = 3)]
    pub repeats: usize,
    /// Where the indexes are built (removed afterwards).
    #[arg(long, default_value = "target/maintenance-work")]
    pub work: PathBuf,
    /// Results directory.
    #[arg(long, default_value = "bench/results/maintenance")]
    pub out: PathBuf,
    /// Keep the runs of other strategies already in `OUT/maintenance.json`
    /// (the strategies run now replace theirs).
    #[arg(long)]
    pub append: bool,
    /// Run nothing: rewrite the table and charts from `OUT/maintenance.json`.
    #[arg(long)]
    pub report_only: bool,
}

/// Runs `tierdex-bench maintenance`.
pub fn run(a: Args) -> Result<()> {
    use tierdex_bench::maintenance;
    let earlier = || -> Result<(Vec<maintenance::StrategyRun>, Option<String>)> {
        let json = a.out.join("maintenance.json");
        let runs = serde_json::from_str(
            &std::fs::read_to_string(&json).with_context(|| format!("reading {}", json.display()))?,
        )
        .with_context(|| format!("parsing {}", json.display()))?;
        let what = std::fs::read_to_string(a.out.join("maintenance.md"))
            .ok()
            .and_then(|md| {
                md.lines()
                    .next()
                    .and_then(|l| l.strip_prefix("# Maintenance: "))
                    .map(str::to_string)
            });
        Ok((runs, what))
    };
    if a.report_only {
        let (runs, what) = earlier()?;
        let what = what.unwrap_or_else(|| "from maintenance.json".into());
        print!("{}", maintenance::write(&a.out, &runs, &what)?);
        return Ok(());
    }
    if a.flushes == 0 || a.docs_per_flush == 0 {
        bail!("--flushes and --docs-per-flush must be positive");
    }
    let total = a.flushes * a.docs_per_flush;
    let docs: Vec<tierdex::Document> = match &a.corpus {
        Some(path) => {
            let corpus = Corpus::open(std::slice::from_ref(path), ReadOptions::default())?;
            let docs = corpus.take(total).collect::<std::result::Result<Vec<_>, _>>()?;
            if docs.len() < total {
                bail!(
                    "{} holds {} documents, fewer than {} flushes × {}",
                    path.display(),
                    docs.len(),
                    a.flushes,
                    a.docs_per_flush
                );
            }
            docs
        }
        None => {
            let gen = tierdex::corpus::gen::Generator::new(tierdex::corpus::gen::GenOptions {
                docs: total as u64,
                seed: a.seed,
                ..Default::default()
            });
            gen.docs().collect()
        }
    };
    let batches: Vec<Vec<tierdex::Document>> = docs
        .chunks(a.docs_per_flush)
        .map(<[tierdex::Document]>::to_vec)
        .collect();
    drop(docs);
    // A fixed query set drawn from an index of the first batch.
    std::fs::create_dir_all(&a.work)?;
    let qdir = a.work.join("queries-index");
    let _ = std::fs::remove_dir_all(&qdir);
    tierdex::indexing::build_index(batches[0].iter().cloned().map(Ok), &qdir, &Default::default())?;
    let queries: Vec<String> = workload::generate(&Searcher::open(&qdir)?, a.queries_per_category, a.seed)?
        .into_iter()
        .map(|q| q.text)
        .collect();
    let _ = std::fs::remove_dir_all(&qdir);
    let strategies = if a.strategies.is_empty() {
        tierdex::update::Strategy::ALL.to_vec()
    } else {
        a.strategies.clone()
    };
    let what = format!(
        "{} flushes of {} documents ({}), {} queries after each flush (top-10 and count, best of {})",
        a.flushes,
        a.docs_per_flush,
        a.corpus
            .as_ref()
            .map_or(format!("generated corpus, seed {}", a.seed), |p| p
                .display()
                .to_string()),
        queries.len(),
        a.repeats
    );
    eprintln!("maintenance: {what}");
    let mut runs = match a.append {
        true => {
            let (mut runs, before) = earlier()?;
            if before.as_deref().is_some_and(|b| b != what) {
                bail!(
                    "--append: {} holds another workload ({})",
                    a.out.display(),
                    before.unwrap_or_default()
                );
            }
            runs.retain(|r| !strategies.iter().any(|s| s.name() == r.strategy));
            runs
        }
        false => Vec::new(),
    };
    for st in strategies {
        let pb = ProgressBar::new(a.flushes as u64);
        pb.set_style(
            ProgressStyle::with_template("{prefix:>16} [{bar:30}] {pos}/{len} flushes ({elapsed}, eta {eta})")?
                .progress_chars("=> "),
        );
        pb.set_prefix(st.name().to_string());
        let run = maintenance::run_strategy(&a.work, st, &batches, &queries, a.repeats, &|i| {
            pb.set_position(i as u64)
        })?;
        pb.finish_and_clear();
        eprintln!(
            "{:>16}: {:.1} s maintenance, mean query {:.0} µs",
            run.strategy,
            run.total_secs(),
            run.mean_query_us()
        );
        runs.push(run);
        runs.sort_by_key(|r| {
            tierdex::update::Strategy::ALL
                .iter()
                .position(|s| s.name() == r.strategy)
                .unwrap_or(usize::MAX)
        });
        // Partial results survive an interruption.
        maintenance::write(&a.out, &runs, &what)?;
    }
    print!("{}", maintenance::write(&a.out, &runs, &what)?);
    Ok(())
}
