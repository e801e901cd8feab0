//! `tierdex node` (a node holding cluster replicas) and `tierdex serve
//! --cluster` (a broker): issue #26, see the `tierdex-cluster` crate.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Parser;
use tierdex_cluster::ClusterConfig;

/// Options shared by nodes and brokers.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// Copies JetStream keeps of each shard stream and of the cluster map
    /// (at most the NATS cluster's servers; 3 survives one server lost).
    /// Default: 3 when the NATS server reports a cluster of 3 or more,
    /// else as many servers as it reports (1 alone).
    #[arg(long, env = "TIERDEX_CLUSTER_STREAM_REPLICAS", value_name = "N")]
    cluster_stream_replicas: Option<usize>,
    /// Longest wait for one replica's answer before a broker asks the next
    /// [default: 2000].
    #[arg(long, env = "TIERDEX_CLUSTER_REPLICA_TIMEOUT_MS", value_name = "MS")]
    cluster_replica_timeout_ms: Option<u64>,
    /// How long a node may be away before a broker places its replicas on
    /// other nodes (which replay the shards' streams); a node back sooner
    /// keeps them [default: 60].
    #[arg(long, env = "TIERDEX_CLUSTER_REASSIGN_AFTER_SECS", value_name = "SECS")]
    cluster_reassign_after_secs: Option<u64>,
}

impl ClusterArgs {
    /// Whether any of these options was given (on the command line or in
    /// the environment): a local `serve` refuses them rather than ignore them.
    pub fn any_given(&self) -> bool {
        self.cluster_stream_replicas.is_some()
            || self.cluster_replica_timeout_ms.is_some()
            || self.cluster_reassign_after_secs.is_some()
    }
}

/// `tierdex node`.
#[derive(Debug, Parser)]
pub struct NodeArgs {
    /// NATS servers' URLs (comma-separated).
    #[arg(
        long,
        env = "TIERDEX_CLUSTER",
        value_name = "URLS",
        value_delimiter = ',',
        required = true
    )]
    cluster: Vec<String>,
    /// Where the node's replicas live (one index per replica, DATA/INDEX/UID/SHARD).
    #[arg(long, env = "TIERDEX_DATA")]
    data: PathBuf,
    /// The node's id: stable across restarts, as the cluster map assigns
    /// replicas to it (letters, digits, '-' and '_'). Default: the host
    /// name and the data directory's name.
    #[arg(long, env = "TIERDEX_NODE_ID")]
    id: Option<String>,
    #[command(flatten)]
    opts: ClusterArgs,
}

/// The NATS cluster's size as the server reports it (itself and the
/// client URLs of its peers).
fn servers_reported(client: &async_nats::Client) -> usize {
    let info = client.server_info();
    info.connect_urls.len().max(1)
}

async fn config(urls: &[String], opts: &ClusterArgs) -> Result<ClusterConfig> {
    let mut cfg = ClusterConfig {
        urls: urls.to_vec(),
        stream_replicas: 1,
    };
    cfg.stream_replicas = match opts.cluster_stream_replicas {
        Some(0) => anyhow::bail!("--cluster-stream-replicas must be at least 1"),
        Some(n) => n,
        None => {
            let probe = cfg.connect("tierdex-probe").await.context("connecting to NATS")?;
            let n = servers_reported(&probe).min(3);
            drop(probe);
            n
        }
    };
    Ok(cfg)
}

fn default_id(data: &std::path::Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let dir = data
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    format!("{}-{dir}", host.trim())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Runs a node until SIGTERM or Ctrl-C.
pub fn run(a: NodeArgs) -> Result<()> {
    if a.opts.cluster_replica_timeout_ms.is_some() || a.opts.cluster_reassign_after_secs.is_some() {
        anyhow::bail!(
            "--cluster-replica-timeout-ms and --cluster-reassign-after-secs apply to a broker (`tierdex serve --cluster`), not to a node"
        );
    }
    std::fs::create_dir_all(&a.data).with_context(|| format!("--data {}", a.data.display()))?;
    let id = a.id.clone().unwrap_or_else(|| default_id(&a.data));
    runtime()?.block_on(async {
        let cluster = config(&a.cluster, &a.opts).await?;
        let node = tierdex_cluster::node::Node::start(tierdex_cluster::node::NodeConfig {
            cluster: cluster.clone(),
            id: id.clone(),
            data: a.data.clone(),
        })
        .await
        .with_context(|| format!("starting node {id}"))?;
        eprintln!(
            "node {id} serving replicas from {} (NATS {}, {} stream copies; SIGTERM or Ctrl-C stops)",
            a.data.display(),
            cluster.urls.join(","),
            cluster.stream_replicas
        );
        tierdex_server::termination().await;
        eprintln!("stopping node {id}");
        node.stop().await;
        eprintln!("stopped");
        Ok(())
    })
}

/// Runs a broker on `addr` until SIGTERM or Ctrl-C.
pub fn broker(
    urls: &[String],
    opts: &ClusterArgs,
    addr: SocketAddr,
    insecure: bool,
    guard: tierdex_server::security::Guard,
) -> Result<()> {
    let mut exposure = tierdex_server::ServerConfig::new(PathBuf::new());
    exposure.insecure = insecure;
    exposure.auth = guard.auth.clone();
    let auth = if guard.auth.is_some() {
        "authentication on"
    } else {
        "no authentication"
    };
    tierdex_server::check_exposure(addr, &exposure)?;
    let replica_timeout_ms = opts.cluster_replica_timeout_ms.unwrap_or(2000);
    if replica_timeout_ms == 0 {
        anyhow::bail!("--cluster-replica-timeout-ms must be positive");
    }
    runtime()?.block_on(async {
        let cluster = config(urls, opts).await?;
        let b = tierdex_cluster::broker::Broker::connect(tierdex_cluster::broker::BrokerConfig {
            cluster: cluster.clone(),
            replica_timeout: Duration::from_millis(replica_timeout_ms),
            reassign_after: Duration::from_secs(opts.cluster_reassign_after_secs.unwrap_or(60)),
        })
        .await
        .context("starting the broker")?;
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("listening on {addr}"))?;
        eprintln!(
            "broker of the tierdex cluster at NATS {} serving on http://{}, {auth} (SIGTERM or Ctrl-C stops)",
            cluster.urls.join(","),
            listener.local_addr()?
        );
        axum::serve(listener, tierdex_cluster::broker::router(b, std::sync::Arc::new(guard)))
            .with_graceful_shutdown(tierdex_server::termination())
            .await
            .context("serving")?;
        eprintln!("stopped");
        Ok(())
    })
}

/// `tierdex cluster`.
#[derive(Debug, clap::Subcommand)]
pub enum ClusterCommand {
    /// Start a local cluster on loopback ports: NATS servers with
    /// JetStream, N nodes and a broker, until Ctrl-C or SIGTERM (needs
    /// `nats-server`: `go install github.com/nats-io/nats-server/v2@v2.15.2`).
    Up(UpArgs),
}

/// `tierdex cluster up`.
#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// tierdex nodes to start.
    #[arg(default_value_t = 3)]
    nodes: usize,
    /// Where the NATS servers and the nodes keep their data (kept across runs).
    #[arg(long, default_value = "tierdex-cluster")]
    dir: PathBuf,
    /// NATS servers (3 survive the loss of one).
    #[arg(long, default_value_t = 3)]
    nats: usize,
    /// The broker's address.
    #[arg(long, default_value = "127.0.0.1:9200")]
    addr: SocketAddr,
}

/// Runs `tierdex cluster ...`.
pub fn cluster(cmd: ClusterCommand) -> Result<()> {
    match cmd {
        ClusterCommand::Up(a) => up(a),
    }
}

/// A child process stopped with SIGTERM when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        // SAFETY: sends a signal to a child process this struct owns and has
        // not yet waited for, so its pid cannot have been reused.
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let _ = self.0.wait();
    }
}

fn up(a: UpArgs) -> Result<()> {
    if a.nodes == 0 || a.nats == 0 {
        anyhow::bail!("a cluster needs at least one node and one NATS server");
    }
    let Some(bin) = tierdex_cluster::local::find_nats_server() else {
        anyhow::bail!("no nats-server found: {}", tierdex_cluster::local::INSTALL_HINT);
    };
    let me = std::env::current_exe().context("finding the tierdex binary")?;
    std::fs::create_dir_all(&a.dir).with_context(|| format!("--dir {}", a.dir.display()))?;
    let nats = tierdex_cluster::local::NatsServer::start_cluster(&bin, &a.dir.join("nats"), a.nats)?;
    let urls: Vec<String> = nats.iter().map(|s| s.url()).collect();
    let copies = a.nats.min(3);
    runtime()?.block_on(async {
        let cfg = ClusterConfig {
            urls: urls.clone(),
            stream_replicas: copies,
        };
        let client = cfg.connect("tierdex-cluster-up").await?;
        tierdex_cluster::local::wait_jetstream(&client, Duration::from_secs(30)).await?;
        anyhow::Ok(())
    })?;
    let spawn = |args: Vec<String>| -> Result<Child> {
        std::process::Command::new(&me)
            .args(&args)
            .spawn()
            .map(Child)
            .with_context(|| format!("starting tierdex {}", args.join(" ")))
    };
    let mut children = Vec::new();
    for i in 0..a.nodes {
        children.push(spawn(vec![
            "node".into(),
            "--cluster".into(),
            urls.join(","),
            "--data".into(),
            a.dir.join(format!("node-{i}")).display().to_string(),
            "--id".into(),
            format!("node-{i}"),
            "--cluster-stream-replicas".into(),
            copies.to_string(),
        ])?);
    }
    children.push(spawn(vec![
        "serve".into(),
        "--cluster".into(),
        urls.join(","),
        "--addr".into(),
        a.addr.to_string(),
        "--cluster-stream-replicas".into(),
        copies.to_string(),
    ])?);
    eprintln!(
        "cluster up: {} NATS servers ({}), {} nodes, broker on http://{} (data in {}); Ctrl-C or SIGTERM stops",
        a.nats,
        urls.join(","),
        a.nodes,
        a.addr,
        a.dir.display()
    );
    runtime()?.block_on(tierdex_server::termination());
    eprintln!("stopping the cluster");
    drop(children);
    drop(nats);
    Ok(())
}
