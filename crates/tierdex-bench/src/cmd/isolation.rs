//! `tierdex-bench isolation`: two indices served by one `tierdex serve
//! --data` (issue #23). Searches run on the *quiet* index at a fixed
//! open-loop rate, alone and while a client writes to the *busy* index;
//! the phases alternate over several rounds and the p99 ratio is reported.
//! Then both indices are written at once, and every acknowledged document
//! is looked for in both: it must be in its own index and not the other.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::Serialize;
use tierdex::corpus::gen::{GenOptions, Generator};
use tierdex_bench::load::{self, BulkReport, BulkStream, LoadPlan, RateResult};

/// Options of `tierdex-bench isolation`.
#[derive(clap::Args)]
pub struct Args {
    /// The `tierdex` binary (default: the one next to this program).
    #[arg(long)]
    tierdex: Option<PathBuf>,
    /// Generated documents loaded into each index before the run.
    #[arg(long, default_value_t = 20_000)]
    docs: u64,
    /// Searches per second on the quiet index (Poisson arrivals).
    #[arg(long, default_value_t = 100.0)]
    search_rate: f64,
    /// Documents per second written to the busy index.
    #[arg(long, default_value_t = 500.0)]
    write_docs_per_sec: f64,
    /// Documents per `_bulk` request.
    #[arg(long, default_value_t = 50)]
    batch: usize,
    /// Seconds of each phase.
    #[arg(long, default_value_t = 15.0)]
    duration_secs: f64,
    /// Rounds of the two phases (their order alternates).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Query worker threads of the server.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seed of the documents, queries and arrivals.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Results directory (isolation.json, isolation.md).
    #[arg(long, default_value = "bench/results/isolation")]
    out: PathBuf,
}

/// One round's two phases.
#[derive(Debug, Clone, Serialize)]
struct Round {
    alone: RateResult,
    beside_writes: RateResult,
    writes: BulkReport,
    p99_ratio: f64,
}

/// Where the acknowledged documents of one stream were found.
#[derive(Debug, Clone, Serialize)]
struct Placement {
    stream: String,
    acked: u64,
    in_own_index: u64,
    in_other_index: u64,
}

#[derive(Debug, Clone, Serialize)]
struct Report {
    docs_per_index: u64,
    search_rate: f64,
    write_docs_per_sec: f64,
    batch: usize,
    duration_secs: f64,
    threads: usize,
    rounds: Vec<Round>,
    median_p99_ratio: f64,
    placements: Vec<Placement>,
    cross_talk: bool,
}

/// Kills the server (SIGTERM, then SIGKILL) when dropped.
struct ServerProcess(std::process::Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        for _ in 0..100 {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b':' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs `tierdex-bench isolation`.
pub fn run(a: Args) -> Result<()> {
    if a.search_rate <= 0.0 || a.write_docs_per_sec <= 0.0 || a.batch == 0 || a.rounds == 0 || a.duration_secs <= 0.0 {
        bail!("--search-rate, --write-docs-per-sec, --batch, --rounds and --duration-secs must be positive");
    }
    let binary = match &a.tierdex {
        Some(p) => p.clone(),
        None => std::env::current_exe()?
            .parent()
            .context("no directory of this program")?
            .join("tierdex"),
    };
    if !binary.is_file() {
        bail!(
            "{} does not exist: build it (cargo build --release -p tierdex-cli) or pass --tierdex",
            binary.display()
        );
    }
    let work = tempfile::tempdir()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let base = format!("http://127.0.0.1:{port}");
    let log = std::fs::File::create(work.path().join("server.log"))?;
    let server = ServerProcess(
        std::process::Command::new(&binary)
            .args(["serve", "--data"])
            .arg(work.path().join("data"))
            .args([
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--threads",
                &a.threads.to_string(),
            ])
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?,
    );
    eprintln!("generating {} documents", a.docs * 2);
    let gen = Generator::new(GenOptions {
        docs: a.docs * 2,
        seed: a.seed,
        vocab_size: 100_000,
        ..GenOptions::default()
    });
    let texts: Vec<(String, String)> = (0..a.docs * 2)
        .map(|i| {
            let d = gen.doc(i);
            (d.title().to_string(), d.body().to_string())
        })
        .collect();
    let (load_texts, write_texts) = texts.split_at(a.docs as usize);
    let write_texts = Arc::new(write_texts.to_vec());
    // Searches: one or two words of middling frequency, OR-ed.
    let vocab = gen.vocabulary();
    let mut x = a.seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let paths: Vec<String> = (0..1000)
        .map(|i| {
            let w = |r: u64| vocab[(30 + r % 3000) as usize % vocab.len()].clone();
            let q = match i % 2 {
                0 => format!("body:{}", w(next())),
                _ => format!("body:{} body:{}", w(next()), w(next())),
            };
            format!("/quiet/_search?q={}&size=10", encode(&q))
        })
        .collect();

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = rt.block_on(async {
        let client = reqwest::Client::builder().pool_max_idle_per_host(512).build()?;
        let started = Instant::now();
        loop {
            if client
                .get(format!("{base}/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                bail!(
                    "the server did not answer /health within 30 s (log: {})",
                    work.path().join("server.log").display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mapping = serde_json::json!({"mappings": {"properties": {
            "title": {"type": "text"}, "body": {"type": "text"}, "tok": {"type": "keyword"}}}});
        for index in ["quiet", "busy"] {
            client
                .put(format!("{base}/{index}"))
                .json(&mapping)
                .send()
                .await?
                .error_for_status()
                .with_context(|| format!("creating {index}"))?;
            eprintln!("loading {} documents into {index}", a.docs);
            for (c, chunk) in load_texts.chunks(500).enumerate() {
                let mut body = String::new();
                for (j, (title, text)) in chunk.iter().enumerate() {
                    let id = format!("load-{}", c * 500 + j);
                    body += &serde_json::json!({"index": {"_id": id}}).to_string();
                    body.push('\n');
                    body += &serde_json::json!({"title": title, "body": text, "tok": id}).to_string();
                    body.push('\n');
                }
                let v: serde_json::Value = client
                    .post(format!("{base}/{index}/_bulk"))
                    .header("content-type", "application/x-ndjson")
                    .body(body)
                    .send()
                    .await?
                    .error_for_status()?
                    .json()
                    .await?;
                if v["errors"] != false {
                    bail!("loading {index}: {v}");
                }
            }
            client
                .post(format!("{base}/{index}/_refresh"))
                .send()
                .await?
                .error_for_status()?;
        }
        let plan = LoadPlan {
            base: base.clone(),
            paths: paths.clone(),
            duration: Duration::from_secs_f64(a.duration_secs),
            max_in_flight: 1024,
            timeout: Duration::from_secs(10),
            seed: a.seed,
        };
        eprintln!("warming up");
        let warm = LoadPlan {
            duration: Duration::from_secs(5),
            ..plan.clone()
        };
        load::run_rate(&client, &warm, a.search_rate, 0).await?;
        let writes = |index: &str, prefix: String| BulkStream {
            index: index.to_string(),
            prefix,
            docs_per_sec: a.write_docs_per_sec,
            batch: a.batch,
            texts: write_texts.clone(),
        };
        let mut rounds = Vec::new();
        let mut placements = Vec::new();
        let mut offset = 0;
        for r in 0..a.rounds {
            let mut alone = None;
            let mut beside = None;
            let mut report = None;
            for phase in [r % 2, 1 - r % 2] {
                offset += 10_000;
                if phase == 0 {
                    alone = Some(load::run_rate(&client, &plan, a.search_rate, offset).await?);
                    eprintln!("round {r}: quiet alone p99 {:.2} ms", alone.as_ref().unwrap().p99_ms);
                } else {
                    let stop = Arc::new(AtomicBool::new(false));
                    let writer = tokio::spawn(load::run_bulk(
                        client.clone(),
                        base.clone(),
                        writes("busy", format!("r{r}-")),
                        stop.clone(),
                    ));
                    beside = Some(load::run_rate(&client, &plan, a.search_rate, offset).await?);
                    stop.store(true, Ordering::Relaxed);
                    let w = writer.await?;
                    eprintln!(
                        "round {r}: quiet beside {:.0} docs/s written to busy p99 {:.2} ms",
                        w.docs_per_sec,
                        beside.as_ref().unwrap().p99_ms
                    );
                    report = Some(w);
                }
                // Let the last refresh and flush settle between phases.
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let (alone, beside, w) = (alone.unwrap(), beside.unwrap(), report.unwrap());
            rounds.push(Round {
                p99_ratio: beside.p99_ms / alone.p99_ms.max(1e-9),
                alone,
                beside_writes: beside,
                writes: w,
            });
        }
        // Both indices written at once, searches going on.
        eprintln!("writing both indices at once");
        let stop = Arc::new(AtomicBool::new(false));
        let to_quiet = tokio::spawn(load::run_bulk(
            client.clone(),
            base.clone(),
            writes("quiet", "xq-".into()),
            stop.clone(),
        ));
        let to_busy = tokio::spawn(load::run_bulk(
            client.clone(),
            base.clone(),
            writes("busy", "xb-".into()),
            stop.clone(),
        ));
        load::run_rate(&client, &plan, a.search_rate, offset + 10_000).await?;
        stop.store(true, Ordering::Relaxed);
        let (q, b) = (to_quiet.await?, to_busy.await?);
        for index in ["quiet", "busy"] {
            client
                .post(format!("{base}/{index}/_refresh"))
                .send()
                .await?
                .error_for_status()?;
        }
        let mut streams: Vec<(String, &str, &str, Vec<u64>)> = rounds
            .iter()
            .enumerate()
            .map(|(r, round)| (format!("r{r}-"), "busy", "quiet", round.writes.acked.clone()))
            .collect();
        streams.push(("xq-".into(), "quiet", "busy", q.acked.clone()));
        streams.push(("xb-".into(), "busy", "quiet", b.acked.clone()));
        for (prefix, own, other, acked) in &streams {
            placements.push(Placement {
                stream: format!("{prefix}* -> {own}"),
                acked: acked.len() as u64,
                in_own_index: load::count_tokens(&client, &base, own, prefix, acked).await?,
                in_other_index: load::count_tokens(&client, &base, other, prefix, acked).await?,
            });
        }
        let cross_talk = placements
            .iter()
            .any(|p| p.in_own_index != p.acked || p.in_other_index != 0);
        let mut ratios: Vec<f64> = rounds.iter().map(|r| r.p99_ratio).collect();
        ratios.sort_by(f64::total_cmp);
        Ok(Report {
            docs_per_index: a.docs,
            search_rate: a.search_rate,
            write_docs_per_sec: a.write_docs_per_sec,
            batch: a.batch,
            duration_secs: a.duration_secs,
            threads: a.threads,
            median_p99_ratio: ratios[ratios.len() / 2],
            rounds,
            placements,
            cross_talk,
        })
    })?;
    drop(server);
    std::fs::create_dir_all(&a.out)?;
    std::fs::write(a.out.join("isolation.json"), serde_json::to_vec_pretty(&report)?)?;
    let md = markdown(&report);
    std::fs::write(a.out.join("isolation.md"), &md)?;
    println!("{md}");
    if report.cross_talk {
        bail!("cross-talk: an acknowledged document is missing from its index or found in the other");
    }
    Ok(())
}

fn markdown(r: &Report) -> String {
    let mut s = format!(
        "# Two indices, one server\n\n{} generated documents in each index; searches on `quiet` at {}/s \
         (Poisson, 1,000 one- and two-word body queries); `busy` written at {} docs/s in `_bulk` batches of {}; \
         {} s per phase, {} query threads, phases alternating.\n\n\
         | round | quiet alone p50 / p99 (ms) | beside writes p50 / p99 (ms) | writes acked (docs/s) | write p99 (ms) | p99 ratio |\n\
         |---:|---:|---:|---:|---:|---:|\n",
        r.docs_per_index, r.search_rate, r.write_docs_per_sec, r.batch, r.duration_secs, r.threads
    );
    for (i, x) in r.rounds.iter().enumerate() {
        s += &format!(
            "| {i} | {:.2} / {:.2} | {:.2} / {:.2} | {:.0} | {:.1} | {:.2} |\n",
            x.alone.p50_ms,
            x.alone.p99_ms,
            x.beside_writes.p50_ms,
            x.beside_writes.p99_ms,
            x.writes.docs_per_sec,
            x.writes.p99_ms,
            x.p99_ratio
        );
    }
    s += &format!(
        "\nMedian p99 ratio (beside writes / alone): **{:.2}**\n\n",
        r.median_p99_ratio
    );
    s += "| writes | acknowledged | found in own index | found in the other |\n|---|---:|---:|---:|\n";
    for p in &r.placements {
        s += &format!(
            "| {} | {} | {} | {} |\n",
            p.stream, p.acked, p.in_own_index, p.in_other_index
        );
    }
    s += &format!("\nCross-talk: **{}**\n", if r.cross_talk { "FOUND" } else { "none" });
    s
}
