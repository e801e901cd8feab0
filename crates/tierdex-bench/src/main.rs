//! `tierdex-bench`: tierdex side by side with Lucene and tantivy.

mod cmd;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Benchmarks tierdex against Lucene and tantivy on the same corpus, queries,
/// analysis and threads.
#[derive(Parser)]
#[command(name = "tierdex-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the engines, index a corpus with each, run the query sets,
    /// measure ranking quality, and write JSON, markdown and charts.
    Compare(cmd::compare::Args),
    /// Print a generated workload over a tierdex index as `MODE<TAB>QUERY`
    /// lines with the category in a third column.
    Workload(cmd::workload::Args),
    /// Memory-limited runs: every engine (and tierdex variant) answers one
    /// cold pass of queries inside a cgroup v1 memory limit (page cache
    /// included) after the page cache was dropped; reports device bytes read
    /// per query, QPS and latency per limit, with charts. Needs root and
    /// cgroup v1; exits with status 77 (skipped) when either is missing.
    Limited(cmd::limited::Args),
    /// Rewrite `limited.md` and the charts from the `limited.json` in a
    /// results directory of `limited`.
    LimitedReport {
        /// The results directory.
        dir: PathBuf,
    },
    /// Result cache: a Zipf query stream over generated workloads and the
    /// command file, replayed through the cache at several sizes, policies,
    /// matchings and shardings (hit rates), then live `query-stream` runs on
    /// the `ram` tier and on `direct` inside a memory limit (QPS, p99).
    Cache(cmd::cache::Args),
    /// Open-loop load against a running `tierdex serve` (loopback only):
    /// Poisson arrivals at each rate of a sweep that stops once the server is
    /// past capacity; latency from the scheduled send time; percentiles per
    /// rate, a capacity estimate and a chart of p99 vs offered rate. Each run
    /// adds a labelled series to the results directory.
    Load(cmd::load::Args),
    /// Two indices served by one `tierdex serve --data` (started here):
    /// the p99 of searches on a quiet index alone and while another index
    /// is written, over alternating rounds, then writes to both at once and
    /// a check that every acknowledged document is in its own index only.
    Isolation(cmd::isolation::Args),
    /// Indexing speed against threads: each engine indexes the same corpus
    /// with 1, 2, 4, ... threads (up to the machine's cores) and the same
    /// memory budget; docs/s, MB/s, peak RSS, the merge's share, the
    /// speed-up over one thread and tierdex over each peer.
    IndexScale(cmd::index_scale::Args),
    /// The maintenance workload (issue #6): from an empty index, equal
    /// batches added and flushed one after the other under each strategy,
    /// with a fixed query set after every flush; cumulative maintenance
    /// time, bytes and mean query time per strategy, with charts.
    Maintenance(cmd::maintenance::Args),
    /// A local cluster (NATS JetStream, nodes, a broker) against one index
    /// of the same documents (issue #26): the command file's counts and
    /// top-10 ids and scores, and aggregations over the TED talks.
    Cluster(cmd::cluster::Args),
    /// A local cluster's query throughput with 1, 2 and 3 nodes (each
    /// joining node replays a copy of every shard) and its indexing
    /// throughput with 1, 2 and 3 shards (issue #26).
    ClusterScale(cmd::cluster_scale::Args),
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let r = match cli.command {
        Cmd::Compare(a) => cmd::compare::run(a),
        Cmd::Workload(a) => cmd::workload::run(a),
        Cmd::Limited(a) => cmd::limited::run(a),
        Cmd::LimitedReport { dir } => cmd::limited::report(&dir),
        Cmd::Cache(a) => cmd::cache::run(a),
        Cmd::Cluster(a) => cmd::cluster::run(a),
        Cmd::ClusterScale(a) => cmd::cluster_scale::run(a),
        Cmd::Load(a) => cmd::load::run(a),
        Cmd::Isolation(a) => cmd::isolation::run(a),
        Cmd::IndexScale(a) => cmd::index_scale::run(a),
        Cmd::Maintenance(a) => cmd::maintenance::run(a),
    };
    if let Err(e) = r {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
