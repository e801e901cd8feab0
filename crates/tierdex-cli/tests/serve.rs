//! `tierdex serve`: its security flags and helpers (issue #20 item 2).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tierdex() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tierdex"))
}

fn index(dir: &std::path::Path) -> String {
    let idx = dir.join("idx");
    let docs = dir.join("docs.jsonl");
    std::fs::write(&docs, "{\"id\": \"a\", \"title\": \"apple\", \"body\": \"an apple\"}\n").unwrap();
    let out = tierdex()
        .args(["add", idx.to_str().unwrap(), docs.to_str().unwrap(), "--create"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    idx.to_str().unwrap().to_string()
}

#[test]
fn a_public_address_without_authentication_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = index(tmp.path());
    let out = tierdex().args(["serve", &idx, "--addr", "0.0.0.0:0"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--auth") && err.contains("--insecure"), "{err}");
    // Bad settings are refused, not ignored.
    for args in [
        vec!["--timeout-ms", "90000"],
        vec!["--cors-allow-credentials"],
        vec!["--cors-allow-origin", "/(/"],
        vec!["--cors-allow-origin", "*", "--cors-allow-methods", "GET,NOT A METHOD"],
        vec!["--auth", "/nonexistent/auth.json"],
        vec!["--max-connections", "0"],
    ] {
        let out = tierdex().args(["serve", &idx]).args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
    }
}

/// The helpers make what the authentication file needs, and a server
/// started with it lets the new key in (with its role) and nobody else.
#[test]
fn helpers_make_a_working_authentication_file() {
    let tmp = tempfile::tempdir().unwrap();
    let idx = index(tmp.path());
    let out = tierdex()
        .args(["serve", "--hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin.take().unwrap().write_all(b"correct horse\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success());
    let user_hash = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(user_hash.starts_with("$argon2id$"), "{user_hash}");
    assert!(!user_hash.contains("correct horse"));
    let out = tierdex()
        .args(["serve", "--new-api-key", "ingest", "--role", "write"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let entry: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        (entry["id"].as_str(), entry["role"].as_str()),
        (Some("ingest"), Some("write"))
    );
    let header = text
        .lines()
        .nth(3)
        .unwrap()
        .strip_prefix("Authorization: ")
        .unwrap()
        .to_string();
    let auth = tmp.path().join("auth.json");
    std::fs::write(
        &auth,
        serde_json::json!({"api_keys": [entry], "users": [{"name": "ada", "hash": user_hash, "role": "read"}]})
            .to_string(),
    )
    .unwrap();
    // A free loopback port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let mut server = tierdex()
        .args([
            "serve",
            &idx,
            "--addr",
            &addr,
            "--auth",
            auth.to_str().unwrap(),
            "--threads",
            "1",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let http = |req: String| -> String {
        let started = Instant::now();
        loop {
            match std::net::TcpStream::connect(&addr) {
                Ok(mut s) => {
                    s.write_all(req.as_bytes()).unwrap();
                    let mut out = String::new();
                    let _ = s.read_to_string(&mut out);
                    return out;
                }
                Err(_) if started.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(50)),
                Err(e) => panic!("{e}"),
            }
        }
    };
    let req = |method: &str, path: &str, auth: Option<&str>, body: &str| {
        let auth = auth.map(|a| format!("authorization: {a}\r\n")).unwrap_or_default();
        format!(
            "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\n{auth}content-length: {}\r\n\r\n{body}",
            body.len()
        )
    };
    let basic = |u: &str, p: &str| {
        use base64::Engine as _;
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
        )
    };
    let doc = "{\"id\": \"b\", \"title\": \"banana\"}";
    let answers = [
        http(req("GET", "/health", None, "")),
        http(req("GET", "/search?q=apple", None, "")),
        http(req("GET", "/search?q=apple", Some(&basic("ada", "correct horse")), "")),
        http(req("POST", "/docs", Some(&basic("ada", "correct horse")), doc)),
        http(req("POST", "/docs", Some(&header), doc)),
        http(req("POST", "/flush", Some(&header), "")),
        http(req("GET", "/search?q=apple", Some(&basic("ada", "wrong")), "")),
    ];
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let status = server.wait().unwrap();
    let mut err = String::new();
    server.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{err}");
    let statuses: Vec<&str> = answers.iter().map(|a| a.get(9..12).unwrap_or(a)).collect();
    assert_eq!(
        statuses,
        ["200", "401", "200", "403", "200", "403", "401"],
        "{answers:#?}"
    );
    assert!(err.contains("authentication on"), "{err}");
}

/// Sends one HTTP/1.1 request to `addr` (retrying the connection while the
/// server starts) and returns the raw answer.
fn http(addr: &str, method: &str, path: &str, body: &str) -> String {
    let req = format!(
        "{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    loop {
        match std::net::TcpStream::connect(addr) {
            Ok(mut s) => {
                s.write_all(req.as_bytes()).unwrap();
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                return out;
            }
            Err(_) if started.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("{e}"),
        }
    }
}

/// `tierdex serve --data DIR` holds many indices, created over HTTP, and
/// finds them again when started anew; it takes no index directory too.
#[test]
fn a_data_directory_is_served_and_found_again() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let out = tierdex()
        .args(["serve", "idx", "--data", data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success(), "an index directory and --data together");
    for round in 0..2 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let mut server = tierdex()
            .args([
                "serve",
                "--data",
                data.to_str().unwrap(),
                "--addr",
                &addr,
                "--threads",
                "1",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if round == 0 {
            let a = http(
                &addr,
                "PUT",
                "/notes",
                "{\"mappings\": {\"properties\": {\"text\": {\"type\": \"text\"}}}}",
            );
            assert!(a.starts_with("HTTP/1.1 200"), "{a}");
            let a = http(
                &addr,
                "PUT",
                "/notes/_doc/n1?refresh=true",
                "{\"text\": \"buy apples\"}",
            );
            assert!(a.starts_with("HTTP/1.1 201"), "{a}");
        }
        let listed = http(&addr, "GET", "/_cat/indices?h=index,docs.count", "");
        let count = http(
            &addr,
            "POST",
            "/notes/_count",
            "{\"query\": {\"match\": {\"text\": \"apples\"}}}",
        );
        // SAFETY: kill only sends a signal to the child this test started.
        unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
        let status = server.wait().unwrap();
        let mut err = String::new();
        server.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(status.success(), "{err}");
        assert!(err.contains("data directory"), "{err}");
        assert!(listed.contains("notes"), "round {round}: {listed}");
        assert!(count.contains("\"count\":1"), "round {round}: {count}");
    }
}

/// `serve --config FILE` (TOML) sets options; the command line wins over
/// it and it over the environment; unknown keys are refused; JSON logs
/// carry the access log and the slow-query log.
#[test]
fn a_configuration_file_and_the_environment_set_options() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let bad = tmp.path().join("bad.toml");
    std::fs::write(&bad, "refresh_millis = 5\n").unwrap();
    let out = tierdex()
        .args(["serve", "--config", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("refresh_millis") && err.contains("bad.toml"), "{err}");
    // From the environment: a refresh interval of 0 is refused.
    let out = tierdex()
        .args(["serve", "--data", data.to_str().unwrap()])
        .env("TIERDEX_REFRESH_MS", "0")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--refresh-ms"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let config = tmp.path().join("tierdex.toml");
    std::fs::write(
        &config,
        format!(
            "data = {:?}\naddr = {addr:?}\nrefresh_ms = 0\nthreads = 1\naccess_log = true\nslow_query_ms = 0\n",
            data.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut server = tierdex()
        .args([
            "--log-format",
            "json",
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--refresh-ms",
            "200",
        ])
        .env("TIERDEX_REFRESH_MS", "0")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let a = http(&addr, "PUT", "/logs/_doc/1?refresh=true", "{\"msg\": \"disk full\"}");
    assert!(a.starts_with("HTTP/1.1 201"), "{a}");
    let a = http(
        &addr,
        "POST",
        "/logs/_search",
        "{\"query\": {\"match\": {\"msg\": \"disk\"}}}",
    );
    assert!(a.starts_with("HTTP/1.1 200"), "{a}");
    // SAFETY: kill only sends a signal to the child this test started.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let status = server.wait().unwrap();
    let mut err = String::new();
    server.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(
        status.success(),
        "the command line's --refresh-ms wins over the file's 0: {err}"
    );
    let lines: Vec<serde_json::Value> = err.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let access: Vec<&serde_json::Value> = lines.iter().filter(|l| l["target"] == "tierdex::access").collect();
    assert!(
        access
            .iter()
            .any(|l| l["fields"]["path"] == "/logs/_search" && l["fields"]["status"] == 200),
        "{err}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["target"] == "tierdex::slowlog" && l["fields"]["index"] == "logs"),
        "{err}"
    );
}
