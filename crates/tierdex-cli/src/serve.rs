//! `tierdex serve`: the index over HTTP/JSON (see `tierdex-server`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::existing_dir;
use crate::tier::parse_bytes;

/// Options of `tierdex serve`.
#[derive(clap::Args)]
#[command(
    after_help = "ENDPOINTS:\n  GET  /health, /stats, /metrics (Prometheus)\n  GET|POST /search       q, mode (top_k|top_k_and_count|count), k, highlight, timeout (ms)\n  POST /docs             JSON array or JSON lines of {id,title,body}; ?refresh=true\n  DELETE /docs/{id}, POST /refresh, POST /flush\n  Elasticsearch-compatible: GET|POST /{index}/_search, /{index}/_count (query_string, match,\n    match_phrase, term, bool; size, track_total_hits, highlight, _source), PUT /{index},\n    POST /{index}/_doc, PUT|DELETE /{index}/_doc/{id}, POST /_bulk, /{index}/_bulk, /{index}/_refresh"
)]
pub struct Args {
    /// Index directory.
    dir: PathBuf,
    /// Create an empty index with this strategy if DIR holds none.
    #[arg(long, value_parser = |s: &str| s.parse::<tierdex::update::Strategy>().map_err(|e| e.to_string()))]
    create: Option<tierdex::update::Strategy>,
    /// Serve searches only: no updates, no lock on the index.
    #[arg(long)]
    read_only: bool,
    /// Updates become searchable within this many milliseconds.
    #[arg(long, default_value_t = 1000)]
    refresh_ms: u64,
    /// Buffered documents before the writer flushes a segment.
    #[arg(long, default_value_t = 10_000)]
    buffer_docs: usize,
    /// Open even though the write-ahead log holds a damaged record, cutting
    /// it there (that batch and every later one are lost; see `tierdex
    /// compact --help`).
    #[arg(long, conflicts_with = "read_only")]
    truncate_corrupt_log: bool,
    /// Write requests in progress at once; beyond, 503.
    #[arg(long, default_value_t = 16)]
    max_writes: usize,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:9200")]
    addr: SocketAddr,
    /// Query worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Searches that may wait for a worker; beyond that the server answers 503
    /// (1000, as Elasticsearch's search queue: it absorbs the sub-second
    /// bursts of work that flushes and merges bring).
    #[arg(long, default_value_t = 1000)]
    queue: usize,
    /// Largest request body (K, M, G suffixes).
    #[arg(long, default_value = "10M", value_parser = parse_bytes)]
    max_body_bytes: usize,
    /// Longest a search waits for its answer unless it says otherwise (ms).
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Index name in Elasticsearch paths (default: the directory's name).
    #[arg(long)]
    index_name: Option<String>,
    #[command(flatten)]
    tier: crate::tier::TierArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
}

/// Runs `tierdex serve` until SIGTERM or SIGINT.
pub fn run(a: Args) -> Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    if a.create.is_none() || a.read_only {
        existing_dir(a.dir.to_str().unwrap_or_default()).map_err(anyhow::Error::msg)?;
    }
    if a.refresh_ms == 0 {
        anyhow::bail!("--refresh-ms must be positive");
    }
    let mut config = tierdex_server::ServerConfig::new(a.dir.clone());
    config.read_only = a.read_only;
    config.create = a.create;
    config.refresh_interval = Duration::from_millis(a.refresh_ms);
    config.writer.buffer_docs = a.buffer_docs;
    config.writer.truncate_corrupt_log = a.truncate_corrupt_log;
    config.max_writes = a.max_writes;
    config.threads = threads;
    config.queue = a.queue;
    config.open = a.tier.open_options();
    config.cache = a.cache.build(threads)?.map(|c| *c.config());
    config.max_body_bytes = a.max_body_bytes;
    config.default_timeout = Duration::from_millis(a.timeout_ms);
    if let Some(n) = a.index_name {
        config.index_name = n;
    }
    let name = config.index_name.clone();
    let state = tierdex_server::state(config).with_context(|| format!("opening {}", a.dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(tierdex_server::serve(
        state.clone(),
        a.addr,
        |addr| {
            eprintln!("serving index [{name}] on http://{addr} with {threads} query threads (SIGTERM or Ctrl-C stops)")
        },
        tierdex_server::termination(),
    ))?;
    if state.writer().is_some() {
        eprintln!("flushing the buffer");
        state.flush().context("flushing on shutdown")?;
    }
    eprintln!("stopped");
    Ok(())
}
