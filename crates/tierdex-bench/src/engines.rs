//! The engines behind one protocol (`bench/PROTOCOL.md`): building them,
//! indexing a corpus (time, peak RSS, size on disk) and streaming queries.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Engines the driver knows.
pub const ENGINES: [&str; 3] = ["tierdex", "lucene", "tantivy"];

/// Engine names a spec may start with: the [`ENGINES`], plus
/// `tierdex-baseline` (another build of tierdex) and `lucene-bp` (Lucene
/// with its documents reordered by recursive graph bisection).
pub const ENGINE_NAMES: [&str; 5] = ["tierdex", "tierdex-baseline", "lucene", "lucene-bp", "tantivy"];

/// Storage tiers of `tierdex query-stream --tier`.
pub const TIERS: [&str; 4] = ["ram", "mmap", "buffered", "direct"];

/// Read advice of the mmap tier (`tierdex query-stream --madvise`).
pub const MADVISE: [&str; 3] = ["os", "random", "adaptive"];

/// Postings layouts of `tierdex index --layout` (`grouped` is the default).
pub const LAYOUTS: [&str; 2] = ["grouped", "split"];

/// Postings codecs of `tierdex index --codec` (`compressed` is the default).
pub const CODECS: [&str; 2] = ["compressed", "direct"];

/// Lucene `ReadAdvice` values settable with the system property
/// `org.apache.lucene.store.defaultReadAdvice`.
pub const LUCENE_ADVICE: [&str; 3] = ["normal", "random", "sequential"];

/// An engine and the variant of it to run, parsed from a spec:
/// `tierdex`, `tierdex:<tier>` (`ram`, `mmap`, `buffered`, `direct`),
/// `tierdex:mmap-<madvise>` (`os`, `random`, `adaptive`), `lucene`,
/// `lucene:<read advice>` (`normal`, `random`, `sequential`), `lucene-bp`
/// (with the same variants), `tantivy`.
/// A tierdex spec may name its index's layout and codec after `@`, joined
/// by `+`: `tierdex@split:direct` (split layout, direct tier),
/// `tierdex@direct:ram` (direct codec, ram tier), `tierdex@split+direct`
/// (`grouped` and `compressed` are the defaults and may be left out);
/// `nobloom` builds the index without phrase Bloom filters, `noreorder`
/// keeps the documents in input order (`tierdex index --reorder off`).
/// `tierdex-baseline` (with the same variants) is another build of tierdex,
/// the binary named by the environment variable `TIERDEX_BASELINE_BIN`
/// (e.g. the previous release), indexing and answering with its own index:
/// an old-against-new comparison in one run.
/// `lucene-bp` is the Lucene engine whose index has its documents reordered
/// by recursive graph bisection (`run.sh index --bp`: lucene-misc's
/// `BPIndexReorderer` with its defaults, on the final force-merged segment),
/// in its own index; analysis, schema and queries are those of `lucene`.
/// Every variant with the same [`EngineSpec::index_key`] opens the same index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineSpec {
    /// The spec as written, e.g. `tierdex:mmap-random`; names runs and results.
    pub name: String,
    /// The engine: `tierdex`, `lucene` or `tantivy`.
    pub base: String,
    /// tierdex's storage tier (`--tier`); `None`: the CLI's default.
    pub tier: Option<String>,
    /// tierdex's mmap read advice (`--madvise`); `None`: the CLI's default.
    pub madvise: Option<String>,
    /// Lucene's default read advice (system property); `None`: Lucene's default.
    pub read_advice: Option<String>,
    /// tierdex's postings layout (`tierdex index --layout`); `None`: the default (`grouped`).
    #[serde(default)]
    pub layout: Option<String>,
    /// tierdex's postings codec (`tierdex index --codec`); `None`: the default (`compressed`).
    #[serde(default)]
    pub codec: Option<String>,
    /// tierdex index built without phrase Bloom filters (`tierdex index --bloom off`).
    #[serde(default)]
    pub no_bloom: bool,
    /// tierdex index with its documents in input order (`tierdex index --reorder off`).
    #[serde(default)]
    pub no_reorder: bool,
    /// tierdex index with its documents reordered whether a sample shows
    /// it pays or not (`tierdex index --reorder on`; the default is `auto`).
    #[serde(default)]
    pub force_reorder: bool,
    /// The baseline build of tierdex (`TIERDEX_BASELINE_BIN`), not this one.
    #[serde(default)]
    pub baseline: bool,
    /// Lucene index with documents reordered by recursive graph bisection (`lucene-bp`).
    #[serde(default)]
    pub bp: bool,
}

/// The environment variable naming the `tierdex-baseline` engine's binary.
pub const BASELINE_BIN: &str = "TIERDEX_BASELINE_BIN";

impl EngineSpec {
    /// The program that runs this spec (`tierdex-baseline` is another build
    /// of tierdex): engines are built once per program name.
    pub fn program_name(&self) -> &str {
        if self.baseline {
            "tierdex-baseline"
        } else {
            &self.base
        }
    }

    /// Parses a spec (see the type).
    pub fn parse(spec: &str) -> Result<EngineSpec> {
        let spec = spec.trim();
        let (base, variant) = match spec.split_once(':') {
            Some((b, v)) => (b, Some(v)),
            None => (spec, None),
        };
        let (base, index_options) = match base.split_once('@') {
            Some((b, o)) => (b, Some(o)),
            None => (base, None),
        };
        let (base, baseline, bp) = match base {
            "tierdex-baseline" => ("tierdex", true, false),
            "lucene-bp" => ("lucene", false, true),
            b => (b, false, false),
        };
        if !ENGINES.contains(&base) {
            bail!("unknown engine `{spec}` (known: {})", ENGINE_NAMES.join(", "));
        }
        let mut out = EngineSpec {
            name: spec.to_string(),
            base: base.to_string(),
            tier: None,
            madvise: None,
            read_advice: None,
            layout: None,
            codec: None,
            no_bloom: false,
            no_reorder: false,
            force_reorder: false,
            baseline,
            bp,
        };
        if let Some(options) = index_options {
            if base != "tierdex" {
                bail!("`{spec}`: only tierdex takes index options (tierdex@<layout>+<codec>)");
            }
            let (mut layout, mut codec) = (None, None);
            for o in options.split('+') {
                if o == "nobloom" {
                    out.no_bloom = true;
                    continue;
                }
                if o == "noreorder" {
                    out.no_reorder = true;
                    continue;
                }
                if o == "reorder" {
                    out.force_reorder = true;
                    continue;
                }
                let slot = if LAYOUTS.contains(&o) {
                    &mut layout
                } else if CODECS.contains(&o) {
                    &mut codec
                } else {
                    bail!(
                        "unknown index option `{o}` in `{spec}` (layouts: {}; codecs: {}; nobloom; noreorder; reorder)",
                        LAYOUTS.join(", "),
                        CODECS.join(", ")
                    );
                };
                if slot.replace(o).is_some() {
                    bail!("`{spec}`: two layouts or two codecs");
                }
            }
            if out.no_reorder && out.force_reorder {
                bail!("`{spec}`: noreorder and reorder exclude each other");
            }
            out.layout = layout.filter(|l| *l != LAYOUTS[0]).map(str::to_string);
            out.codec = codec.filter(|c| *c != CODECS[0]).map(str::to_string);
        }
        let Some(v) = variant else {
            return Ok(out);
        };
        match base {
            "tierdex" => {
                let (tier, madvise) = match v.split_once('-') {
                    Some((t, m)) => (t, Some(m)),
                    None => (v, None),
                };
                if !TIERS.contains(&tier) {
                    bail!(
                        "unknown tierdex tier `{tier}` in `{spec}` (known: {})",
                        TIERS.join(", ")
                    );
                }
                if let Some(m) = madvise {
                    if tier != "mmap" {
                        bail!("`{spec}`: only the mmap tier takes a read advice (tierdex:mmap-<advice>)");
                    }
                    if !MADVISE.contains(&m) {
                        bail!("unknown madvise `{m}` in `{spec}` (known: {})", MADVISE.join(", "));
                    }
                    out.madvise = Some(m.to_string());
                }
                out.tier = Some(tier.to_string());
            }
            "lucene" => {
                if !LUCENE_ADVICE.contains(&v) {
                    bail!(
                        "unknown Lucene read advice `{v}` in `{spec}` (known: {})",
                        LUCENE_ADVICE.join(", ")
                    );
                }
                out.read_advice = Some(v.to_string());
            }
            _ => bail!("`{spec}`: {base} has no variants"),
        }
        Ok(out)
    }

    /// Parses a comma-separated list of specs, refusing duplicates.
    pub fn parse_list(specs: &[String]) -> Result<Vec<EngineSpec>> {
        let mut out: Vec<EngineSpec> = Vec::new();
        for s in specs.iter().flat_map(|s| s.split(',')).filter(|s| !s.trim().is_empty()) {
            let spec = EngineSpec::parse(s)?;
            if out.iter().any(|o| o.name == spec.name) {
                bail!("engine `{}` given twice", spec.name);
            }
            out.push(spec);
        }
        Ok(out)
    }

    /// Names the index this variant opens: the engine (`tierdex-baseline`,
    /// `lucene-bp` apart), plus `@<layout>` for a non-default tierdex layout.
    pub fn index_key(&self) -> String {
        let options: Vec<&str> = [
            self.layout.as_deref(),
            self.codec.as_deref(),
            self.no_bloom.then_some("nobloom"),
            self.no_reorder.then_some("noreorder"),
            self.force_reorder.then_some("reorder"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let base = if self.baseline {
            "tierdex-baseline"
        } else if self.bp {
            "lucene-bp"
        } else {
            &self.base
        };
        if options.is_empty() {
            base.to_string()
        } else {
            format!("{base}@{}", options.join("+"))
        }
    }

    /// Arguments of the engine's `index` command that build this variant's
    /// index (`tierdex index`; `--bp` for `lucene-bp`).
    pub fn index_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.bp {
            args.push("--bp".to_string());
        }
        if let Some(l) = &self.layout {
            args.extend(["--layout".to_string(), l.clone()]);
        }
        if let Some(c) = &self.codec {
            args.extend(["--codec".to_string(), c.clone()]);
        }
        if self.no_bloom {
            args.extend(["--bloom".to_string(), "off".to_string()]);
        }
        if self.no_reorder {
            args.extend(["--reorder".to_string(), "off".to_string()]);
        }
        if self.force_reorder {
            args.extend(["--reorder".to_string(), "on".to_string()]);
        }
        args
    }

    /// Whether this is tierdex (any variant).
    pub fn is_tierdex(&self) -> bool {
        self.base == "tierdex"
    }

    /// Options of `tierdex query-stream` this variant needs (to check the CLI has them).
    pub fn required_flags(&self) -> Vec<&'static str> {
        let mut f = Vec::new();
        if self.tier.is_some() {
            f.push("--tier");
        }
        if self.madvise.is_some() {
            f.push("--madvise");
        }
        if self.tier.as_deref() == Some("direct") {
            f.push("--pool-bytes");
        }
        f
    }

    /// How this variant reads its index: storage path and read advice, for the reports.
    pub fn access(&self) -> String {
        let layout = if self.is_tierdex() {
            format!(
                "; {} layout, {} codec{}{}",
                self.layout.as_deref().unwrap_or(LAYOUTS[0]),
                self.codec.as_deref().unwrap_or(CODECS[0]),
                if self.no_bloom { ", no phrase filters" } else { "" },
                if self.no_reorder {
                    ", documents in input order"
                } else if self.force_reorder {
                    ", documents always reordered"
                } else {
                    ""
                }
            )
        } else if self.bp {
            "; documents reordered by recursive graph bisection (BPIndexReorderer)".to_string()
        } else {
            String::new()
        };
        let access = match self.base.as_str() {
            "tierdex" => match (self.tier.as_deref(), self.madvise.as_deref()) {
                (None, _) => {
                    "the CLI's default: mmap tier, adaptive advice (MADV_RANDOM plus WILLNEED on large zones)".into()
                }
                (Some("mmap"), None) => "mmap tier, the CLI's default advice `adaptive`".into(),
                (Some("mmap"), Some("os")) => "mmap tier, no madvise (MADV_NORMAL: kernel read-around)".into(),
                (Some("mmap"), Some("random")) => "mmap tier, MADV_RANDOM (no read-around: one page per fault)".into(),
                (Some("mmap"), Some("adaptive")) => {
                    "mmap tier, adaptive: MADV_RANDOM, plus MADV_WILLNEED on zones over the prefetch threshold".into()
                }
                (Some("ram"), _) => "ram tier: the whole index read into memory at open".into(),
                (Some("buffered"), _) => "buffered tier: pread through the page cache".into(),
                (Some("direct"), _) => "direct tier: O_DIRECT reads into tierdex's own page pool (--pool-bytes)".into(),
                (Some(t), _) => format!("tier {t}"),
            },
            "lucene" => match self.read_advice.as_deref() {
                None => "MMapDirectory; Lucene 10.6's default ReadAdvice is NORMAL for every file (no madvise; \
                         `org.apache.lucene.store.defaultReadAdvice` unset; RANDOM only with \
                         setReadAdvice(ADVISE_BY_CONTEXT), which the engine does not call)"
                    .into(),
                Some(a) => format!(
                    "MMapDirectory with -Dorg.apache.lucene.store.defaultReadAdvice={a} (MADV_{} on every file)",
                    a.to_uppercase()
                ),
            },
            "tantivy" => "MmapDirectory::open: no madvise (MADV_NORMAL: kernel read-around)".into(),
            other => other.into(),
        };
        access + &layout
    }
}

/// A runnable engine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// The spec's name: `tierdex`, `lucene`, `tantivy` or a variant (`tierdex:direct`, `lucene-bp`).
    pub name: String,
    /// What to run.
    pub spec: EngineSpec,
    program: PathBuf,
}

/// How a query process is started.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Query threads.
    pub threads: usize,
    /// Bytes of tierdex's page pool (`--pool-bytes`, direct tier only).
    pub pool_bytes: Option<u64>,
    /// JVM heap of the Lucene engine in MiB (`TIERDEX_BENCH_HEAP_MB`); `None`: run.sh's default.
    pub heap_mb: Option<u64>,
}

/// What indexing cost.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct IndexReport {
    /// Documents indexed.
    pub docs: u64,
    /// Seconds the engine reports for indexing (without merging).
    pub index_secs: f64,
    /// Seconds the engine reports for the final merge.
    pub merge_secs: f64,
    /// Wall-clock seconds of the whole indexing process (JVM start included).
    pub wall_secs: f64,
    /// Peak resident memory of the indexing process (KiB).
    pub peak_rss_kb: u64,
    /// Bytes of the index directory.
    pub index_bytes: u64,
}

/// One answer of a query stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// Exact count (modes with a count).
    #[serde(default)]
    pub count: Option<u64>,
    /// Hits: external id and score.
    #[serde(default)]
    pub hits: Vec<HitRecord>,
    /// Engine-measured microseconds.
    #[serde(default)]
    pub elapsed_us: u64,
    /// Set when the engine could not run the query.
    #[serde(default)]
    pub error: Option<String>,
    /// A structured query's `aggs`, answered in Elasticsearch's shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregations: Option<serde_json::Value>,
}

/// One hit of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitRecord {
    /// External document id.
    pub id: String,
    /// Score; `None` (`null`) when a structured query sorts by fields.
    #[serde(default)]
    pub score: Option<f64>,
    /// The sort values of a structured query with a sort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<Vec<serde_json::Value>>,
}

/// The result of streaming a query list through an engine.
#[derive(Debug, Clone, Default)]
pub struct QueryRun {
    /// Answers of the first measured pass.
    pub answers: Vec<Answer>,
    /// Per query, the engine-measured microseconds of each measured pass.
    pub timings: Vec<Vec<u64>>,
    /// Peak resident memory of the query process (KiB).
    pub peak_rss_kb: u64,
    /// Wall-clock seconds of the whole stream.
    pub wall_secs: f64,
}

/// Runs `cmd` to completion; its stdout, or an error naming `what` with its stderr.
pub fn run(cmd: &mut Command, what: &str) -> Result<String> {
    let out = cmd.output().with_context(|| format!("starting {what}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Engine {
    /// Builds engine `name` (a spec, see [`EngineSpec`]) from the
    /// repository at `repo` and returns it.
    pub fn build(name: &str, repo: &Path) -> Result<Engine> {
        let spec = EngineSpec::parse(name)?;
        let program = match spec.base.as_str() {
            "tierdex" if spec.baseline => match std::env::var_os(BASELINE_BIN) {
                Some(p) => PathBuf::from(p),
                None => bail!("`{name}` needs {BASELINE_BIN}: the path of the baseline tierdex binary"),
            },
            "tierdex" => {
                run(
                    Command::new("cargo")
                        .args(["build", "--release", "--quiet", "--bin", "tierdex"])
                        .current_dir(repo),
                    "cargo build of tierdex",
                )?;
                repo.join("target/release/tierdex")
            }
            "lucene" => {
                let dir = repo.join("bench/engines/lucene");
                run(
                    Command::new(dir.join("build.sh")).current_dir(&dir),
                    "the Lucene engine build",
                )?;
                dir.join("run.sh")
            }
            "tantivy" => {
                let dir = repo.join("bench/engines/tantivy");
                run(
                    Command::new(dir.join("build.sh")).current_dir(&dir),
                    "the tantivy engine build",
                )?;
                dir.join("target/release/tierdex-tantivy-engine")
            }
            other => unreachable!("EngineSpec::parse accepted `{other}`"),
        };
        if !program.exists() {
            bail!("{} was not produced by the build", program.display());
        }
        Ok(Engine {
            name: spec.name.clone(),
            spec,
            program,
        })
    }

    /// The same engine program running another variant of it.
    pub fn variant(&self, spec: EngineSpec) -> Result<Engine> {
        if spec.program_name() != self.spec.program_name() {
            bail!("`{}` is not a variant of {}", spec.name, self.spec.program_name());
        }
        Ok(Engine {
            name: spec.name.clone(),
            spec,
            program: self.program.clone(),
        })
    }

    fn is_tierdex(&self) -> bool {
        self.spec.is_tierdex()
    }

    /// Options of the query command this variant needs that the built
    /// engine does not have (e.g. `--tier` before the tierdex CLI has tiers).
    pub fn missing_flags(&self) -> Result<Vec<&'static str>> {
        let need = self.spec.required_flags();
        if need.is_empty() {
            return Ok(need);
        }
        let help = run(
            Command::new(&self.program).args(["query-stream", "--help"]),
            "tierdex query-stream --help",
        )?;
        Ok(need.into_iter().filter(|f| !help.contains(f)).collect())
    }

    /// Whether the engine answers the protocol's structured (JSON) queries
    /// over the index `dir` of `docs` documents, by [`STRUCTURED_PROBE`].
    pub fn answers_structured_queries(&self, dir: &Path, docs: u64) -> Result<bool> {
        let lines: Vec<String> = STRUCTURED_PROBE.iter().map(|l| l.to_string()).collect();
        let run = self.query(dir, 1, &lines, 0, 1, &|_| {})?;
        Ok(structured_probe_ok(&run.answers, docs))
    }

    /// Whether tierdex's `index` command has option `flag` (e.g. `--mapping`);
    /// false for the peers.
    pub fn index_has_flag(&self, flag: &str) -> Result<bool> {
        if !self.is_tierdex() {
            return Ok(false);
        }
        let help = run(
            Command::new(&self.program).args(["index", "--help"]),
            "tierdex index --help",
        )?;
        Ok(help
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | '[' | ']'))
            .any(|w| w == flag))
    }

    /// The query process of this variant over the index `dir`, with
    /// arguments and environment but no stdio set up.
    pub fn query_command(&self, dir: &Path, o: &QueryOptions) -> Command {
        let mut cmd = Command::new(&self.program);
        if self.is_tierdex() {
            cmd.arg("query-stream").arg(dir);
            if let Some(t) = &self.spec.tier {
                cmd.args(["--tier", t]);
            }
            if let Some(m) = &self.spec.madvise {
                cmd.args(["--madvise", m]);
            }
            if let (Some("direct"), Some(p)) = (self.spec.tier.as_deref(), o.pool_bytes) {
                cmd.args(["--pool-bytes", &p.to_string()]);
            }
        } else {
            cmd.arg("query").arg("--index").arg(dir);
        }
        cmd.args(["--threads", &o.threads.max(1).to_string()]);
        if self.spec.base == "lucene" {
            if let Some(h) = o.heap_mb {
                cmd.env("TIERDEX_BENCH_HEAP_MB", h.to_string());
            }
            if let Some(a) = &self.spec.read_advice {
                let mut opts = std::env::var("TIERDEX_BENCH_JAVA_OPTS").unwrap_or_default();
                opts += &format!(" -Dorg.apache.lucene.store.defaultReadAdvice={a}");
                cmd.env("TIERDEX_BENCH_JAVA_OPTS", opts.trim());
            }
        }
        cmd
    }

    /// The engine's version line.
    pub fn version(&self) -> Result<String> {
        let arg = if self.is_tierdex() { "--version" } else { "version" };
        Ok(
            run(Command::new(&self.program).arg(arg), &format!("{} version", self.name))?
                .trim()
                .to_string(),
        )
    }

    /// Indexes `corpus` (plain JSON lines) into the new directory `dir`, with
    /// this variant's index options ([`EngineSpec::index_args`]).
    pub fn index(&self, corpus: &Path, dir: &Path, threads: usize, memory_mb: usize) -> Result<IndexReport> {
        self.index_with(corpus, dir, threads, memory_mb, &self.spec.index_args())
    }

    /// Indexes `corpus` into `dir` with `extra` arguments for the engine's
    /// index command: the variant's [`EngineSpec::index_args`] (e.g. `--layout
    /// split`, `--bp`), which the caller passes, plus any of its own.
    pub fn index_with(
        &self,
        corpus: &Path,
        dir: &Path,
        threads: usize,
        memory_mb: usize,
        extra: &[String],
    ) -> Result<IndexReport> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let mut cmd = self.index_command(corpus, dir, threads, memory_mb, extra);
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let started = Instant::now();
        let child = cmd.spawn().with_context(|| format!("starting {} index", self.name))?;
        let monitor = RssMonitor::start(child.id());
        let out = child.wait_with_output()?;
        let peak_rss_kb = monitor.stop();
        let wall_secs = started.elapsed().as_secs_f64();
        if !out.status.success() {
            bail!(
                "{} index failed ({}):\n{}",
                self.name,
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with('{'))
            .unwrap_or("{}");
        let v: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("{} index printed `{line}`", self.name))?;
        Ok(IndexReport {
            docs: v["docs"].as_u64().unwrap_or(0),
            index_secs: v["index_secs"].as_f64().unwrap_or(0.0),
            merge_secs: v["merge_secs"].as_f64().unwrap_or(0.0),
            wall_secs,
            peak_rss_kb,
            index_bytes: dir_bytes(dir)?,
        })
    }

    /// The index process of this variant: `corpus` into `dir`, with `extra`
    /// arguments; no stdio set up.
    pub fn index_command(
        &self,
        corpus: &Path,
        dir: &Path,
        threads: usize,
        memory_mb: usize,
        extra: &[String],
    ) -> Command {
        let mut cmd = Command::new(&self.program);
        if self.is_tierdex() {
            cmd.arg("index")
                .arg(corpus)
                .arg("--out")
                .arg(dir)
                .args(["--threads", &threads.to_string(), "--json"])
                .args(extra);
        } else {
            cmd.arg("index")
                .arg("--corpus")
                .arg(corpus)
                .arg("--index")
                .arg(dir)
                .args(["--threads", &threads.to_string(), "--memory-mb", &memory_mb.to_string()])
                .args(extra);
        }
        cmd
    }

    /// Streams `lines` through the engine's query process over `dir`:
    /// `warmup` passes, then `passes` measured passes.
    #[allow(clippy::too_many_arguments)]
    pub fn query(
        &self,
        dir: &Path,
        threads: usize,
        lines: &[String],
        warmup: usize,
        passes: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<QueryRun> {
        let options = QueryOptions {
            threads,
            ..Default::default()
        };
        self.query_with(dir, &options, lines, warmup, passes, progress)
    }

    /// [`Engine::query`] with every option of the query process (e.g. the direct tier's pool size).
    pub fn query_with(
        &self,
        dir: &Path,
        options: &QueryOptions,
        lines: &[String],
        warmup: usize,
        passes: usize,
        progress: &(dyn Fn(u64) + Sync),
    ) -> Result<QueryRun> {
        let mut cmd = self.query_command(dir, options);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let started = Instant::now();
        let mut child = cmd.spawn().with_context(|| format!("starting {} query", self.name))?;
        let pid = child.id();
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let total = lines.len() * (warmup + passes);
        let mut run = QueryRun {
            timings: vec![Vec::with_capacity(passes); lines.len()],
            ..Default::default()
        };
        let result = std::thread::scope(|scope| -> Result<()> {
            // The feeder hands stdin back instead of closing it, so the
            // process cannot wind down before its peak memory is sampled.
            let feeder = scope.spawn(move || -> std::io::Result<BufWriter<std::process::ChildStdin>> {
                let mut w = BufWriter::new(stdin);
                for _ in 0..warmup + passes {
                    for l in lines {
                        w.write_all(l.as_bytes())?;
                        w.write_all(b"\n")?;
                    }
                    w.flush()?;
                }
                Ok(w)
            });
            let mut reader = BufReader::new(stdout);
            let mut buf = String::new();
            for i in 0..total {
                buf.clear();
                if reader.read_line(&mut buf)? == 0 {
                    bail!("{} query stopped after {i} of {total} answers", self.name);
                }
                let answer: Answer = serde_json::from_str(buf.trim_end())
                    .with_context(|| format!("{} answered `{}`", self.name, buf.trim_end()))?;
                let (pass, q) = (i / lines.len(), i % lines.len());
                if pass >= warmup {
                    run.timings[q].push(answer.elapsed_us);
                    if pass == warmup {
                        run.answers.push(answer);
                    }
                }
                if i % 256 == 0 {
                    progress(i as u64);
                }
            }
            let stdin = feeder.join().expect("feeder thread")?;
            // Peak memory while querying, before the process winds down.
            run.peak_rss_kb = vm_hwm_kb(pid).unwrap_or(0);
            drop(stdin);
            Ok(())
        });
        if let Err(e) = result {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
        let status = child.wait()?;
        if !status.success() {
            bail!("{} query exited with {status}", self.name);
        }
        run.wall_secs = started.elapsed().as_secs_f64();
        Ok(run)
    }
}

/// The probe of [`Engine::answers_structured_queries`]: `COUNT` lines of
/// structured queries whose counts are known for any index of `docs`
/// documents (every document; none).
pub const STRUCTURED_PROBE: [&str; 2] = [
    "COUNT\t{\"query\": {\"match_all\": {}}}",
    "COUNT\t{\"query\": {\"bool\": {\"must_not\": [{\"match_all\": {}}]}}}",
];

/// Whether `answers` to [`STRUCTURED_PROBE`] are right for an index of
/// `docs` documents. An engine that reads the JSON as query text (as
/// `tierdex query-stream` did before it took structured queries) answers
/// with other counts instead of an error.
pub fn structured_probe_ok(answers: &[Answer], docs: u64) -> bool {
    answers.len() == 2
        && answers.iter().all(|a| a.error.is_none())
        && answers[0].count == Some(docs)
        && answers[1].count == Some(0)
}

/// Peak resident set size (VmHWM) of process `pid`, in KiB.
pub fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples a process's peak RSS until stopped (the last sample before exit
/// is the high-water mark of all but the final few milliseconds).
struct RssMonitor {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl RssMonitor {
    fn start(pid: u32) -> Self {
        let (peak, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (p, s) = (peak.clone(), stop.clone());
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(kb) = vm_hwm_kb(pid) {
                    p.fetch_max(kb, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RssMonitor {
            peak,
            stop,
            handle: Some(handle),
        }
    }

    fn stop(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

/// Total bytes of the files under `dir`.
pub fn dir_bytes(dir: &Path) -> Result<u64> {
    let mut total = 0;
    for e in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let e = e?;
        let meta = e.metadata()?;
        total += if meta.is_dir() {
            dir_bytes(&e.path())?
        } else {
            meta.len()
        };
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_engine_specs() {
        let s = EngineSpec::parse("tierdex").unwrap();
        assert_eq!(
            (s.base.as_str(), s.tier.clone(), s.madvise.clone()),
            ("tierdex", None, None)
        );
        assert!(s.required_flags().is_empty());
        let s = EngineSpec::parse("tierdex:direct").unwrap();
        assert_eq!(s.tier.as_deref(), Some("direct"));
        assert_eq!(s.required_flags(), vec!["--tier", "--pool-bytes"]);
        let s = EngineSpec::parse("tierdex:mmap-random").unwrap();
        assert_eq!(
            (s.tier.as_deref(), s.madvise.as_deref()),
            (Some("mmap"), Some("random"))
        );
        assert_eq!(s.name, "tierdex:mmap-random");
        assert!(s.access().contains("MADV_RANDOM"));
        let s = EngineSpec::parse("tierdex@split:direct").unwrap();
        assert_eq!(
            (s.layout.as_deref(), s.tier.as_deref(), s.index_key().as_str()),
            (Some("split"), Some("direct"), "tierdex@split")
        );
        assert!(s.access().ends_with("split layout, compressed codec"));
        assert_eq!(s.index_args(), vec!["--layout", "split"]);
        let s = EngineSpec::parse("tierdex@direct+split:ram").unwrap();
        assert_eq!(s.index_key(), "tierdex@split+direct");
        assert_eq!(s.index_args(), vec!["--layout", "split", "--codec", "direct"]);
        assert_eq!(
            EngineSpec::parse("tierdex@direct").unwrap().index_key(),
            "tierdex@direct"
        );
        let s = EngineSpec::parse("tierdex@grouped:mmap-adaptive").unwrap();
        assert_eq!((s.layout.as_deref(), s.index_key().as_str()), (None, "tierdex"));
        assert_eq!(EngineSpec::parse("tierdex:ram").unwrap().index_key(), "tierdex");
        let s = EngineSpec::parse("tierdex@nobloom+split:direct").unwrap();
        assert_eq!(s.index_key(), "tierdex@split+nobloom");
        assert_eq!(s.index_args(), vec!["--layout", "split", "--bloom", "off"]);
        assert!(s.access().ends_with("no phrase filters"));
        let s = EngineSpec::parse("tierdex@noreorder").unwrap();
        assert_eq!(s.index_key(), "tierdex@noreorder");
        assert_eq!(s.index_args(), vec!["--reorder", "off"]);
        assert!(s.access().ends_with("documents in input order"));
        let s = EngineSpec::parse("tierdex@reorder").unwrap();
        assert_eq!(s.index_key(), "tierdex@reorder");
        assert_eq!(s.index_args(), vec!["--reorder", "on"]);
        assert!(s.access().ends_with("documents always reordered"));
        assert!(EngineSpec::parse("tierdex@reorder+noreorder").is_err());
        let s = EngineSpec::parse("lucene:random").unwrap();
        assert_eq!(s.read_advice.as_deref(), Some("random"));
        assert!(EngineSpec::parse("lucene").unwrap().access().contains("NORMAL"));
        let plain = EngineSpec::parse("lucene").unwrap();
        assert!(!plain.bp && plain.index_args().is_empty() && plain.index_key() == "lucene");
        let s = EngineSpec::parse("lucene-bp").unwrap();
        assert_eq!(
            (s.name.as_str(), s.base.as_str(), s.bp, s.program_name()),
            ("lucene-bp", "lucene", true, "lucene")
        );
        assert_eq!(
            (s.index_key().as_str(), s.index_args()),
            ("lucene-bp", vec!["--bp".to_string()])
        );
        assert!(s
            .access()
            .ends_with("reordered by recursive graph bisection (BPIndexReorderer)"));
        let s = EngineSpec::parse("lucene-bp:random").unwrap();
        assert_eq!(
            (s.read_advice.as_deref(), s.index_key().as_str()),
            (Some("random"), "lucene-bp")
        );
        for bad in [
            "elastic",
            "tierdex:ssd",
            "tierdex:direct-random",
            "tierdex:mmap-never",
            "tantivy:random",
            "lucene:x",
            "tierdex@mixed",
            "tierdex@split+grouped",
            "tierdex@direct+compressed",
            "lucene@split",
            "lucene-bp@split",
            "lucene-bp:x",
            "tantivy-bp",
            "tierdex-bp",
        ] {
            assert!(EngineSpec::parse(bad).is_err(), "{bad}");
        }
        let l = EngineSpec::parse_list(&["tierdex,tierdex:ram".into(), "lucene".into()]).unwrap();
        assert_eq!(l.len(), 3);
        assert!(EngineSpec::parse_list(&["tierdex,tierdex".into()]).is_err());
        let l = EngineSpec::parse_list(&["lucene,lucene-bp".into()]).unwrap();
        assert_ne!(l[0].index_key(), l[1].index_key());
        let e = EngineSpec::parse("elastic").unwrap_err().to_string();
        assert!(e.contains("lucene-bp") && e.contains("tierdex-baseline"), "{e}");
    }

    #[test]
    fn structured_probe() {
        let count = |c: u64| Answer {
            count: Some(c),
            ..Default::default()
        };
        assert!(structured_probe_ok(&[count(50), count(0)], 50));
        // JSON read as text: some other count, no error.
        assert!(!structured_probe_ok(&[count(7), count(0)], 50));
        assert!(!structured_probe_ok(&[count(50), count(3)], 50));
        let failed = Answer {
            error: Some("bad query".into()),
            ..Default::default()
        };
        assert!(!structured_probe_ok(&[failed.clone(), failed], 50));
        for l in STRUCTURED_PROBE {
            let (_, json) = l.split_once('\t').unwrap();
            serde_json::from_str::<serde_json::Value>(json).unwrap();
        }
    }

    #[test]
    fn the_baseline_is_its_own_program() {
        // A defect: `tierdex-baseline` ran the current build, because the
        // engines were built once per base name and the baseline was taken
        // for a variant of `tierdex`.
        let current = Engine {
            name: "tierdex".into(),
            spec: EngineSpec::parse("tierdex").unwrap(),
            program: "/bin/tierdex".into(),
        };
        assert!(current.variant(EngineSpec::parse("tierdex-baseline").unwrap()).is_err());
        assert!(current
            .variant(EngineSpec::parse("tierdex-baseline:direct").unwrap())
            .is_err());
        let spec = EngineSpec::parse("tierdex-baseline:direct").unwrap();
        assert_eq!(spec.program_name(), "tierdex-baseline");
        assert_eq!(EngineSpec::parse("tierdex:direct").unwrap().program_name(), "tierdex");
        assert_eq!(EngineSpec::parse("lucene").unwrap().program_name(), "lucene");
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("old-tierdex");
        std::fs::write(&old, b"").unwrap();
        std::env::set_var(BASELINE_BIN, &old);
        let built = Engine::build(spec.program_name(), Path::new("/nonexistent-repo")).unwrap();
        assert_eq!(built.program, old);
        let variant = built.variant(spec).unwrap();
        assert_eq!(variant.program, old);
    }

    #[test]
    fn query_commands_of_variants() {
        let base = Engine {
            name: "tierdex".into(),
            spec: EngineSpec::parse("tierdex").unwrap(),
            program: "/bin/tierdex".into(),
        };
        let args = |e: &Engine, o: &QueryOptions| -> Vec<String> {
            e.query_command(Path::new("/i"), o)
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let o = QueryOptions {
            threads: 1,
            pool_bytes: Some(1 << 27),
            heap_mb: Some(64),
        };
        assert_eq!(args(&base, &o), ["query-stream", "/i", "--threads", "1"]);
        let direct = base.variant(EngineSpec::parse("tierdex:direct").unwrap()).unwrap();
        assert_eq!(
            args(&direct, &o),
            [
                "query-stream",
                "/i",
                "--tier",
                "direct",
                "--pool-bytes",
                "134217728",
                "--threads",
                "1"
            ]
        );
        let random = base.variant(EngineSpec::parse("tierdex:mmap-random").unwrap()).unwrap();
        assert_eq!(
            args(&random, &o),
            [
                "query-stream",
                "/i",
                "--tier",
                "mmap",
                "--madvise",
                "random",
                "--threads",
                "1"
            ]
        );
        assert!(base.variant(EngineSpec::parse("lucene").unwrap()).is_err());
        let lucene = Engine {
            name: "lucene:random".into(),
            spec: EngineSpec::parse("lucene:random").unwrap(),
            program: "/run.sh".into(),
        };
        let cmd = lucene.query_command(Path::new("/i"), &o);
        let envs: Vec<(String, String)> = cmd
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.unwrap_or_default().to_string_lossy().into_owned(),
                )
            })
            .collect();
        assert!(envs.contains(&("TIERDEX_BENCH_HEAP_MB".into(), "64".into())));
        assert!(envs.iter().any(|(k, v)| k == "TIERDEX_BENCH_JAVA_OPTS"
            && v.ends_with("-Dorg.apache.lucene.store.defaultReadAdvice=random")));
    }

    #[test]
    fn lucene_bp_is_lucene_with_bp_indexing() {
        let lucene = Engine {
            name: "lucene".into(),
            spec: EngineSpec::parse("lucene").unwrap(),
            program: "/run.sh".into(),
        };
        let bp = lucene.variant(EngineSpec::parse("lucene-bp").unwrap()).unwrap();
        assert_eq!(bp.program, lucene.program);
        let args = |e: &Engine| -> Vec<String> {
            e.index_command(Path::new("/c.jsonl"), Path::new("/i"), 2, 64, &e.spec.index_args())
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let plain = [
            "index",
            "--corpus",
            "/c.jsonl",
            "--index",
            "/i",
            "--threads",
            "2",
            "--memory-mb",
            "64",
        ];
        assert_eq!(args(&lucene), plain);
        let mut with_bp = plain.to_vec();
        with_bp.push("--bp");
        assert_eq!(args(&bp), with_bp);
        // Queries: the same process as lucene's.
        let o = QueryOptions {
            threads: 1,
            ..Default::default()
        };
        let q = |e: &Engine| -> Vec<String> {
            e.query_command(Path::new("/i"), &o)
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        assert_eq!(q(&bp), q(&lucene));
    }
}
