//! NATS servers on loopback, for `tierdex cluster up`, the demo and the
//! tests: finding the `nats-server` binary, starting one server or a
//! cluster of them with JetStream, killing and restarting them.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::{ClusterError, Result};

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
