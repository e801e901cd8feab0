//! `tierdex`: index corpora, search them, inspect indexes, generate corpora,
//! and run the demo.

mod cache;
mod cluster;
mod demo;
mod demo_cluster;
mod gen;
mod get;
mod index;
mod inspect;
mod lines;
mod progress;
mod query_stream;
mod search;
mod serve;
mod snapshot;
mod tier;
mod update;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A full-text search engine for DRAM, persistent memory and flash.
#[derive(Parser)]
#[command(name = "tierdex", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// More logging (-v: info, -vv: debug); RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Permissions of the index files this command creates, in octal:
    /// owner-only by default; 640 lets the group read (directories get the
    /// matching search bits: 750).
    #[arg(long, global = true, default_value = "600", value_parser = parse_file_mode)]
    file_mode: u32,
    /// Log lines as text or as JSON objects (one per line, with the
    /// time, level, target and fields).
    #[arg(long, global = true, env = "TIERDEX_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Build an index from JSON-lines files (.zst/.gz ok) or text directories.
    Index(index::Args),
    /// Run queries against an index.
    Search(search::Args),
    /// Documents by id, with their stored fields (`_source`), as JSON lines.
    Get(get::Args),
    /// Show an index's segments, files, statistics and terms.
    Inspect(inspect::Args),
    /// Generate a seeded synthetic corpus as JSON lines.
    Gen(gen::Args),
    /// Generate a corpus, index it, run a mixed query workload, report.
    Demo(demo::Args),
    /// Answer `MODE<TAB>QUERY` lines from stdin with JSON lines (benchmark protocol).
    QueryStream(query_stream::Args),
    /// Add (or replace, by id) documents in an index; durable and searchable
    /// when it returns.
    Add(update::AddArgs),
    /// Delete documents by id; durable and searchable when it returns.
    Delete(update::DeleteArgs),
    /// Rewrite the segments holding deleted documents without them.
    Compact(update::CompactArgs),
    /// Take, list or delete snapshots of indices in a repository directory.
    Snapshot(snapshot::SnapshotArgs),
    /// Restore an index from a snapshot into a new directory.
    Restore(snapshot::RestoreArgs),
    /// Serve an index over HTTP/JSON (search, stats, metrics, an
    /// Elasticsearch-compatible search API) until SIGTERM.
    Serve(Box<serve::Args>),
    /// Hold replicas of a tierdex cluster's shards (fed by NATS JetStream)
    /// and answer brokers (`tierdex serve --cluster`) until SIGTERM.
    Node(cluster::NodeArgs),
    /// Local clusters: `tierdex cluster up N` starts NATS, N nodes and a broker.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
}

/// Restores the default SIGPIPE action, so that `tierdex ... | head` ends
/// quietly when the reader goes away instead of panicking on a failed print.
fn quiet_on_closed_pipe() {
    // SAFETY: called first thing in `main`, before any other thread exists;
    // setting a signal's disposition to SIG_DFL installs no handler code.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    quiet_on_closed_pipe();
    let known: Vec<String> = {
        use clap::CommandFactory;
        Cli::command()
            .find_subcommand("serve")
            .map(|c| {
                c.get_arguments()
                    .filter_map(|a| a.get_long().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let args = match serve::with_config(std::env::args_os().collect(), &known) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let cli = Cli::parse_from(args);
    let default = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let mut filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    if let Command::Serve(a) = &cli.command {
        for d in a.log_directives() {
            filter = filter.add_directive(d.parse().expect("a valid directive"));
        }
    }
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if cli.log_format == "json" {
        logs.json().init();
    } else {
        logs.init();
    }
    if let Err(e) = tierdex::storage::set_file_mode(cli.file_mode) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let result = match cli.command {
        Command::Index(a) => index::run(a),
        Command::Search(a) => search::run(a),
        Command::Get(a) => get::run(a),
        Command::Inspect(a) => inspect::run(a),
        Command::Gen(a) => gen::run(a),
        Command::Demo(a) => demo::run(a),
        Command::QueryStream(a) => query_stream::run(a),
        Command::Serve(a) => serve::run(*a),
        Command::Node(a) => cluster::run(a),
        Command::Cluster(c) => cluster::cluster(c),
        Command::Add(a) => update::add(a),
        Command::Delete(a) => update::delete(a),
        Command::Compact(a) => update::compact(a),
        Command::Snapshot(a) => snapshot::run(a),
        Command::Restore(a) => snapshot::restore(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A file mode in octal (`600`, `0640`) that [`tierdex::storage::set_file_mode`] accepts.
fn parse_file_mode(s: &str) -> Result<u32, String> {
    let mode = u32::from_str_radix(s, 8).map_err(|_| format!("`{s}` is not an octal file mode such as 600 or 640"))?;
    if mode & !0o666 != 0 || mode & 0o600 != 0o600 {
        return Err(format!(
            "{s}: the owner must keep read and write, and index files take no execute or special bits"
        ));
    }
    Ok(mode)
}

/// Formats a byte count for people.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// A directory argument that must exist.
pub(crate) fn existing_dir(p: &str) -> Result<PathBuf, String> {
    let path = PathBuf::from(p);
    if path.is_dir() {
        Ok(path)
    } else {
        Err(format!("{p} is not a directory"))
    }
}
