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

/// A runnable engine.
#[derive(Debug, Clone)]
pub struct Engine {
    /// `tierdex`, `lucene` or `tantivy`.
    pub name: String,
    program: PathBuf,
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
}

/// One hit of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HitRecord {
    /// External document id.
    pub id: String,
    /// Score.
    pub score: f64,
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

fn run(cmd: &mut Command, what: &str) -> Result<String> {
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
    /// Builds engine `name` from the repository at `repo` and returns it.
    pub fn build(name: &str, repo: &Path) -> Result<Engine> {
        let program = match name {
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
            other => bail!("unknown engine `{other}` (known: {})", ENGINES.join(", ")),
        };
        if !program.exists() {
            bail!("{} was not produced by the build", program.display());
        }
        Ok(Engine {
            name: name.into(),
            program,
        })
    }

    fn is_tierdex(&self) -> bool {
        self.name == "tierdex"
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

    /// Indexes `corpus` (plain JSON lines) into the new directory `dir`.
    pub fn index(&self, corpus: &Path, dir: &Path, threads: usize, memory_mb: usize) -> Result<IndexReport> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        let mut cmd = Command::new(&self.program);
        if self.is_tierdex() {
            cmd.arg("index")
                .arg(corpus)
                .arg("--out")
                .arg(dir)
                .args(["--threads", &threads.to_string(), "--json"]);
        } else {
            cmd.arg("index")
                .arg("--corpus")
                .arg(corpus)
                .arg("--index")
                .arg(dir)
                .args(["--threads", &threads.to_string(), "--memory-mb", &memory_mb.to_string()]);
        }
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
        let mut cmd = Command::new(&self.program);
        if self.is_tierdex() {
            cmd.arg("query-stream").arg(dir);
        } else {
            cmd.arg("query").arg("--index").arg(dir);
        }
        cmd.args(["--threads", &threads.to_string()]);
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
            let feeder = scope.spawn(move || -> std::io::Result<()> {
                let mut w = BufWriter::new(stdin);
                for _ in 0..warmup + passes {
                    for l in lines {
                        w.write_all(l.as_bytes())?;
                        w.write_all(b"\n")?;
                    }
                    w.flush()?;
                }
                Ok(())
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
            // Peak memory while querying, before the process winds down.
            run.peak_rss_kb = vm_hwm_kb(pid).unwrap_or(0);
            feeder.join().expect("feeder thread")?;
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

/// Peak resident set size (VmHWM) of process `pid`, in KiB.
fn vm_hwm_kb(pid: u32) -> Option<u64> {
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
