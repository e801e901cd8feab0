//! NATS servers on loopback, for `tierdex cluster up`, the demo and the
//! tests: finding the `nats-server` binary, starting one server or a
//! cluster of them with JetStream, killing and restarting them.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::broker::{Broker, BrokerConfig};
use crate::node::{Node, NodeConfig};
use crate::{ClusterConfig, ClusterError, Result};

/// Largest message the local servers take (a document's record).
pub const MAX_PAYLOAD: usize = 8 << 20;

/// How to install the server where it is missing.
pub const INSTALL_HINT: &str = "install it with `go install github.com/nats-io/nats-server/v2@v2.15.2` \
    (it lands in $(go env GOPATH)/bin), or name it with NATS_SERVER=/path/to/nats-server";

/// The nats-server binary: `$NATS_SERVER`, then `PATH`, then Go's bin
/// directory (`$GOPATH/bin`, `~/go/bin`).
pub fn find_nats_server() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NATS_SERVER") {
        return Some(PathBuf::from(p));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(gopath) = std::env::var_os("GOPATH") {
        dirs.push(PathBuf::from(gopath).join("bin"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(PathBuf::from(home).join("go/bin"));
    }
    dirs.into_iter().map(|d| d.join("nats-server")).find(|p| p.is_file())
}

/// A port free now on loopback.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// One nats-server process with JetStream, killed when dropped.
pub struct NatsServer {
    bin: PathBuf,
    dir: PathBuf,
    name: String,
    /// Client port.
    pub port: u16,
    /// Route port in a cluster, and the other servers' route ports.
    cluster: Option<(u16, Vec<u16>)>,
    child: Option<Child>,
}

impl NatsServer {
    /// Starts a server named `name` storing JetStream data under `dir`, on
    /// `port` (0: a free one); in a cluster when `cluster` gives its route
    /// port and every server's route ports.
    pub fn start(
        bin: &Path,
        dir: &Path,
        name: &str,
        port: u16,
        cluster: Option<(u16, Vec<u16>)>,
    ) -> Result<NatsServer> {
        let mut s = NatsServer {
            bin: bin.to_path_buf(),
            dir: dir.to_path_buf(),
            name: name.to_string(),
            port: if port == 0 { free_port() } else { port },
            cluster,
            child: None,
        };
        s.restart()?;
        Ok(s)
    }

    /// Starts a cluster of `n` servers under `dir/NAME`.
    pub fn start_cluster(bin: &Path, dir: &Path, n: usize) -> Result<Vec<NatsServer>> {
        let routes: Vec<u16> = (0..n).map(|_| free_port()).collect();
        (0..n)
            .map(|i| {
                let name = format!("nats-{i}");
                let cluster = (n > 1).then(|| (routes[i], routes.clone()));
                NatsServer::start(bin, &dir.join(&name), &name, 0, cluster)
            })
            .collect()
    }

    /// The client URL.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Whether the process runs.
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts the process again (after [`NatsServer::kill`]) with the same
    /// ports and data, and waits until it listens.
    pub fn restart(&mut self) -> Result<()> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| ClusterError::Invalid(format!("{}: {e}", self.dir.display())))?;
        // Documents up to MAX_PAYLOAD (the default is 1 MiB).
        let conf = self.dir.join("nats.conf");
        std::fs::write(&conf, format!("max_payload: {MAX_PAYLOAD}\n"))
            .map_err(|e| ClusterError::Invalid(format!("{}: {e}", conf.display())))?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("-c")
            .arg(&conf)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-n",
                &self.name,
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((own, routes)) = &self.cluster {
            let r: Vec<String> = routes.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
            cmd.args(["--cluster_name", "tierdex"])
                .arg("--cluster")
                .arg(format!("nats://127.0.0.1:{own}"))
                .arg("--routes")
                .arg(r.join(","));
        }
        let child = cmd
            .spawn()
            .map_err(|e| ClusterError::Invalid(format!("starting {}: {e}", self.bin.display())))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                return Err(ClusterError::Nats(format!(
                    "{} did not listen on {}",
                    self.name, self.port
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Kills the process at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits until JetStream answers through `client` (a cluster elects its
/// leader first).
pub async fn wait_jetstream(client: &async_nats::Client, timeout: Duration) -> Result<()> {
    let js = async_nats::jetstream::new(client.clone());
    let deadline = Instant::now() + timeout;
    loop {
        match tokio::time::timeout(Duration::from_secs(2), js.query_account()).await {
            Ok(Ok(_)) => return Ok(()),
            _ if Instant::now() > deadline => {
                return Err(ClusterError::Nats(format!("JetStream not ready within {timeout:?}")))
            }
            _ => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A whole cluster in this process on loopback: NATS servers with
/// JetStream, nodes holding replicas and a broker serving HTTP on a free
/// port (the bench and `tierdex demo --cluster`).
pub struct LocalCluster {
    nats: Vec<NatsServer>,
    /// The nodes, in the order started (ids `{prefix}-{i}`).
    pub nodes: Vec<Node>,
    cfg: ClusterConfig,
    dir: PathBuf,
    prefix: String,
    base: String,
    broker: Arc<Broker>,
    serving: tokio::task::JoinHandle<()>,
}

impl LocalCluster {
    /// Starts `nats` servers (streams get `min(nats, 3)` copies), `nodes`
    /// nodes named `{prefix}-{i}` and a broker, keeping their data under
    /// `dir`; returns once the nodes have announced themselves.
    pub async fn start(
        bin: &Path,
        dir: &Path,
        nats: usize,
        nodes: usize,
        prefix: &str,
        replica_timeout: Duration,
    ) -> Result<LocalCluster> {
        if nats == 0 {
            return Err(ClusterError::Invalid("a cluster needs at least one NATS server".into()));
        }
        let servers = NatsServer::start_cluster(bin, &dir.join("nats"), nats)?;
        let cfg = ClusterConfig {
            urls: servers.iter().map(NatsServer::url).collect(),
            stream_replicas: nats.min(3),
        };
        let client = cfg.connect(prefix).await?;
        wait_jetstream(&client, Duration::from_secs(60)).await?;
        let broker = Broker::connect(BrokerConfig {
            cluster: cfg.clone(),
            replica_timeout,
            reassign_after: Duration::from_secs(60),
        })
        .await?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| ClusterError::Invalid(format!("listening on loopback: {e}")))?;
        let base = format!(
            "http://{}",
            listener
                .local_addr()
                .map_err(|e| ClusterError::Invalid(format!("listening on loopback: {e}")))?
        );
        let router = crate::broker::router(broker.clone(), Default::default());
        let serving = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, router).await {
                tracing::error!("the local broker stopped: {e}");
            }
        });
        let mut c = LocalCluster {
            nats: servers,
            nodes: Vec::new(),
            cfg,
            dir: dir.to_path_buf(),
            prefix: prefix.to_string(),
            base,
            broker,
            serving,
        };
        for _ in 0..nodes {
            c.add_node().await?;
        }
        Ok(c)
    }

    /// Starts one more node; returns once the map lists it as live.
    pub async fn add_node(&mut self) -> Result<()> {
        let id = format!("{}-{}", self.prefix, self.nodes.len());
        let node = Node::start(NodeConfig {
            cluster: self.cfg.clone(),
            id: id.clone(),
            data: self.dir.join(&id),
        })
        .await?;
        self.nodes.push(node);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.broker.map().live_nodes().await?.contains(&id) {
            if Instant::now() > deadline {
                return Err(ClusterError::Nats(format!(
                    "node {id} did not announce itself within 30 s"
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// The broker's HTTP address (`http://127.0.0.1:PORT`).
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The NATS servers' URLs and stream copies.
    pub fn config(&self) -> &ClusterConfig {
        &self.cfg
    }

    /// Stops the broker and the nodes, then the NATS servers.
    pub async fn stop(mut self) {
        self.serving.abort();
        for n in std::mem::take(&mut self.nodes) {
            n.stop().await;
        }
        for s in &mut self.nats {
            s.kill();
        }
    }
}
