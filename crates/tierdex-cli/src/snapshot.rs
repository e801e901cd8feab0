//! `tierdex snapshot` and `tierdex restore`: copies of indices in a
//! snapshot repository (a directory; see [`tierdex::snapshot`]), taken
//! while the index stays usable, and restored into new index directories.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use tierdex::snapshot::{Repository, SnapshotInfo, SnapshotSource};
use tierdex::update::{IndexWriter, WriterOptions};

use crate::progress::bar;

/// Options of `tierdex snapshot`.
#[derive(clap::Args)]
pub struct SnapshotArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Take a snapshot of index directories (each kept under its
    /// directory's name). The repository is created if missing. Each index
    /// is flushed first, so the snapshot holds every acknowledged write; an
    /// index a server holds open is snapshotted through the server's API
    /// (`PUT /_snapshot/{repo}/{snapshot}`).
    Create {
        /// The repository (a directory).
        #[arg(long)]
        repo: PathBuf,
        /// The snapshot's name (default: `snap-` and the UTC time).
        #[arg(long)]
        name: Option<String>,
        /// The index directories.
        #[arg(required = true, value_parser = crate::existing_dir)]
        dirs: Vec<PathBuf>,
        /// Copy at most this many bytes per second into the repository
        /// (K, M, G suffixes), leaving the disks their share for searches
        /// and writes; default: no limit.
        #[arg(long, value_parser = crate::tier::parse_bytes)]
        max_bytes_per_sec: Option<usize>,
        /// Print the snapshot's description as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the snapshots of a repository, oldest first.
    List {
        /// The repository (a directory).
        #[arg(long)]
        repo: PathBuf,
        /// Print JSON (one object per snapshot, with its indices and files).
        #[arg(long)]
        json: bool,
    },
    /// Delete a snapshot, and the files no other snapshot holds.
    Delete {
        /// The repository (a directory).
        #[arg(long)]
        repo: PathBuf,
        /// The snapshot.
        name: String,
    },
}

/// Options of `tierdex restore`.
#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The repository (a directory).
    #[arg(long)]
    repo: PathBuf,
    /// The snapshot to restore from.
    snapshot: String,
    /// The index of the snapshot to restore (needed when it holds several).
    #[arg(long)]
    index: Option<String>,
    /// The new index directory (must not exist, or be empty).
    #[arg(long)]
    out: PathBuf,
}

/// Runs `tierdex snapshot`.
pub fn run(a: SnapshotArgs) -> Result<()> {
    match a.action {
        Action::Create {
            repo,
            name,
            dirs,
            max_bytes_per_sec,
            json,
        } => create(repo, name, dirs, max_bytes_per_sec.map(|r| r as u64), json),
        Action::List { repo, json } => list(repo, json),
        Action::Delete { repo, name } => {
            let r = Repository::open(&repo)?;
            r.delete(&name)?;
            eprintln!("deleted snapshot {name} from {}", repo.display());
            Ok(())
        }
    }
}

fn create(repo: PathBuf, name: Option<String>, dirs: Vec<PathBuf>, rate: Option<u64>, json: bool) -> Result<()> {
    let name = name.unwrap_or_else(default_name);
    tierdex::snapshot::check_name(&name)?;
    let mut writers = Vec::with_capacity(dirs.len());
    for d in &dirs {
        let w = IndexWriter::open(d, WriterOptions::default()).with_context(|| {
            format!(
                "opening {} to snapshot it (an index a server holds open is snapshotted through the server: \
                 PUT /_snapshot/REPO/SNAPSHOT)",
                d.display()
            )
        })?;
        writers.push(w);
    }
    let sources: Vec<SnapshotSource<'_>> = dirs
        .iter()
        .zip(&writers)
        .map(|(d, w)| {
            let index = d
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| "index".into());
            SnapshotSource {
                name: index,
                writer: w,
                metadata: serde_json::Value::Null,
            }
        })
        .collect();
    let mut names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    names.sort();
    if names.windows(2).any(|w| w[0] == w[1]) {
        bail!(
            "two of the index directories have the same name; a snapshot keeps each index under its directory's name"
        );
    }
    let r = Repository::create(&repo)?.with_max_bytes_per_sec(rate);
    let pb = bar(Some(0), true, "snapshot");
    let info = r.take(&name, &sources, serde_json::Value::Null, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    if json {
        println!("{}", serde_json::to_string_pretty(&summary(&info))?);
    } else {
        println!(
            "snapshot {name} in {}: {} index(es), {} documents, {} ({} new, the rest shared with earlier snapshots)",
            repo.display(),
            info.indices.len(),
            info.indices.values().map(|i| i.live_docs()).sum::<u64>(),
            crate::human_bytes(info.bytes()),
            crate::human_bytes(info.bytes_added),
        );
    }
    Ok(())
}

fn list(repo: PathBuf, json: bool) -> Result<()> {
    let r = Repository::open(&repo)?;
    let snapshots = r.snapshots()?;
    if json {
        let all: Vec<serde_json::Value> = snapshots.iter().map(summary).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    if snapshots.is_empty() {
        eprintln!("no snapshots in {}", repo.display());
        return Ok(());
    }
    println!(
        "{:<32} {:<24} {:>12} {:>10}  indices",
        "snapshot", "taken (UTC)", "documents", "size"
    );
    for s in &snapshots {
        println!(
            "{:<32} {:<24} {:>12} {:>10}  {}",
            s.name,
            tierdex::aggs::calendar::format_in_zone(s.start_ms as i64, 0),
            s.indices.values().map(|i| i.live_docs()).sum::<u64>(),
            crate::human_bytes(s.bytes()),
            s.indices.keys().cloned().collect::<Vec<_>>().join(",")
        );
    }
    Ok(())
}

/// Runs `tierdex restore`.
pub fn restore(a: RestoreArgs) -> Result<()> {
    let r = Repository::open(&a.repo)?;
    let info = r.snapshot(&a.snapshot)?;
    let index = match (a.index, info.indices.len()) {
        (Some(i), _) => i,
        (None, 1) => info.indices.keys().next().expect("one").clone(),
        (None, _) => bail!(
            "snapshot {} holds {} indices ({}): name one with --index",
            a.snapshot,
            info.indices.len(),
            info.indices.keys().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    let pb = bar(Some(0), true, "restore");
    let restored = r.restore(&a.snapshot, &index, &a.out, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })?;
    pb.finish_and_clear();
    println!(
        "restored index {index} of snapshot {} into {}: {} documents, {}",
        a.snapshot,
        a.out.display(),
        restored.live_docs(),
        crate::human_bytes(restored.bytes())
    );
    Ok(())
}

/// What `list --json` and `create --json` print of a snapshot.
fn summary(s: &SnapshotInfo) -> serde_json::Value {
    serde_json::json!({
        "snapshot": s.name,
        "uuid": s.uuid,
        "start_time": tierdex::aggs::calendar::format_in_zone(s.start_ms as i64, 0),
        "start_time_in_millis": s.start_ms,
        "end_time_in_millis": s.end_ms,
        "bytes": s.bytes(),
        "bytes_added": s.bytes_added,
        "indices": s.indices.iter().map(|(name, i)| (name.clone(), serde_json::json!({
            "documents": i.live_docs(),
            "segments": i.manifest.segments.len(),
            "files": i.files.len(),
            "bytes": i.bytes(),
        }))).collect::<serde_json::Map<_, _>>(),
    })
}

/// `snap-2026.11.27-13.46.22` for now, in UTC.
fn default_name() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let iso = tierdex::aggs::calendar::format_in_zone(ms, 0);
    // 2026-11-27T13:46:22.000Z
    format!("snap-{}-{}", iso[..10].replace('-', "."), iso[11..19].replace(':', "."))
}
