//! A NATS server (or three) and tierdex nodes on loopback, for the tests.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The nats-server binary: `$NATS_SERVER`, then `PATH`, then Go's bin
/// directory. `None` (the test says so and passes) where there is none.
pub fn nats_server() -> Option<PathBuf> {
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
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A nats-server process, killed on drop.
pub struct Nats {
    pub child: Child,
    pub port: u16,
}

impl Nats {
    /// One JetStream server storing under `dir`; `routes`: the cluster's
    /// other servers' route ports, with this one's own route port.
    pub fn start(bin: &Path, dir: &Path, name: &str, cluster: Option<(u16, &[u16])>) -> Nats {
        let port = free_port();
        let mut cmd = Command::new(bin);
        cmd.args(["-js", "-a", "127.0.0.1", "-n", name, "-p", &port.to_string(), "-sd"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some((own, routes)) = cluster {
            let r: Vec<String> = routes.iter().map(|p| format!("nats://127.0.0.1:{p}")).collect();
            cmd.args([
                "--cluster_name",
                "tierdex-test",
                "--cluster",
                &format!("nats://127.0.0.1:{own}"),
                "--routes",
                &r.join(","),
            ]);
        }
        let child = cmd.spawn().expect("nats-server starts");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Nats { child, port }
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
