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
    args_override_self = true,
    after_help = "ENDPOINTS:\n  GET  /health, /stats, /metrics (Prometheus)\n  GET|POST /search       q, mode (top_k|top_k_and_count|count), k, highlight, timeout (ms)\n  POST /docs             JSON array or JSON lines of {id,title,body}; ?refresh=true\n  DELETE /docs/{id}, POST /refresh, POST /flush\n  Elasticsearch-compatible: GET|POST /{index}/_search, /{index}/_count (query_string, match,\n    match_phrase, term, bool; size, track_total_hits, highlight, _source), PUT /{index},\n    POST /{index}/_doc, PUT|DELETE /{index}/_doc/{id}, POST /_bulk, /{index}/_bulk, /{index}/_refresh\n  With --data DIR (many indices): PUT|GET|DELETE /{index} (mappings, settings, aliases),\n    /{index}/_settings, GET /_cat/indices, /_cat/health, /_cat/aliases, /_cluster/health,\n    POST /_aliases, PUT|DELETE /{index}/_alias/{name}, GET /_alias/{name}; the first write to a\n    new index creates it (--no-auto-create-index: 404)\n  Snapshots (repositories inside --path-repo): PUT|GET|DELETE /_snapshot/{repo},\n    PUT|GET|DELETE /_snapshot/{repo}/{snapshot}, POST /_snapshot/{repo}/{snapshot}/_restore\n\nSECURITY:\n  Writes need Content-Type application/json (or application/x-ndjson), else 415. Requests with an\n  Origin header are refused (403) unless --cors-allow-origin allows that origin.\n  --auth FILE (JSON) names API keys and basic-auth users, each with an argon2 hash and a role:\n    {\"api_keys\": [{\"id\": \"ingest\", \"hash\": \"$argon2id$...\", \"role\": \"write\"}],\n     \"users\":    [{\"name\": \"ada\",   \"hash\": \"$argon2id$...\", \"role\": \"admin\"}]}\n  Roles: read (search, count, stats, GET /), write (read + document writes, refresh),\n  admin (everything: flush, PUT /{index}, /metrics). /health stays open. Clients send\n  `Authorization: ApiKey base64(id:key)` (or `Bearer base64(id:key)`) or `Basic base64(name:password)`;\n  401 without valid credentials, 403 when the role is not enough.\n  `tierdex serve --hash-password < secret` prints a hash; `tierdex serve --new-api-key ID --role write`\n  prints a new key's file entry and the header to send. A non-loopback --addr needs --auth or --insecure."
)]
pub struct Args {
    /// Index directory (one index).
    #[arg(env = "TIERDEX_DIR", required_unless_present_any = ["hash_password", "new_api_key", "data", "cluster"])]
    dir: Option<PathBuf>,
    /// Read options from a TOML file: each key an option's long name
    /// (`refresh_ms = 500`, `data = "/srv/indices"`, `cors_allow_origin =
    /// ["https://app.example"]`, `access_log = true`). Options given on
    /// the command line win over the file, the file over environment
    /// variables (`TIERDEX_` and the name in capitals, e.g.
    /// `TIERDEX_REFRESH_MS`).
    #[arg(long, env = "TIERDEX_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log one line per request (method, path, route, status, time) at
    /// info level, target `tierdex::access`.
    #[arg(long, env = "TIERDEX_ACCESS_LOG")]
    access_log: bool,
    /// Log searches that take at least this many milliseconds (index,
    /// time, the query) at warn level, target `tierdex::slowlog`.
    #[arg(long, env = "TIERDEX_SLOW_QUERY_MS", value_name = "MS")]
    slow_query_ms: Option<u64>,
    /// A data directory holding many indices, one per subdirectory
    /// (created if missing): indices are created by `PUT /{index}` or
    /// their first write, listed by `GET /_cat/indices`, deleted by
    /// `DELETE /{index}`, and named through aliases (`POST /_aliases`).
    #[arg(long, env = "TIERDEX_DATA", conflicts_with_all = ["dir", "index_name"])]
    data: Option<PathBuf>,
    /// A directory snapshot repositories may be registered in (`PUT
    /// /_snapshot/{repo}` with a location inside it; a relative location is
    /// taken inside the first), as Elasticsearch's `path.repo`. Repeatable
    /// (comma-separated in the environment). Without it no repository can
    /// be registered.
    #[arg(long, env = "TIERDEX_PATH_REPO", value_name = "DIR", value_delimiter = ',')]
    path_repo: Vec<PathBuf>,
    /// With --data: a write to an index that does not exist is a 404
    /// instead of creating it with a dynamic mapping.
    #[arg(long, env = "TIERDEX_NO_AUTO_CREATE_INDEX", requires = "data")]
    no_auto_create_index: bool,
    /// Create an empty index with this strategy if DIR holds none (with
    /// --data: the strategy of new indices unless their settings name one).
    #[arg(long, env = "TIERDEX_CREATE", value_parser = |s: &str| s.parse::<tierdex::update::Strategy>().map_err(|e| e.to_string()))]
    create: Option<tierdex::update::Strategy>,
    /// Serve searches only: no updates, no lock on the index.
    #[arg(long, env = "TIERDEX_READ_ONLY")]
    read_only: bool,
    /// Updates become searchable within this many milliseconds.
    #[arg(long, env = "TIERDEX_REFRESH_MS", default_value_t = 1000)]
    refresh_ms: u64,
    /// Buffered documents before the writer flushes a segment.
    #[arg(long, env = "TIERDEX_BUFFER_DOCS", default_value_t = 10_000)]
    buffer_docs: usize,
    /// Open even though the write-ahead log holds a damaged record, cutting
    /// it there (that batch and every later one are lost; see `tierdex
    /// compact --help`).
    #[arg(long, env = "TIERDEX_TRUNCATE_CORRUPT_LOG", conflicts_with = "read_only")]
    truncate_corrupt_log: bool,
    /// Write requests in progress at once; beyond, 503.
    #[arg(long, env = "TIERDEX_MAX_WRITES", default_value_t = 16)]
    max_writes: usize,
    /// Address to listen on.
    #[arg(long, env = "TIERDEX_ADDR", default_value = "127.0.0.1:9200")]
    addr: SocketAddr,
    /// Query worker threads (default: one per core).
    #[arg(long, env = "TIERDEX_THREADS")]
    threads: Option<usize>,
    /// Searches that may wait for a worker; beyond that the server answers 503
    /// (1000, as Elasticsearch's search queue: it absorbs the sub-second
    /// bursts of work that flushes and merges bring).
    #[arg(long, env = "TIERDEX_QUEUE", default_value_t = 1000)]
    queue: usize,
    /// Largest request body (K, M, G suffixes).
    #[arg(long, env = "TIERDEX_MAX_BODY_BYTES", default_value = "10M", value_parser = parse_bytes)]
    max_body_bytes: usize,
    /// Longest a search waits for its answer unless it says otherwise (ms).
    #[arg(long, env = "TIERDEX_TIMEOUT_MS", default_value_t = 10_000)]
    timeout_ms: u64,
    /// Index name in Elasticsearch paths (default: the directory's name).
    #[arg(long, env = "TIERDEX_INDEX_NAME")]
    index_name: Option<String>,
    /// Largest `timeout` a request may ask for (ms); above it, 400.
    #[arg(long, env = "TIERDEX_MAX_TIMEOUT_MS", default_value_t = 60_000)]
    max_timeout_ms: u64,
    /// Connections open at once; beyond, a 503 and the connection is closed
    /// (lowered to the file-descriptor limit less 256 if that is smaller).
    #[arg(long, env = "TIERDEX_MAX_CONNECTIONS", default_value_t = 1024)]
    max_connections: usize,
    /// Longest a client may take to send a request's head (from the
    /// connection's opening or the request's first byte), and the longest
    /// pause within a body (ms); then the connection is closed.
    #[arg(long, env = "TIERDEX_HEADER_TIMEOUT_MS", default_value_t = 10_000)]
    header_timeout_ms: u64,
    /// Longest a keep-alive connection may stay idle between requests (ms).
    #[arg(long, env = "TIERDEX_IDLE_TIMEOUT_MS", default_value_t = 60_000)]
    idle_timeout_ms: u64,
    /// Authentication file (JSON): API keys and users with argon2 hashes and
    /// roles (see SECURITY below). Without it, anyone who can connect may do
    /// anything.
    #[arg(long, env = "TIERDEX_AUTH", value_name = "FILE")]
    auth: Option<PathBuf>,
    /// Allow a non-loopback --addr without --auth.
    #[arg(long, env = "TIERDEX_INSECURE")]
    insecure: bool,
    /// Allow cross-origin requests from this origin: exact
    /// (`https://app.example`), `*`, or a regular expression between slashes
    /// (`/https://.*\.example\.com/`), as Elasticsearch's
    /// `http.cors.allow-origin`. Repeatable. Without it, every request that
    /// carries an Origin header is refused.
    #[arg(long, env = "TIERDEX_CORS_ALLOW_ORIGIN", value_name = "ORIGIN", value_parser = |s: &str| s.parse::<tierdex_server::OriginRule>())]
    cors_allow_origin: Vec<tierdex_server::OriginRule>,
    /// Methods allowed cross-origin (comma-separated).
    #[arg(
        long,
        env = "TIERDEX_CORS_ALLOW_METHODS",
        value_name = "LIST",
        default_value = "OPTIONS,HEAD,GET,POST,PUT,DELETE"
    )]
    cors_allow_methods: String,
    /// Request headers allowed cross-origin (comma-separated).
    #[arg(
        long,
        env = "TIERDEX_CORS_ALLOW_HEADERS",
        value_name = "LIST",
        default_value = "X-Requested-With,Content-Type,Content-Length,Authorization,Accept,User-Agent,X-Elastic-Client-Meta"
    )]
    cors_allow_headers: String,
    /// Let browsers send credentials with cross-origin requests.
    #[arg(long, env = "TIERDEX_CORS_ALLOW_CREDENTIALS")]
    cors_allow_credentials: bool,
    /// How long browsers may cache a preflight's answer (seconds).
    #[arg(long, env = "TIERDEX_CORS_MAX_AGE_SECS", default_value_t = 1_728_000)]
    cors_max_age_secs: u64,
    /// Read a secret from stdin (one line), print its argon2id hash for the
    /// authentication file, and exit.
    #[arg(long, conflicts_with = "new_api_key")]
    hash_password: bool,
    /// Make a new API key for ID, print its authentication-file entry and
    /// the Authorization header to send, and exit.
    #[arg(long, value_name = "ID")]
    new_api_key: Option<String>,
    /// The role of --new-api-key: read, write or admin.
    #[arg(long, default_value = "read", requires = "new_api_key")]
    role: String,
    /// Serve as a broker of a tierdex cluster (issue #26): the NATS
    /// servers' URLs (comma-separated). The broker holds no index: writes
    /// go to the shards' JetStream streams, searches to the nodes holding
    /// replicas (`tierdex node`). Takes --addr, --auth, --insecure, the
    /// --cors-* and the --cluster-* options; the options of a local index
    /// are refused.
    #[arg(long, env = "TIERDEX_CLUSTER", value_name = "URLS", value_delimiter = ',', conflicts_with_all = [
        "dir", "data", "path_repo", "no_auto_create_index", "create", "read_only", "refresh_ms", "buffer_docs",
        "truncate_corrupt_log", "max_writes", "threads", "queue", "timeout_ms", "index_name", "max_timeout_ms",
        "hash_password", "new_api_key", "tier", "madvise", "pool_bytes", "huge_pages",
        "prefetch_threshold", "phrase_filters", "cache_policy", "cache_bytes", "cache_shards", "cache_match",
        "cache_min_hits", "slow_query_ms", "access_log", "max_connections", "header_timeout_ms",
        "idle_timeout_ms", "max_body_bytes"])]
    cluster: Vec<String>,
    #[command(flatten)]
    cluster_opts: crate::cluster::ClusterArgs,
    #[command(flatten)]
    tier: crate::tier::TierArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
}

/// `--hash-password`: the hash of the secret on stdin.
fn hash_password() -> Result<()> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .context("reading the secret from stdin")?;
    let secret = line.trim_end_matches(['\r', '\n']);
    if secret.is_empty() {
        anyhow::bail!("no secret on stdin (e.g. `tierdex serve --hash-password <<< 'my password'`)");
    }
    println!("{}", tierdex_server::hash_secret(secret)?);
    Ok(())
}

/// `--new-api-key ID --role ROLE`: a new key's file entry and header.
fn new_api_key(id: &str, role: &str) -> Result<()> {
    let role: tierdex_server::Role = role.parse().map_err(anyhow::Error::msg)?;
    if id.is_empty() || id.contains(':') {
        anyhow::bail!("an API key id must be non-empty and without `:`");
    }
    let (secret, encoded) = tierdex_server::new_api_key(id)?;
    let entry = serde_json::json!({
        "id": id,
        "hash": tierdex_server::hash_secret(&secret)?,
        "role": role.name(),
    });
    println!("# add to \"api_keys\" in the authentication file:\n{entry}");
    println!("# clients send (shown once; only the hash is kept):\nAuthorization: ApiKey {encoded}");
    Ok(())
}

/// Comma-separated items parsed one by one.
fn list<T>(flag: &str, s: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>> {
    s.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|i| parse(i).with_context(|| format!("{flag}: `{i}` is not valid")))
        .collect()
}

impl Args {
    /// Log filter directives this command needs beyond the default level.
    pub fn log_directives(&self) -> Vec<&'static str> {
        let mut d = Vec::new();
        if self.access_log {
            d.push("tierdex::access=info");
        }
        if self.slow_query_ms.is_some() {
            d.push("tierdex::slowlog=warn");
        }
        d
    }
}

/// The command line with the options of `serve --config FILE` (or
/// `TIERDEX_CONFIG`) inserted right after `serve`, so that options given
/// on the command line come later and win. Unknown keys, and values that
/// are not a string, number, boolean or list of them, are errors naming
/// the key and the file.
pub fn with_config(args: Vec<std::ffi::OsString>, known: &[String]) -> Result<Vec<std::ffi::OsString>> {
    // The subcommand is the first argument that is not a global option
    // (or the value of one).
    let mut at = 1;
    while at < args.len() {
        let a = args[at].to_string_lossy();
        if a == "--file-mode" || a == "--log-format" {
            at += 2;
        } else if a.starts_with('-') {
            at += 1;
        } else {
            break;
        }
    }
    if args.get(at).is_none_or(|a| a != "serve") {
        return Ok(args);
    }
    let mut path: Option<PathBuf> = None;
    let mut i = at + 1;
    while i < args.len() {
        let a = args[i].to_string_lossy();
        if a == "--config" {
            path = args.get(i + 1).map(PathBuf::from);
        } else if let Some(p) = a.strip_prefix("--config=") {
            path = Some(PathBuf::from(p));
        }
        i += 1;
    }
    let path = match path.or_else(|| std::env::var_os("TIERDEX_CONFIG").map(PathBuf::from)) {
        Some(p) => p,
        None => return Ok(args),
    };
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading the configuration {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("the configuration {} is not TOML", path.display()))?;
    let mut extra = Vec::new();
    for (key, value) in &table {
        let long = key.replace('_', "-");
        if long == "config" || !known.contains(&long) {
            anyhow::bail!(
                "{}: unknown key `{key}` (keys are the long options of `tierdex serve --help`, e.g. refresh_ms)",
                path.display()
            );
        }
        let scalar = |v: &toml::Value| -> Result<String> {
            Ok(match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => anyhow::bail!("{}: `{key}` = {other} is not a string or a number", path.display()),
            })
        };
        match value {
            toml::Value::Boolean(true) => extra.push(format!("--{long}")),
            toml::Value::Boolean(false) => {}
            toml::Value::Array(items) => {
                for v in items {
                    extra.push(format!("--{long}={}", scalar(v)?));
                }
            }
            v => extra.push(format!("--{long}={}", scalar(v)?)),
        }
    }
    let mut out: Vec<std::ffi::OsString> = args[..=at].to_vec();
    out.extend(extra.into_iter().map(Into::into));
    out.extend(args[at + 1..].iter().cloned());
    Ok(out)
}

/// The authentication file of `--auth`, loaded.
fn auth_file(a: &Args) -> Result<Option<std::sync::Arc<tierdex_server::Auth>>> {
    a.auth
        .as_ref()
        .map(|f| {
            Ok(std::sync::Arc::new(
                tierdex_server::Auth::load(f).map_err(anyhow::Error::msg)?,
            ))
        })
        .transpose()
}

/// The CORS rules of the `--cors-*` options.
fn cors(a: &Args) -> Result<tierdex_server::Cors> {
    Ok(tierdex_server::Cors {
        allow_origin: a.cors_allow_origin.clone(),
        allow_methods: list("--cors-allow-methods", &a.cors_allow_methods, |m| {
            m.to_ascii_uppercase().parse().ok()
        })?,
        allow_headers: list("--cors-allow-headers", &a.cors_allow_headers, |h| {
            h.to_ascii_lowercase().parse().ok()
        })?,
        allow_credentials: a.cors_allow_credentials,
        max_age: Duration::from_secs(a.cors_max_age_secs),
    })
}

/// Runs `tierdex serve` until SIGTERM or SIGINT.
pub fn run(a: Args) -> Result<()> {
    if !a.cluster.is_empty() {
        let guard = tierdex_server::security::Guard {
            auth: auth_file(&a)?,
            cors: cors(&a)?,
        };
        return crate::cluster::broker(&a.cluster, &a.cluster_opts, a.addr, a.insecure, guard);
    }
    if a.cluster_opts.any_given() {
        anyhow::bail!(
            "the --cluster-* options (or their TIERDEX_CLUSTER_* variables) apply to a broker: give --cluster URLS too"
        );
    }
    if a.hash_password {
        return hash_password();
    }
    if let Some(id) = &a.new_api_key {
        return new_api_key(id, &a.role);
    }
    let dir = match (&a.dir, &a.data) {
        (Some(d), _) => d.clone(),
        (None, Some(d)) => d.clone(),
        (None, None) => anyhow::bail!("the index directory (or --data DIR) is missing"),
    };
    let threads = a
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    if (a.create.is_none() || a.read_only) && a.data.is_none() {
        existing_dir(dir.to_str().unwrap_or_default()).map_err(anyhow::Error::msg)?;
    }
    if a.refresh_ms == 0 {
        anyhow::bail!("--refresh-ms must be positive");
    }
    if a.timeout_ms > a.max_timeout_ms {
        anyhow::bail!(
            "--timeout-ms {} is above --max-timeout-ms {}",
            a.timeout_ms,
            a.max_timeout_ms
        );
    }
    if a.header_timeout_ms == 0 || a.idle_timeout_ms == 0 || a.max_connections == 0 {
        anyhow::bail!("--header-timeout-ms, --idle-timeout-ms and --max-connections must be positive");
    }
    let cors_options_given = a.cors_allow_credentials
        || a.cors_max_age_secs != 1_728_000
        || a.cors_allow_methods != "OPTIONS,HEAD,GET,POST,PUT,DELETE"
        || a.cors_allow_headers
            != "X-Requested-With,Content-Type,Content-Length,Authorization,Accept,User-Agent,X-Elastic-Client-Meta";
    if a.cors_allow_origin.is_empty() && cors_options_given {
        anyhow::bail!("the --cors-* options take effect only with --cors-allow-origin");
    }
    let mut config = tierdex_server::ServerConfig::new(dir.clone());
    config.data = a.data.clone();
    config.auto_create_index = !a.no_auto_create_index;
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
    config.max_timeout = Duration::from_millis(a.max_timeout_ms);
    config.max_connections = a.max_connections;
    config.header_timeout = Duration::from_millis(a.header_timeout_ms);
    config.idle_timeout = Duration::from_millis(a.idle_timeout_ms);
    config.insecure = a.insecure;
    config.access_log = a.access_log;
    config.slow_query = a.slow_query_ms.map(Duration::from_millis);
    for p in &a.path_repo {
        std::fs::create_dir_all(p).with_context(|| format!("--path-repo {}", p.display()))?;
    }
    config.path_repo = a.path_repo.clone();
    config.auth = auth_file(&a)?;
    config.cors = cors(&a)?;
    tierdex_server::check_exposure(a.addr, &config)?;
    if let Some(n) = a.index_name {
        config.index_name = n;
    }
    let name = match &a.data {
        Some(d) => format!("data directory {}", d.display()),
        None => format!("index [{}]", config.index_name),
    };
    let auth = if config.auth.is_some() {
        "authentication on"
    } else {
        "no authentication"
    };
    let state = tierdex_server::state(config).with_context(|| format!("opening {}", dir.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(tierdex_server::serve(
        state.clone(),
        a.addr,
        |addr| {
            eprintln!("serving {name} on http://{addr} with {threads} query threads, {auth} (SIGTERM or Ctrl-C stops)")
        },
        tierdex_server::termination(),
    ))?;
    if !state.config().read_only {
        eprintln!("flushing the buffers");
        state.flush().context("flushing on shutdown")?;
    }
    eprintln!("stopped");
    Ok(())
}
