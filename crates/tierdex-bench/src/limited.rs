//! Memory-limited runs (DESIGN §3): each engine answers a query stream
//! inside a cgroup v1 memory limit (page cache included) right after the
//! page cache was dropped, one pass, one query at a time, while its device
//! reads are read from `/proc/<pid>/io` after every answer. The results
//! file, a markdown report and charts of bytes read per query and QPS
//! against the memory limit.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, BufWriter, ErrorKind, Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

use crate::commands::BenchQuery;
use crate::engines::{vm_hwm_kb, Answer, Engine, IndexReport, QueryOptions};
use crate::limits::{self, Cgroup, CgroupStats, ProcIo};
use crate::report::Machine;
use crate::stats::percentile;

/// The query sent before the measured pass when there is no warm-up: a
/// count of a term absent from every index.
pub const OPEN_PROBE: &str = "COUNT\tzqxjkvtierdexopenprobe";

/// What `read_bytes` is, for the reports.
pub const COUNTER_NOTE: &str = "device bytes = `read_bytes` of `/proc/<pid>/io` of the query process: bytes it \
     caused to be fetched from the block layer (page-cache misses of read calls and of mmap page faults, \
     read-ahead included, and direct I/O), counted over the measured queries only (opening the index and the \
     warm-up are reported apart). `rchar` counts the bytes asked for through read-like system calls (cache hits \
     included, mmap faults not); `syscr` counts those calls. device reads = reads completed by the block device \
     holding the index while the query was answered (first field of its `/sys/dev/block/<major:minor>/stat`; \
     read-ahead included, merged requests count once). It is device-wide: any other reader of the device in that \
     time counts too (the machine ran nothing else heavy during the runs).";

/// The JVM heap of the Lucene engine under a memory limit (MiB): a quarter
/// of the limit, at least 64 MiB, at most 2048 MiB (run.sh's default,
/// also used without a limit); `fixed` overrides.
pub fn jvm_heap_mb(memory_mb: u64, fixed: Option<u64>) -> u64 {
    match (fixed, memory_mb) {
        (Some(h), _) => h,
        (None, 0) => 2048,
        (None, m) => (m / 4).clamp(64, 2048),
    }
}

/// The rule of [`jvm_heap_mb`], for the reports.
pub const HEAP_RULE: &str = "JVM heap (-Xms = -Xmx, `TIERDEX_BENCH_HEAP_MB`): a quarter of the memory limit, \
     at least 64 MiB and at most 2048 MiB (2048 MiB without a limit); heap, JVM code and metadata and the page \
     cache all count in the limit.";

/// One memory-limited run to make.
pub struct Plan<'a> {
    /// The engine variant.
    pub engine: &'a Engine,
    /// Its index.
    pub index: &'a Path,
    /// The limit in MiB; 0: unlimited (still in a group, to measure).
    pub memory_mb: u64,
    /// Threads, pool, heap.
    pub options: QueryOptions,
    /// Warm-up lines (not measured; disjoint from the measured ones).
    pub warmup: &'a [String],
    /// Measured lines, one pass.
    pub measured: &'a [String],
    /// Where the cgroups go.
    pub cgroup_parent: &'a Path,
    /// Longest a run may take (start, warm-up and measured pass); an engine
    /// still running then is killed and the run reported as `timed-out`
    /// with the queries it answered. `None`: no limit.
    pub time_limit: Option<std::time::Duration>,
}

/// Latency summary of engine-measured times.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Queries summarised.
    pub n: usize,
    /// Mean (µs).
    pub mean_us: f64,
    /// Median (µs).
    pub p50_us: f64,
    /// 99th percentile (µs).
    pub p99_us: f64,
    /// Maximum (µs).
    pub max_us: f64,
    /// Mean device bytes read per query.
    pub read_bytes_per_query: f64,
    /// Mean device reads completed per query (device-wide).
    #[serde(default)]
    pub reads_per_query: f64,
}

impl Summary {
    /// Summarises the queries `idx` of a run.
    pub fn of(run: &Run, idx: &[usize]) -> Summary {
        let idx: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| i < run.answered && !run.failed.get(i).copied().unwrap_or(false))
            .collect();
        let mut us: Vec<f64> = idx.iter().map(|&i| run.elapsed_us[i] as f64).collect();
        us.sort_by(f64::total_cmp);
        let n = us.len();
        if n == 0 {
            return Summary::default();
        }
        Summary {
            n,
            mean_us: us.iter().sum::<f64>() / n as f64,
            p50_us: percentile(&us, 0.5),
            p99_us: percentile(&us, 0.99),
            max_us: us[n - 1],
            read_bytes_per_query: idx.iter().map(|&i| run.read_bytes[i] as f64).sum::<f64>() / n as f64,
            reads_per_query: idx
                .iter()
                .map(|&i| run.block_reads.get(i).copied().unwrap_or(0) as f64)
                .sum::<f64>()
                / n as f64,
        }
    }
}

/// Per-category figures of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CategoryStats {
    /// Query source (`commands`, `generated`).
    pub source: String,
    /// Category.
    pub category: String,
    /// Latency and bytes.
    pub summary: Summary,
}

/// One engine under one memory limit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Run {
    /// Engine variant.
    pub engine: String,
    /// Memory limit (MiB; 0: unlimited).
    pub memory_mb: u64,
    /// `ok`, `oom-killed`, `timed-out` or `failed` (`stopped` marks a run stopped by hand).
    pub outcome: String,
    /// What went wrong, when something did.
    pub detail: String,
    /// The cgroup it ran in.
    pub cgroup: String,
    /// JVM heap (Lucene).
    pub heap_mb: Option<u64>,
    /// tierdex page pool (direct tier).
    pub pool_bytes: Option<u64>,
    /// Warm-up queries sent.
    pub warmup_queries: usize,
    /// Measured queries planned.
    pub measured_queries: usize,
    /// Measured queries answered (fewer when the process died).
    pub answered: usize,
    /// Measured queries the engine answered with an error.
    pub errors: usize,
    /// From start to the first answer (process start, opening the index, first query).
    pub startup_secs: f64,
    /// From start to the end of the warm-up.
    pub setup_secs: f64,
    /// Wall seconds of the measured pass.
    pub wall_secs: f64,
    /// Measured queries answered without error per wall second.
    pub qps: f64,
    /// Over the measured queries answered without error.
    pub latency: Summary,
    /// I/O counters of the measured pass.
    pub measured_io: ProcIo,
    /// I/O counters of the start, the index opening and the warm-up.
    pub setup_io: ProcIo,
    /// `rchar` per measured query.
    pub rchar_per_query: f64,
    /// Read system calls per measured query.
    pub syscr_per_query: f64,
    /// The cgroup's counters at the end (peak usage includes page cache).
    pub memory: CgroupStats,
    /// Peak RSS of the process (KiB), sampled before it exits.
    pub vm_hwm_kb: u64,
    /// Per category.
    pub by_category: Vec<CategoryStats>,
    /// Per measured query: engine-measured microseconds (0 when not answered).
    pub elapsed_us: Vec<u64>,
    /// Per measured query: device bytes read while answering it.
    pub read_bytes: Vec<u64>,
    /// Per measured query: reads the index's block device completed while
    /// it was answered (device-wide, see [`limits::device_reads`]).
    #[serde(default)]
    pub block_reads: Vec<u64>,
    /// Per measured query: the engine answered with an error.
    #[serde(skip)]
    pub failed: Vec<bool>,
    /// Per measured query: the count, when the mode has one.
    #[serde(skip)]
    pub counts: Vec<Option<u64>>,
}

impl Run {
    /// Whether the run answered every measured query.
    pub fn ok(&self) -> bool {
        self.outcome == "ok"
    }

    /// Device bytes per measured query answered without error.
    pub fn bytes_per_query(&self) -> f64 {
        self.latency.read_bytes_per_query
    }
}

/// Keeps the last lines a process writes on stderr.
fn tail_of(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    all.extend_from_slice(&buf[..n]);
                    if all.len() > 64 << 10 {
                        all.drain(..all.len() - (16 << 10));
                    }
                }
            }
        }
        let text = String::from_utf8_lossy(&all).into_owned();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(12)..].join("\n")
    })
}

/// Drops the page cache, starts the engine's query process inside a fresh
/// memory group, sends the warm-up lines, then the measured ones, one at a
/// time, reading the process's I/O counters after every answer. The group
/// is removed on return, whatever happened. A process killed by the OOM
/// killer yields a run with outcome `oom-killed` and the queries it
/// answered; other failures of the engine yield `failed`.
pub fn run(plan: &Plan, progress: &dyn Fn(u64)) -> Result<Run> {
    limits::drop_caches()?;
    let limit = (plan.memory_mb > 0).then_some(plan.memory_mb << 20);
    let cg = Cgroup::create(plan.cgroup_parent, limit)?;
    let mut cmd = cg.wrap(&plan.engine.query_command(plan.index, &plan.options));
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let n = plan.measured.len();
    let mut run = Run {
        engine: plan.engine.name.clone(),
        memory_mb: plan.memory_mb,
        cgroup: cg.name(),
        heap_mb: (plan.engine.spec.base == "lucene")
            .then_some(plan.options.heap_mb)
            .flatten(),
        pool_bytes: (plan.engine.spec.tier.as_deref() == Some("direct"))
            .then_some(plan.options.pool_bytes)
            .flatten(),
        warmup_queries: plan.warmup.len(),
        measured_queries: n,
        elapsed_us: vec![0; n],
        read_bytes: vec![0; n],
        block_reads: vec![0; n],
        failed: vec![false; n],
        counts: vec![None; n],
        ..Default::default()
    };
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {} query", plan.engine.name))?;
    let pid = child.id();
    // The watchdog kills the engine at the deadline (its stdout then ends,
    // so the loop below stops); dropping `stop_watchdog` ends it early.
    let timed_out = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (stop_watchdog, stopped) = std::sync::mpsc::channel::<()>();
    let watchdog = plan.time_limit.map(|limit| {
        let timed_out = timed_out.clone();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(limit) {
                timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                // SAFETY: kill has no memory preconditions; `pid` is our child, not yet reaped
                // (the main thread waits for it only after this thread is stopped or has fired).
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        })
    });
    let tail = tail_of(child.stderr.take().expect("piped stderr"));
    let mut w = BufWriter::new(child.stdin.take().expect("piped stdin"));
    let mut r = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut buf = String::new();
    // One line out, one answer back; `None` when the process is gone.
    let mut ask = |line: &str| -> Result<Option<Answer>> {
        let sent = w
            .write_all(line.as_bytes())
            .and_then(|_| w.write_all(b"\n"))
            .and_then(|_| w.flush());
        match sent {
            Err(e) if e.kind() == ErrorKind::BrokenPipe => return Ok(None),
            other => other.context("writing to the query process")?,
        }
        buf.clear();
        if r.read_line(&mut buf)? == 0 {
            return Ok(None);
        }
        let a: Answer = serde_json::from_str(buf.trim_end()).with_context(|| format!("answer `{}`", buf.trim_end()))?;
        Ok(Some(a))
    };
    let check_group = |first: bool| -> Result<()> {
        if first && !cg.contains(pid) {
            bail!("the query process {pid} is not in cgroup {}", cg.path().display());
        }
        Ok(())
    };

    // Without a warm-up, one query for a term no index holds makes the
    // engine open its index before the measured pass (so opening is not
    // counted as the first query's reads); it warms nothing else.
    let probe = [OPEN_PROBE.to_string()];
    let warmup: &[String] = if plan.warmup.is_empty() { &probe } else { plan.warmup };
    let streamed = (|| -> Result<bool> {
        for (i, l) in warmup.iter().enumerate() {
            if ask(l)?.is_none() {
                return Ok(false);
            }
            if i == 0 {
                run.startup_secs = started.elapsed().as_secs_f64();
            }
            check_group(i == 0)?;
            progress(i as u64 + 1);
        }
        let base = ProcIo::of(pid)?;
        run.setup_io = base;
        run.setup_secs = started.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let mut last = base;
        let mut last_reads = limits::device_reads(plan.index).unwrap_or(0);
        for (i, l) in plan.measured.iter().enumerate() {
            let Some(a) = ask(l)? else {
                run.wall_secs = t0.elapsed().as_secs_f64();
                run.measured_io = last.since(&base);
                return Ok(false);
            };
            let io = ProcIo::of(pid)?;
            check_group(false)?;
            run.elapsed_us[i] = a.elapsed_us;
            run.read_bytes[i] = io.read_bytes.saturating_sub(last.read_bytes);
            if let Some(reads) = limits::device_reads(plan.index) {
                run.block_reads[i] = reads.saturating_sub(last_reads);
                last_reads = reads;
            }
            run.failed[i] = a.error.is_some();
            run.counts[i] = a.count;
            run.answered = i + 1;
            last = io;
            progress((plan.warmup.len() + i) as u64 + 1);
        }
        run.wall_secs = t0.elapsed().as_secs_f64();
        run.measured_io = last.since(&base);
        Ok(true)
    })();
    // Sampled while the process still waits for input.
    run.vm_hwm_kb = vm_hwm_kb(pid).unwrap_or(0);
    drop(stop_watchdog);
    if let Some(w) = watchdog {
        let _ = w.join();
    }
    let timed_out = timed_out.load(std::sync::atomic::Ordering::SeqCst);
    let complete = match streamed {
        Ok(c) => c,
        Err(_) if timed_out => false,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e.context(format!("{} under {} MiB", plan.engine.name, plan.memory_mb)));
        }
    };
    drop(w); // end of input: the engine exits
    let status = child.wait()?;
    let stderr = tail.join().unwrap_or_default();
    run.memory = cg.stats();
    drop(cg);

    run.errors = run.failed[..run.answered].iter().filter(|f| **f).count();
    let ok = run.answered - run.errors;
    run.qps = if run.wall_secs > 0.0 {
        ok as f64 / run.wall_secs
    } else {
        0.0
    };
    let all: Vec<usize> = (0..n).collect();
    run.latency = Summary::of(&run, &all);
    if run.answered > 0 {
        run.rchar_per_query = run.measured_io.rchar as f64 / run.answered as f64;
        run.syscr_per_query = run.measured_io.syscr as f64 / run.answered as f64;
    }
    use std::os::unix::process::ExitStatusExt;
    if complete && status.success() {
        run.outcome = "ok".into();
    } else if timed_out {
        run.outcome = "timed-out".into();
        run.detail = format!(
            "stopped at the time limit of {:.0} s after {} of {n} measured queries",
            plan.time_limit.map_or(0.0, |t| t.as_secs_f64()),
            run.answered
        );
    } else if run.memory.oom_kills > 0 || status.signal() == Some(libc::SIGKILL) {
        run.outcome = "oom-killed".into();
        run.detail = format!(
            "killed by the OOM killer after {} of {n} measured queries ({} OOM kill(s) in the group, {status})",
            run.answered, run.memory.oom_kills
        );
    } else {
        run.outcome = "failed".into();
        run.detail = format!(
            "{status} after {} of {n} measured queries{}",
            run.answered,
            if stderr.is_empty() {
                String::new()
            } else {
                format!("; stderr ends with: {}", stderr.replace('\n', " | "))
            }
        );
    }
    Ok(run)
}

/// Fills in the per-category figures of a run.
pub fn categorize(run: &mut Run, queries: &[BenchQuery]) {
    let mut groups: BTreeMap<(usize, String, String), Vec<usize>> = BTreeMap::new();
    for (i, q) in queries.iter().enumerate() {
        let rank = crate::workload::CATEGORIES
            .iter()
            .position(|c| *c == q.category)
            .map_or(0, |p| p + 10);
        groups
            .entry((
                (q.source != "commands") as usize * 100 + rank,
                q.source.clone(),
                q.category.clone(),
            ))
            .or_default()
            .push(i);
    }
    run.by_category = groups
        .into_iter()
        .map(|((_, source, category), idx)| CategoryStats {
            source,
            category,
            summary: Summary::of(run, &idx),
        })
        .collect();
}

/// An engine variant of a limited benchmark.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct EngineInfo {
    /// Variant name.
    pub name: String,
    /// Engine.
    pub base: String,
    /// Version line.
    pub version: String,
    /// How it reads its index (tier, madvise).
    pub access: String,
    /// Index directory.
    pub index_dir: String,
    /// Bytes of the index.
    pub index_bytes: u64,
    /// Indexing figures when this run built the index.
    pub index: Option<IndexReport>,
}

/// The query sets of a limited benchmark.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Workload {
    /// The command file, if any.
    pub command_file: Option<String>,
    /// Every n-th command-file query measured.
    pub sample: usize,
    /// Generated queries per category.
    pub generated_per_category: usize,
    /// Modes the generated queries cycle through.
    pub modes: Vec<String>,
    /// Seed of the generated queries and of the order.
    pub seed: u64,
    /// Warm-up queries per run.
    pub warmup: usize,
    /// Measured queries per run.
    pub measured: usize,
    /// Measured queries per source.
    pub by_source: BTreeMap<String, usize>,
    /// The generated categories kept (empty: all).
    #[serde(default)]
    pub categories: Vec<String>,
    /// The command-file categories kept (empty: all).
    #[serde(default)]
    pub command_categories: Vec<String>,
}

/// Everything a limited benchmark measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LimitedResults {
    /// Machine.
    pub machine: Machine,
    /// Corpus file.
    pub corpus: String,
    /// Bytes of the corpus file.
    pub corpus_bytes: u64,
    /// Documents.
    pub docs: u64,
    /// Limits run (MiB; 0: unlimited).
    pub limits_mb: Vec<u64>,
    /// Engine variants.
    pub engines: Vec<EngineInfo>,
    /// Engines left out, and why.
    pub left_out: Vec<String>,
    /// Query sets.
    pub workload: Workload,
    /// `read_ahead_kb` of the device holding the indexes.
    pub read_ahead_kb: Option<u64>,
    /// What the byte counters are.
    pub counter: String,
    /// How the JVM heap was chosen.
    pub heap_rule: String,
    /// Share of the limit given to tierdex's direct-tier page pool.
    pub pool_share: f64,
    /// The direct tier's pool without a limit (MiB).
    #[serde(default)]
    pub unlimited_pool_mb: Option<u64>,
    /// The measured queries, in the order they were sent.
    pub queries: Vec<BenchQuery>,
    /// Runs.
    pub runs: Vec<Run>,
    /// Count agreement with the reference tierdex run at the same limit: (limit, engine, compared, equal).
    pub agreement: Vec<(u64, String, usize, usize)>,
    /// Seconds the whole benchmark took.
    pub total_secs: f64,
}

/// "256 MiB", "1 GiB", "unlimited".
pub fn limit_name(mb: u64) -> String {
    match mb {
        0 => "unlimited".into(),
        m if m >= 1024 && m % 1024 == 0 => format!("{} GiB", m / 1024),
        m => format!("{m} MiB"),
    }
}

/// Human bytes.
pub fn bytes(b: f64) -> String {
    let b = b.max(0.0);
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if b >= (1 << 20) as f64 {
        format!("{:.1} MiB", b / (1 << 20) as f64)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

fn ms(us: f64) -> String {
    if us >= 10_000.0 {
        format!("{:.0} ms", us / 1000.0)
    } else if us >= 1000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{us:.0} µs")
    }
}

/// The group's peak usage, marked when it reached the limit.
fn max_memory(r: &Run) -> String {
    let peak = r.memory.max_usage_bytes;
    let at_limit = r.memory_mb > 0 && peak + (64 << 10) >= r.memory_mb << 20;
    format!("{}{}", bytes(peak as f64), if at_limit { " (= limit)" } else { "" })
}

fn ratio(x: f64, reference: f64) -> String {
    if reference > 0.0 && x.is_finite() {
        format!("{:.2}x", x / reference)
    } else {
        "-".into()
    }
}

impl LimitedResults {
    /// The run of `engine` under `mb`.
    pub fn run_of(&self, engine: &str, mb: u64) -> Option<&Run> {
        self.runs.iter().find(|r| r.engine == engine && r.memory_mb == mb)
    }

    /// The tierdex run the ratios refer to under `mb`: plain `tierdex`, else the first tierdex variant.
    pub fn reference(&self, mb: u64) -> Option<&Run> {
        let mut tierdex = self.engines.iter().filter(|e| e.base == "tierdex");
        let first = tierdex.next()?;
        let name = if self.engines.iter().any(|e| e.name == "tierdex") {
            "tierdex"
        } else {
            first.name.as_str()
        };
        self.run_of(name, mb)
    }

    /// Records count agreement of every run under `mb` with the reference run.
    pub fn compute_agreement(&mut self, mb: u64) {
        self.agreement.retain(|a| a.0 != mb);
        let Some(reference) = self.reference(mb).cloned() else {
            return;
        };
        let mut out = Vec::new();
        for r in self
            .runs
            .iter()
            .filter(|r| r.memory_mb == mb && r.engine != reference.engine)
        {
            let (mut n, mut eq) = (0, 0);
            for i in 0..r.answered.min(reference.answered) {
                if let (Some(a), Some(b)) = (reference.counts.get(i).copied().flatten(), r.counts[i]) {
                    n += 1;
                    eq += (a == b) as usize;
                }
            }
            out.push((mb, r.engine.clone(), n, eq));
        }
        self.agreement.extend(out);
    }

    /// The markdown report.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let m = &self.machine;
        let _ = writeln!(s, "## Memory-limited runs: {}\n", self.corpus);
        let _ = writeln!(
            s,
            "{} documents ({} of JSON lines); machine: {} ({} CPUs, {:.0} GiB, Linux {}); whole run {:.0} s.\n",
            self.docs,
            bytes(self.corpus_bytes as f64),
            m.cpu,
            m.cpus,
            m.memory_gib,
            m.kernel,
            self.total_secs
        );
        let smallest = self.limits_mb.iter().copied().filter(|&l| l > 0).min();
        let _ = writeln!(s, "### Engines and indexes\n");
        let _ = writeln!(
            s,
            "| engine | version | index size | index / smallest limit | reads its index through |"
        );
        let _ = writeln!(s, "|---|---|---:|---:|---|");
        let mut small = Vec::new();
        for e in &self.engines {
            let x = smallest.map(|l| e.index_bytes as f64 / (l << 20) as f64);
            if x.is_some_and(|x| x < 8.0) {
                small.push(e.name.clone());
            }
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                e.name,
                e.version,
                bytes(e.index_bytes as f64),
                x.map_or("-".into(), |x| format!(
                    "{x:.1}x{}",
                    if x < 8.0 { " **(< 8x)**" } else { "" }
                )),
                e.access
            );
        }
        if !small.is_empty() {
            let _ = writeln!(
                s,
                "\n**Warning:** the index of {} is smaller than 8x the smallest limit ({}); a bigger corpus is needed for a fair memory-limited run.",
                small.join(", "),
                limit_name(smallest.unwrap_or(0))
            );
        }
        for l in &self.left_out {
            let _ = writeln!(s, "\nLeft out: {l}");
        }
        let w = &self.workload;
        let _ = writeln!(s, "\n### Method\n");
        let _ = writeln!(
            s,
            "- Before every run: `sync; echo 3 > /proc/sys/vm/drop_caches`. The query process starts in a fresh \
             cgroup v1 memory group (`memory.limit_in_bytes` and `memory.memsw.limit_in_bytes` set to the limit; page \
             cache counts), entered before it runs (a shell writes its pid to `cgroup.procs`, then execs the engine); \
             the group is removed after the run. \"unlimited\" runs in a group without a limit."
        );
        let _ = writeln!(
            s,
            "- Queries: {} warm-up queries (for the JIT; drawn from other generated queries and unsampled command-file \
             lines, none of them in the measured set{}), then **one measured pass** over {} queries: {}; in one seeded \
             shuffled order (seed {}), the same for every engine; one query at a time, 1 query thread.",
            w.warmup,
            if w.warmup == 0 {
                "; without a warm-up, one count query for a term no index holds opens the index first, so the \
                 measured reads are the queries' own"
            } else {
                ""
            },
            w.measured,
            w.by_source
                .iter()
                .map(|(k, v)| match k.as_str() {
                    "commands" => format!(
                        "{v} from the command file `{}` (every {}th query{})",
                        w.command_file.as_deref().unwrap_or("-"),
                        w.sample,
                        if w.command_categories.is_empty() {
                            String::new()
                        } else {
                            format!(" of the {} queries", w.command_categories.join(", "))
                        }
                    ),
                    "generated" => format!(
                        "{v} generated ({} per category: {}; modes cycling {})",
                        w.generated_per_category,
                        if w.categories.is_empty() {
                            "single terms by popularity, OR, AND, 2- and 3-term phrases, exclusions, title terms, \
                             phrases pairing a popular term with terms of each popularity"
                                .to_string()
                        } else {
                            w.categories.join(", ")
                        },
                        w.modes.join(", ")
                    ),
                    other => format!("{v} {other}"),
                })
                .collect::<Vec<_>>()
                .join("; "),
            w.seed
        );
        let _ = writeln!(s, "- {}", self.counter);
        let _ = writeln!(
            s,
            "- QPS: measured queries answered without error per wall second of the measured pass (each query pays a \
             pipe round trip and a read of `/proc/<pid>/io`, the same for every engine). Latency: engine-measured per \
             query (p50, p99, max). Max memory: `memory.max_usage_in_bytes` of the group (anonymous memory and page \
             cache), marked \"(= limit)\" when the group reached its limit and the kernel had to reclaim; failcnt: \
             `memory.failcnt` (this kernel may leave it at 0 even when the limit is reached)."
        );
        let _ = writeln!(s, "- {}", self.heap_rule);
        let _ = writeln!(
            s,
            "- tierdex's direct tier gets a page pool of {:.0}% of the limit (`--pool-bytes`){}.",
            self.pool_share * 100.0,
            match self.unlimited_pool_mb {
                Some(mb) if self.limits_mb.contains(&0) => format!(", and {mb} MiB without a limit"),
                _ => String::new(),
            }
        );
        if let Some(ra) = self.read_ahead_kb {
            let _ = writeln!(
                s,
                "- `read_ahead_kb` of the device holding the indexes: {ra} (with MADV_NORMAL an mmap page fault can \
                 read up to this much around the faulting page)."
            );
        }

        // Overview across limits.
        let names: Vec<&str> = self.engines.iter().map(|e| e.name.as_str()).collect();
        for (title, f) in [
            ("Device bytes read per query", 0usize),
            ("Queries per second", 1),
            ("p99 latency", 2),
        ] {
            let _ = writeln!(s, "\n### {title} vs memory limit\n");
            let mut head = "| engine |".to_string();
            let mut rule = "|---|".to_string();
            for l in &self.limits_mb {
                head += &format!(" {} |", limit_name(*l));
                rule += "---:|";
            }
            let _ = writeln!(s, "{head}\n{rule}");
            for n in &names {
                let mut line = format!("| {n} |");
                for l in &self.limits_mb {
                    let cell = match self.run_of(n, *l) {
                        None => "-".into(),
                        Some(r) if r.answered == 0 => r.outcome.clone(),
                        Some(r) => {
                            let v = match f {
                                0 => bytes(r.bytes_per_query()),
                                1 => format!("{:.0}", r.qps),
                                _ => ms(r.latency.p99_us),
                            };
                            if r.ok() {
                                v
                            } else {
                                format!("{v} ({}, {} of {})", r.outcome, r.answered, r.measured_queries)
                            }
                        }
                    };
                    line += &format!(" {cell} |");
                }
                let _ = writeln!(s, "{line}");
            }
        }

        for l in &self.limits_mb {
            let runs: Vec<&Run> = names.iter().filter_map(|n| self.run_of(n, *l)).collect();
            if runs.is_empty() {
                continue;
            }
            let reference = self.reference(*l);
            let _ = writeln!(s, "\n### Memory limit: {}\n", limit_name(*l));
            let _ = writeln!(
                s,
                "| engine | outcome | QPS | p50 | p99 | max | device bytes / query | device reads / query | rchar / query | read calls / query | start + warm-up read | max memory | failcnt | QPS vs tierdex | bytes vs tierdex |"
            );
            let _ = writeln!(
                s,
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &runs {
                let outcome = if r.ok() {
                    "ok".to_string()
                } else {
                    format!("**{}** ({} of {})", r.outcome, r.answered, r.measured_queries)
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {:.0} | {} | {} | {} | {} | {:.1} | {} | {:.1} | {} | {} | {} | {} | {} |",
                    r.engine,
                    outcome,
                    r.qps,
                    ms(r.latency.p50_us),
                    ms(r.latency.p99_us),
                    ms(r.latency.max_us),
                    bytes(r.bytes_per_query()),
                    r.latency.reads_per_query,
                    bytes(r.rchar_per_query),
                    r.syscr_per_query,
                    bytes(r.setup_io.read_bytes as f64),
                    max_memory(r),
                    r.memory.failcnt,
                    reference.map_or("-".into(), |t| ratio(r.qps, t.qps)),
                    reference.map_or("-".into(), |t| ratio(r.bytes_per_query(), t.bytes_per_query())),
                );
            }
            for r in runs.iter().filter(|r| !r.detail.is_empty()) {
                let _ = writeln!(s, "\n- {}: {}", r.engine, r.detail);
            }
            for (_, e, n, eq) in self.agreement.iter().filter(|a| a.0 == *l) {
                if n > eq {
                    let _ = writeln!(
                        s,
                        "\n- counts of {e} differ from {}'s on {} of {n} queries",
                        reference.map_or("tierdex", |r| r.engine.as_str()),
                        n - eq
                    );
                }
            }
            let _ = writeln!(
                s,
                "\nPer category: device bytes per query, device reads per query, p50 latency.\n"
            );
            let mut head = "| source | category | n |".to_string();
            let mut rule = "|---|---|---:|".to_string();
            for r in &runs {
                head += &format!(" {} |", r.engine);
                rule += "---:|";
            }
            let _ = writeln!(s, "{head}\n{rule}");
            let cats: Vec<(String, String)> = runs[0]
                .by_category
                .iter()
                .map(|c| (c.source.clone(), c.category.clone()))
                .collect();
            for (source, cat) in cats {
                let n = runs
                    .iter()
                    .filter_map(|r| r.by_category.iter().find(|c| c.source == source && c.category == cat))
                    .map(|c| c.summary.n)
                    .max()
                    .unwrap_or(0);
                let mut line = format!("| {source} | {cat} | {n} |");
                for r in &runs {
                    match r.by_category.iter().find(|c| c.source == source && c.category == cat) {
                        Some(c) if c.summary.n > 0 => {
                            line += &format!(
                                " {}, {:.1}, {} |",
                                bytes(c.summary.read_bytes_per_query),
                                c.summary.reads_per_query,
                                ms(c.summary.p50_us)
                            )
                        }
                        _ => line += " - |",
                    }
                }
                let _ = writeln!(s, "{line}");
            }
        }
        s
    }

    /// Writes `limited.json`, `limited.md` and the charts into `dir`;
    /// returns the chart file names.
    pub fn write(&self, dir: &Path) -> Result<Vec<String>> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        self.write_json(dir)?;
        let mut charts = Vec::new();
        if !self.runs.is_empty() {
            let memory_mib = (self.machine.memory_gib * 1024.0).max(1.0);
            for (name, title, y_desc, y_bytes, f) in [
                (
                    "bytes-per-query-vs-memory.svg",
                    "device bytes read per query vs memory limit",
                    "device bytes read per query (log)",
                    true,
                    (|r: &Run| r.bytes_per_query()) as fn(&Run) -> f64,
                ),
                (
                    "qps-vs-memory.svg",
                    "queries per second vs memory limit",
                    "queries per second (log)",
                    false,
                    |r: &Run| r.qps,
                ),
            ] {
                let series: Vec<(String, Vec<(f64, f64)>)> = self
                    .engines
                    .iter()
                    .map(|e| {
                        let pts = self
                            .limits_mb
                            .iter()
                            .filter_map(|l| self.run_of(&e.name, *l))
                            .filter(|r| r.ok())
                            .map(|r| {
                                let mib = if r.memory_mb == 0 {
                                    memory_mib
                                } else {
                                    r.memory_mb as f64
                                };
                                (mib.log2(), f(r))
                            })
                            .collect::<Vec<_>>();
                        // Lines join the limits in increasing order, whatever order they ran in.
                        let mut pts = pts;
                        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                        (e.name.clone(), pts)
                    })
                    .collect();
                line_chart(&dir.join(name), title, y_desc, &series, memory_mib.log2(), y_bytes)?;
                charts.push(name.to_string());
            }
        }
        let mut md = self.markdown();
        if !charts.is_empty() {
            md += "\n### Charts\n\n";
            for c in &charts {
                md += &format!("![{c}]({c})\n");
            }
        }
        std::fs::write(dir.join("limited.md"), md)?;
        Ok(charts)
    }

    /// Writes `limited.json` alone (after every run, so a crash keeps the runs so far).
    pub fn write_json(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        std::fs::write(dir.join("limited.json"), serde_json::to_string_pretty(self)?)?;
        Ok(())
    }
}

/// Distinct line colours (Tableau 10 plus two); beyond them, colours repeat
/// but marker shapes still tell engines apart.
const COLORS: [RGBColor; 12] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x00, 0x00, 0x00),
    RGBColor(0xff, 0xd7, 0x00),
];

fn mib_label(log2_mib: f64, unlimited_at: f64) -> String {
    if (log2_mib - unlimited_at).abs() < 0.05 {
        return "unlimited".into();
    }
    let mib = log2_mib.exp2();
    if mib >= 1024.0 {
        format!("{} GiB", (mib / 1024.0 * 10.0).round() / 10.0)
    } else {
        format!("{} MiB", mib.round())
    }
}

/// A line chart: x = log2 of the memory limit in MiB ("unlimited" at the
/// machine's memory), y on a log scale, one line per engine variant.
/// Marker shapes: one per engine family, so that engines stay apart even
/// where colours are close or repeat.
#[derive(Clone, Copy)]
enum Shape {
    Circle,
    Triangle,
    Cross,
}

fn marker_shape(engine: &str) -> Shape {
    if engine.starts_with("lucene") {
        Shape::Triangle
    } else if engine.starts_with("tantivy") {
        Shape::Cross
    } else {
        Shape::Circle
    }
}

fn line_chart(
    path: &Path,
    title: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
    unlimited_at: f64,
    y_bytes: bool,
) -> Result<()> {
    let root = SVGBackend::new(path, (1000, 460)).into_drawing_area();
    let draw = |e| anyhow::anyhow!("drawing {}: {e}", path.display());
    root.fill(&WHITE).map_err(draw)?;
    // The legend gets its own column so it never hides a point.
    let (plot, legend) = root.split_horizontally(760);
    // Both axes are logarithmic: x in log2 MiB already, y mapped to log2
    // (bytes) or log10 (rates) here, on linear axes with labels of the
    // original values. Zeros (nothing read) sit on the bottom line.
    let base: f64 = if y_bytes { 2.0 } else { 10.0 };
    let pts: Vec<(f64, f64)> = series.iter().flat_map(|(_, p)| p.iter().copied()).collect();
    let logs: Vec<f64> = pts.iter().filter(|p| p.1 > 0.0).map(|p| p.1.log(base)).collect();
    let y_lo = logs.iter().copied().fold(f64::INFINITY, f64::min);
    let y_lo = if y_lo.is_finite() { (y_lo - 0.25).floor() } else { 0.0 };
    let y_hi = (logs.iter().copied().fold(y_lo + 2.0, f64::max) + 0.25).ceil();
    let any_zero = pts.iter().any(|p| p.1 <= 0.0);
    let x_lo = pts.iter().map(|p| p.0).fold(f64::INFINITY, f64::min);
    let x_lo = if x_lo.is_finite() { x_lo - 0.5 } else { 6.0 };
    let x_hi = pts.iter().map(|p| p.0).fold(x_lo + 1.0, f64::max) + 0.5;
    let mut ticks: Vec<f64> = pts.iter().map(|p| p.0).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup_by(|a, b| (*a - *b).abs() < 0.05);
    let caption = title.to_string();
    let mut chart = ChartBuilder::on(&plot)
        .caption(caption, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(draw)?;
    let y_fmt = move |v: &f64| {
        let y = base.powf(*v);
        if any_zero && (*v - y_lo).abs() < 1e-9 {
            "0".to_string()
        } else if y_bytes {
            bytes(y)
        } else if y >= 10.0 {
            format!("{y:.0}")
        } else {
            format!("{y:.2}")
        }
    };
    let steps = (y_hi - y_lo).round() as usize;
    chart
        .configure_mesh()
        .x_desc("memory limit (log scale)")
        .y_desc(y_desc)
        .x_labels(0)
        .y_labels(if steps > 12 { steps / 2 + 1 } else { steps + 1 })
        .y_label_formatter(&y_fmt)
        .draw()
        .map_err(draw)?;
    // Tick labels at the limits that were run.
    chart
        .draw_series(ticks.iter().map(|&x| {
            Text::new(
                mib_label(x, unlimited_at),
                (x, y_lo),
                ("sans-serif", 13)
                    .into_font()
                    .color(&BLACK)
                    .pos(plotters::style::text_anchor::Pos::new(
                        plotters::style::text_anchor::HPos::Center,
                        plotters::style::text_anchor::VPos::Top,
                    )),
            )
        }))
        .map_err(draw)?;
    for (j, (name, p)) in series.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        let shape = marker_shape(name);
        let p: Vec<(f64, f64)> = p
            .iter()
            .map(|&(x, y)| (x, if y > 0.0 { y.log(base) } else { y_lo }))
            .collect();
        chart
            .draw_series(LineSeries::new(p.clone(), color.stroke_width(2)))
            .map_err(draw)?;
        for &pt in &p {
            match shape {
                Shape::Circle => chart.draw_series(std::iter::once(Circle::new(pt, 4, color.filled()))),
                Shape::Triangle => chart.draw_series(std::iter::once(TriangleMarker::new(pt, 6, color.filled()))),
                Shape::Cross => chart.draw_series(std::iter::once(Cross::new(pt, 5, color.stroke_width(2)))),
            }
            .map_err(draw)?;
        }
        // The legend entry: a line with the marker, then the name.
        let y = 40 + 22 * j as i32;
        legend
            .draw(&PathElement::new(vec![(8, y), (40, y)], color.stroke_width(2)))
            .map_err(draw)?;
        match shape {
            Shape::Circle => legend.draw(&Circle::new((24, y), 4, color.filled())),
            Shape::Triangle => legend.draw(&TriangleMarker::new((24, y), 6, color.filled())),
            Shape::Cross => legend.draw(&Cross::new((24, y), 5, color.stroke_width(2))),
        }
        .map_err(draw)?;
        legend
            .draw(&Text::new(
                name.clone(),
                (48, y - 7),
                ("sans-serif", 13).into_font().color(&BLACK),
            ))
            .map_err(draw)?;
    }
    root.present().map_err(draw)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(source: &str, category: &str) -> BenchQuery {
        BenchQuery {
            source: source.into(),
            category: category.into(),
            mode: "TOP_10".into(),
            text: "a".into(),
        }
    }

    fn run(engine: &str, mb: u64, us: &[u64], rb: &[u64]) -> Run {
        let n = us.len();
        let mut r = Run {
            engine: engine.into(),
            memory_mb: mb,
            outcome: "ok".into(),
            measured_queries: n,
            answered: n,
            wall_secs: 0.5,
            qps: n as f64 / 0.5,
            elapsed_us: us.to_vec(),
            read_bytes: rb.to_vec(),
            failed: vec![false; n],
            counts: vec![Some(1); n],
            ..Default::default()
        };
        r.latency = Summary::of(&r, &(0..n).collect::<Vec<_>>());
        r
    }

    #[test]
    fn heap_rule() {
        assert_eq!(jvm_heap_mb(256, None), 64);
        assert_eq!(jvm_heap_mb(128, None), 64);
        assert_eq!(jvm_heap_mb(1024, None), 256);
        assert_eq!(jvm_heap_mb(0, None), 2048);
        assert_eq!(jvm_heap_mb(65536, None), 2048);
        assert_eq!(jvm_heap_mb(256, Some(100)), 100);
    }

    #[test]
    fn summaries_skip_failed_and_unanswered_queries() {
        let mut r = run("tierdex", 256, &[10, 20, 30, 1000], &[4096, 0, 8192, 1 << 20]);
        r.failed[3] = true;
        let s = Summary::of(&r, &[0, 1, 2, 3]);
        assert_eq!((s.n, s.p50_us, s.max_us), (3, 20.0, 30.0));
        assert_eq!(s.read_bytes_per_query, 4096.0);
        r.answered = 1;
        assert_eq!(Summary::of(&r, &[0, 1, 2]).n, 1);
        let qs = vec![
            q("commands", "or"),
            q("generated", "term-10"),
            q("generated", "or"),
            q("commands", "or"),
        ];
        let mut r = run("tierdex", 256, &[10, 20, 30, 40], &[1, 2, 3, 5]);
        categorize(&mut r, &qs);
        let cats: Vec<(&str, &str, usize)> = r
            .by_category
            .iter()
            .map(|c| (c.source.as_str(), c.category.as_str(), c.summary.n))
            .collect();
        assert_eq!(
            cats,
            vec![
                ("commands", "or", 2),
                ("generated", "term-10", 1),
                ("generated", "or", 1)
            ]
        );
        assert_eq!(r.by_category[0].summary.read_bytes_per_query, 3.0);
    }

    #[test]
    fn renders_report_and_charts() {
        let qs = vec![q("generated", "term-10"), q("generated", "and")];
        let mut results = LimitedResults {
            corpus: "g.jsonl".into(),
            docs: 1000,
            limits_mb: vec![128, 1024, 0],
            engines: vec![
                EngineInfo {
                    name: "tierdex".into(),
                    base: "tierdex".into(),
                    index_bytes: 3 << 30,
                    ..Default::default()
                },
                EngineInfo {
                    name: "lucene".into(),
                    base: "lucene".into(),
                    index_bytes: 512 << 20,
                    ..Default::default()
                },
            ],
            machine: Machine {
                memory_gib: 24.0,
                ..Default::default()
            },
            counter: COUNTER_NOTE.into(),
            heap_rule: HEAP_RULE.into(),
            pool_share: 0.5,
            read_ahead_kb: Some(8192),
            queries: qs.clone(),
            ..Default::default()
        };
        for (mb, t, l) in [(128, 8192, 65536), (1024, 4096, 16384), (0, 2048, 4096)] {
            let mut a = run("tierdex", mb, &[100, 200], &[t, t]);
            let mut b = run("lucene", mb, &[400, 800], &[l, l]);
            categorize(&mut a, &qs);
            categorize(&mut b, &qs);
            if mb == 128 {
                b.outcome = "oom-killed".into();
                b.detail = "killed by the OOM killer after 1 of 2 measured queries".into();
                b.answered = 1;
                b.counts[0] = Some(2);
            }
            results.runs.push(a);
            results.runs.push(b);
            results.compute_agreement(mb);
        }
        let md = results.markdown();
        assert!(md.contains("### Memory limit: 128 MiB"), "{md}");
        assert!(md.contains("### Memory limit: unlimited"), "{md}");
        assert!(md.contains("**oom-killed** (1 of 2)"), "{md}");
        assert!(md.contains("lucene | ") && md.contains("(< 8x)"), "{md}");
        assert!(md.contains("| 8.00x |"), "{md}");
        assert!(
            md.contains("counts of lucene differ from tierdex's on 1 of 1 queries"),
            "{md}"
        );
        assert!(
            md.contains("| generated | term-10 | 1 | 8.0 KiB, 0.0, 100 µs | 64.0 KiB, 0.0, 400 µs |"),
            "{md}"
        );
        let dir = tempfile::tempdir().unwrap();
        let charts = results.write(dir.path()).unwrap();
        assert_eq!(charts, vec!["bytes-per-query-vs-memory.svg", "qps-vs-memory.svg"]);
        let svg = std::fs::read_to_string(dir.path().join(&charts[0])).unwrap();
        assert!(svg.contains("<svg") && svg.contains("tierdex") && svg.contains("unlimited") && svg.contains("1 GiB"));
        let back: LimitedResults =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("limited.json")).unwrap()).unwrap();
        assert_eq!(back.runs.len(), 6);
        assert!(std::fs::read_to_string(dir.path().join("limited.md"))
            .unwrap()
            .contains("![bytes-per-query-vs-memory.svg]"));
    }

    #[test]
    fn names() {
        assert_eq!(limit_name(0), "unlimited");
        assert_eq!(limit_name(256), "256 MiB");
        assert_eq!(limit_name(2048), "2 GiB");
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(8192.0), "8.0 KiB");
        assert_eq!(bytes((3u64 << 30) as f64), "3.00 GiB");
        assert_eq!(mib_label(8.0, 14.5), "256 MiB");
        assert_eq!(mib_label(10.0, 14.5), "1 GiB");
        assert_eq!(mib_label(14.5, 14.5), "unlimited");
    }
}
