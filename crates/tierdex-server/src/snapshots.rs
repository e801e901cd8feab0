//! Snapshots through Elasticsearch's `_snapshot` API: file-system
//! repositories ([`tierdex::snapshot::Repository`]) registered by name,
//! snapshots of the server's indices taken while writes go on, and their
//! restore into new indices.
//!
//! * `PUT|POST /_snapshot/{repo}` registers a repository (`{"type": "fs",
//!   "settings": {"location": PATH}}`); its location must lie inside one
//!   of [`ServerConfig::path_repo`] (as Elasticsearch's `path.repo`; a
//!   relative location is taken inside the first). `GET /_snapshot[/{repo}]`
//!   lists them, `DELETE /_snapshot/{repo}` forgets one (its files stay).
//!   The registrations are kept in `_repositories.json` in the data
//!   directory (or the served index directory).
//! * `PUT|POST /_snapshot/{repo}/{snapshot}` (`indices`,
//!   `ignore_unavailable`, `metadata`; `?wait_for_completion`) takes a
//!   snapshot; each index is flushed first, so it holds every write
//!   acknowledged before the request. Without `wait_for_completion` the
//!   answer is `{"accepted": true}` and `GET` shows the snapshot
//!   `IN_PROGRESS`, then `SUCCESS` (or `FAILED` with the reason, until
//!   deleted).
//! * `GET /_snapshot/{repo}/{snapshot}` (names, `*` patterns, `_all`,
//!   `_current`), `DELETE /_snapshot/{repo}/{snapshot}`.
//! * `POST /_snapshot/{repo}/{snapshot}/_restore` (`indices`,
//!   `rename_pattern`, `rename_replacement`, `include_aliases`,
//!   `ignore_unavailable`; `?wait_for_completion`) restores indices as new
//!   ones in the data directory, with the settings and (unless told
//!   otherwise) aliases they had. An index of that name must not exist.
//!
//! Keys this subset does not implement are 400s that name them.

use std::collections::BTreeMap;
use std::path::{Component, Path as FsPath, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use tierdex::snapshot::{Repository, SnapshotInfo, SnapshotSource};

use crate::indices::{check_name, matches};
use crate::{ApiError, AppState};

/// The file keeping the registered repositories.
const REGISTRY: &str = "_repositories.json";

/// A registered repository.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RepoEntry {
    /// Its directory, absolute.
    location: PathBuf,
    /// Its location as the client gave it (answered back as given).
    given: String,
    /// Snapshots may be listed and restored, not taken or deleted.
    #[serde(default)]
    readonly: bool,
    /// Most bytes per second a snapshot copies (as given, and parsed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_snapshot_bytes_per_sec: Option<(String, u64)>,
}

/// A snapshot being taken, or one whose taking failed.
#[derive(Debug, Clone)]
struct Job {
    start_ms: u64,
    indices: Vec<String>,
    /// `None` while running; the reason once failed.
    failure: Option<String>,
}

/// The repositories a server knows, and its snapshots under way.
pub struct Snapshots {
    registry: PathBuf,
    repos: RwLock<BTreeMap<String, RepoEntry>>,
    jobs: Mutex<BTreeMap<(String, String), Job>>,
}

impl Snapshots {
    /// The repositories registered in `dir` (none if it has no registry).
    pub fn open(dir: &FsPath) -> tierdex::Result<Snapshots> {
        let registry = dir.join(REGISTRY);
        let repos = match std::fs::read(&registry) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                tierdex::Error::corrupt(
                    &registry,
                    format!("the repository registry is not what this server wrote: {e}"),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(tierdex::Error::io(&registry, e)),
        };
        Ok(Snapshots {
            registry,
            repos: RwLock::new(repos),
            jobs: Mutex::new(BTreeMap::new()),
        })
    }

    fn save(&self, repos: &BTreeMap<String, RepoEntry>) -> Result<(), ApiError> {
        let bytes = serde_json::to_vec_pretty(repos).expect("registry serialises");
        let dir = self.registry.parent().expect("a file in a directory");
        let tmp = dir.join(format!("{REGISTRY}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.registry)?;
            std::fs::File::open(dir)?.sync_all()
        };
        write().map_err(|e| ApiError::engine(tierdex::Error::io(&self.registry, e)))
    }

    fn repo(&self, name: &str) -> Result<RepoEntry, ApiError> {
        self.repos
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
            .ok_or_else(|| repo_missing(name))
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Job>> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn repo_missing(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "repository_missing_exception",
        format!("[{name}] missing"),
    )
}

fn snapshot_missing(repo: &str, name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "snapshot_missing_exception",
        format!("[{repo}:{name}] is missing"),
    )
}

fn read_only() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "read_only",
        "this server was started read-only",
    )
}

/// A blocking repository call off the async executor.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> tierdex::Result<T> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string()))?
        .map_err(ApiError::engine)
}

fn body_object(body: &[u8], what: &str) -> Result<Map<String, Value>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::bad_request(format!("request body is not JSON: {e}")))?;
    match v {
        Value::Object(o) => Ok(o),
        _ => Err(ApiError::bad_request(format!(
            "the body of {what} must be a JSON object"
        ))),
    }
}

fn only_keys(o: &Map<String, Value>, what: &str, allowed: &[&str]) -> Result<(), ApiError> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ApiError::bad_request(format!(
            "[{k}] is not supported in {what} ({})",
            allowed.join(", ")
        ))),
        None => Ok(()),
    }
}

fn flag(o: &Map<String, Value>, key: &str, default: bool) -> Result<bool, ApiError> {
    match o.get(key) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
        Some(v) => Err(ApiError::bad_request(format!("[{key}] must be true or false, not {v}"))),
    }
}

/// `indices` as a list of expressions (a comma-separated string or an
/// array); `None` when absent.
fn index_list(o: &Map<String, Value>) -> Result<Option<Vec<String>>, ApiError> {
    let bad = |v: &Value| ApiError::bad_request(format!("[indices] must be a string or a list of strings, not {v}"));
    match o.get("indices") {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(
            s.split(',')
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
        )),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(|| bad(i)))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(v) => Err(bad(v)),
    }
}

/// URI parameters of the snapshot and restore requests.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// Answer once the snapshot or restore is complete.
    pub wait_for_completion: Option<bool>,
}

type WaitQuery = Result<UrlQuery<WaitParams>, axum::extract::rejection::QueryRejection>;

fn wait(p: WaitQuery) -> Result<bool, ApiError> {
    let UrlQuery(p) = p.map_err(|e| ApiError::bad_request(e.body_text()))?;
    Ok(p.wait_for_completion.unwrap_or(false))
}

/// URI parameters of the repository and listing requests (none).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

type NoQuery = Result<UrlQuery<NoParams>, axum::extract::rejection::QueryRejection>;

fn no_params(p: NoQuery) -> Result<(), ApiError> {
    p.map(|_| ()).map_err(|e| ApiError::bad_request(e.body_text()))
}

/// The absolute location of a repository: inside one of `roots` (a
/// relative one inside the first), with no `..`.
fn resolve_location(given: &str, roots: &[PathBuf], repo: &str) -> Result<PathBuf, ApiError> {
    let exception = |why: String| ApiError::new(StatusCode::BAD_REQUEST, "repository_exception", why);
    if roots.is_empty() {
        return Err(exception(format!(
            "[{repo}] location [{given}] doesn't match any of the locations specified by path.repo because this \
             setting is empty (start the server with --path-repo DIR)"
        )));
    }
    let path = PathBuf::from(given);
    if given.is_empty() || path.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(ApiError::bad_request(format!(
            "[{repo}] location [{given}] must be a path without `..`"
        )));
    }
    let path = if path.is_absolute() { path } else { roots[0].join(path) };
    for root in roots {
        let root = root.canonicalize().unwrap_or_else(|_| root.clone());
        // The location's deepest existing ancestor, resolved, must lie in
        // the root (a symbolic link out of it does not count).
        let mut existing = path.clone();
        let mut rest = Vec::new();
        while !existing.exists() {
            match (existing.file_name(), existing.parent()) {
                (Some(n), Some(p)) => {
                    rest.push(n.to_os_string());
                    existing = p.to_path_buf();
                }
                _ => break,
            }
        }
        let mut resolved = existing.canonicalize().unwrap_or(existing);
        for n in rest.iter().rev() {
            resolved.push(n);
        }
        if resolved.starts_with(&root) {
            return Ok(resolved);
        }
    }
    Err(exception(format!(
        "[{repo}] location [{given}] doesn't match any of the locations specified by path.repo ({})",
        roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// `PUT|POST /_snapshot/{repo}`: registers a file-system repository.
pub async fn put_repository(
    State(state): State<Arc<AppState>>,
    Path(repo): Path<String>,
    uri: NoQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    no_params(uri)?;
    if state.config.read_only {
        return Err(read_only());
    }
    check_name(&repo, "repository")?;
    let o = body_object(&body, "a repository")?;
    only_keys(&o, "a repository", &["type", "settings"])?;
    match o.get("type").and_then(Value::as_str) {
        Some("fs") => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "[{repo}] repository type [{other}] is not supported (fs)"
            )))
        }
        None => {
            return Err(ApiError::bad_request(format!(
                "[{repo}] the repository needs a [type] (fs)"
            )))
        }
    }
    let settings = match o.get("settings") {
        Some(Value::Object(s)) => s.clone(),
        None => Map::new(),
        Some(v) => return Err(ApiError::bad_request(format!("[settings] must be an object, not {v}"))),
    };
    only_keys(
        &settings,
        "an fs repository's settings",
        &["location", "readonly", "max_snapshot_bytes_per_sec"],
    )?;
    let rate = match settings.get("max_snapshot_bytes_per_sec") {
        None => None,
        Some(v) => {
            let given = match v {
                Value::String(t) => t.clone(),
                Value::Number(n) => n.to_string(),
                _ => String::new(),
            };
            let bytes = byte_size(&given).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "[max_snapshot_bytes_per_sec] must be a byte size such as 40mb, not {v}"
                ))
            })?;
            Some((given, bytes))
        }
    };
    let given = settings
        .get("location")
        .and_then(Value::as_str)
        .ok_or_else(|| ApiError::bad_request(format!("[{repo}] the fs repository needs [settings.location]")))?
        .to_string();
    let readonly = flag(&settings, "readonly", false)?;
    let location = resolve_location(&given, &state.config.path_repo, &repo)?;
    let at = location.clone();
    // A read-only repository must exist already; otherwise it is made.
    blocking(move || {
        match readonly {
            true => Repository::open(&at),
            false => Repository::create(&at),
        }
        .map(|_| ())
    })
    .await?;
    let s = &state.snapshots;
    let mut repos = s.repos.write().unwrap_or_else(|p| p.into_inner());
    let mut next = repos.clone();
    next.insert(
        repo.clone(),
        RepoEntry {
            location,
            given,
            readonly,
            max_snapshot_bytes_per_sec: rate,
        },
    );
    s.save(&next)?;
    *repos = next;
    tracing::info!("registered snapshot repository [{repo}]");
    Ok(Json(json!({ "acknowledged": true })))
}

/// `GET /_snapshot`: every repository.
pub async fn get_repositories_all(state: State<Arc<AppState>>, uri: NoQuery) -> Result<Json<Value>, ApiError> {
    get_repositories(state, Path("_all".into()), uri).await
}

/// `GET /_snapshot/{repo}` (names, patterns, `_all`).
pub async fn get_repositories(
    State(state): State<Arc<AppState>>,
    Path(expr): Path<String>,
    uri: NoQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(uri)?;
    let repos = state.snapshots.repos.read().unwrap_or_else(|p| p.into_inner()).clone();
    let mut out = Map::new();
    for part in expr.split(',') {
        let part = part.trim();
        let mut found = false;
        for (name, e) in &repos {
            if part == "_all" || matches(part, name) {
                let mut settings = json!({ "location": e.given });
                if e.readonly {
                    settings["readonly"] = "true".into();
                }
                if let Some((given, _)) = &e.max_snapshot_bytes_per_sec {
                    settings["max_snapshot_bytes_per_sec"] = given.clone().into();
                }
                out.insert(name.clone(), json!({ "type": "fs", "settings": settings }));
                found = true;
            }
        }
        if !found && part != "_all" && !part.contains('*') {
            return Err(repo_missing(part));
        }
    }
    Ok(Json(Value::Object(out)))
}

/// `DELETE /_snapshot/{repo}`: forgets a repository (its files stay).
pub async fn delete_repository(
    State(state): State<Arc<AppState>>,
    Path(repo): Path<String>,
    uri: NoQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(uri)?;
    if state.config.read_only {
        return Err(read_only());
    }
    let s = &state.snapshots;
    if s.jobs().iter().any(|((r, _), j)| r == &repo && j.failure.is_none()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "repository_conflict_exception",
            format!("[{repo}] a snapshot is being taken in this repository"),
        ));
    }
    let mut repos = s.repos.write().unwrap_or_else(|p| p.into_inner());
    if !repos.contains_key(&repo) {
        return Err(repo_missing(&repo));
    }
    let mut next = repos.clone();
    next.remove(&repo);
    s.save(&next)?;
    *repos = next;
    s.jobs().retain(|(r, _), _| r != &repo);
    Ok(Json(json!({ "acknowledged": true })))
}

/// A snapshot in Elasticsearch's shape.
fn snapshot_json(repo: &str, info: &SnapshotInfo) -> Value {
    let iso = |ms: u64| tierdex::aggs::calendar::format_in_zone(ms as i64, 0);
    let n = info.indices.len();
    let mut v = json!({
        "snapshot": info.name,
        "uuid": info.uuid,
        "repository": repo,
        "version": crate::ES_API_VERSION,
        "indices": info.indices.keys().collect::<Vec<_>>(),
        "data_streams": [],
        "include_global_state": false,
        "state": "SUCCESS",
        "start_time": iso(info.start_ms),
        "start_time_in_millis": info.start_ms,
        "end_time": iso(info.end_ms),
        "end_time_in_millis": info.end_ms,
        "duration_in_millis": info.end_ms.saturating_sub(info.start_ms),
        "failures": [],
        "shards": { "total": n, "failed": 0, "successful": n },
        "feature_states": [],
        "tierdex": {
            "documents": info.indices.values().map(|i| i.live_docs()).sum::<u64>(),
            "bytes": info.bytes(),
            "bytes_added": info.bytes_added,
        },
    });
    if !info.metadata.is_null() {
        v["metadata"] = info.metadata.clone();
    }
    v
}

fn job_json(repo: &str, name: &str, job: &Job) -> Value {
    let n = job.indices.len();
    let mut v = json!({
        "snapshot": name,
        "repository": repo,
        "indices": job.indices,
        "state": if job.failure.is_some() { "FAILED" } else { "IN_PROGRESS" },
        "start_time": tierdex::aggs::calendar::format_in_zone(job.start_ms as i64, 0),
        "start_time_in_millis": job.start_ms,
        "shards": { "total": n, "failed": if job.failure.is_some() { n } else { 0 }, "successful": 0 },
    });
    if let Some(reason) = &job.failure {
        v["reason"] = reason.clone().into();
        v["failures"] = json!([{ "reason": reason }]);
    }
    v
}

/// `PUT|POST /_snapshot/{repo}/{snapshot}`: takes a snapshot.
pub async fn create_snapshot(
    State(state): State<Arc<AppState>>,
    Path((repo, snap)): Path<(String, String)>,
    uri: WaitQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let wait = wait(uri)?;
    if state.config.read_only {
        return Err(read_only());
    }
    let entry = state.snapshots.repo(&repo)?;
    if entry.readonly {
        return Err(ApiError::bad_request(format!("[{repo}] is a read-only repository")));
    }
    tierdex::snapshot::check_name(&snap).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_snapshot_name_exception",
            e.to_string(),
        )
    })?;
    let o = body_object(&body, "a snapshot")?;
    only_keys(
        &o,
        "a snapshot",
        &[
            "indices",
            "ignore_unavailable",
            "include_global_state",
            "metadata",
            "partial",
        ],
    )?;
    if flag(&o, "include_global_state", false)? {
        return Err(ApiError::bad_request(
            "[include_global_state] true is not supported: this server has no global state beyond each index's \
             aliases, which its snapshot keeps",
        ));
    }
    if flag(&o, "partial", false)? {
        return Err(ApiError::bad_request(
            "[partial] true is not supported: an index is snapshotted whole or the snapshot fails",
        ));
    }
    let ignore_unavailable = flag(&o, "ignore_unavailable", false)?;
    let metadata = match o.get("metadata") {
        None | Some(Value::Null) => Value::Null,
        Some(m @ Value::Object(_)) => m.clone(),
        Some(v) => return Err(ApiError::bad_request(format!("[metadata] must be an object, not {v}"))),
    };
    let exprs = index_list(&o)?.unwrap_or_else(|| vec!["_all".into()]);
    let mut handles = BTreeMap::new();
    for e in &exprs {
        match state.indices().resolve(e) {
            Ok(found) => {
                for h in found {
                    handles.insert(h.name().to_string(), h);
                }
            }
            Err(_) if ignore_unavailable => {}
            Err(err) => return Err(err),
        }
    }
    if handles.is_empty() {
        return Err(ApiError::bad_request(format!(
            "[{repo}:{snap}] no index to snapshot ({})",
            exprs.join(",")
        )));
    }
    let names: Vec<String> = handles.keys().cloned().collect();
    let (location, snap2) = (entry.location.clone(), snap.clone());
    let exists = blocking(move || match Repository::open(&location)?.snapshot(&snap2) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == tierdex::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    })
    .await?;
    if exists {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_snapshot_name_exception",
            format!("[{repo}:{snap}] a snapshot with the same name already exists"),
        ));
    }
    {
        let mut jobs = state.snapshots.jobs();
        if jobs.contains_key(&(repo.clone(), snap.clone())) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_snapshot_name_exception",
                format!("[{repo}:{snap}] a snapshot with the same name is being taken or failed (delete it first)"),
            ));
        }
        jobs.insert(
            (repo.clone(), snap.clone()),
            Job {
                start_ms: now_ms(),
                indices: names.clone(),
                failure: None,
            },
        );
    }
    let st = state.clone();
    let (repo2, snap2) = (repo.clone(), snap.clone());
    let task = tokio::task::spawn_blocking(move || -> tierdex::Result<SnapshotInfo> {
        let rate = entry.max_snapshot_bytes_per_sec.as_ref().map(|r| r.1);
        let r = Repository::open(&entry.location)?.with_max_bytes_per_sec(rate);
        let sources: Vec<SnapshotSource<'_>> = handles
            .values()
            .map(|h| {
                let writer = h.writer().expect("a writable server holds writers");
                SnapshotSource {
                    name: h.name().to_string(),
                    writer,
                    metadata: json!({
                        "replicas": h.meta().replicas,
                        "tier": h.meta().tier,
                        "aliases": st.indices().aliases_of(h.name()),
                    }),
                }
            })
            .collect();
        r.take(&snap2, &sources, metadata, &mut |_, _| {})
    });
    let st = state.clone();
    let finish = async move {
        let result = task
            .await
            .map_err(|e| tierdex::Error::Internal(e.to_string()))
            .and_then(|r| r);
        let mut jobs = st.snapshots.jobs();
        let key = (repo2.clone(), snap.clone());
        match &result {
            Ok(_) => {
                jobs.remove(&key);
            }
            Err(e) => {
                tracing::error!("snapshot [{repo2}:{snap}] failed: {e}");
                if let Some(j) = jobs.get_mut(&key) {
                    j.failure = Some(e.to_string());
                }
            }
        }
        result
    };
    if wait {
        let info = finish.await.map_err(ApiError::engine)?;
        Ok(Json(json!({ "snapshot": snapshot_json(&repo, &info) })))
    } else {
        tokio::spawn(finish);
        Ok(Json(json!({ "accepted": true })))
    }
}

/// `GET /_snapshot/{repo}/{snapshot}`: names, `*` patterns, `_all` or
/// `_current` (those being taken).
pub async fn get_snapshots(
    State(state): State<Arc<AppState>>,
    Path((repo, expr)): Path<(String, String)>,
    uri: NoQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(uri)?;
    let entry = state.snapshots.repo(&repo)?;
    let location = entry.location.clone();
    let stored = blocking(move || Repository::open(&location)?.snapshots()).await?;
    let jobs: Vec<(String, Job)> = state
        .snapshots
        .jobs()
        .iter()
        .filter(|((r, _), _)| r == &repo)
        .map(|((_, n), j)| (n.clone(), j.clone()))
        .collect();
    let mut out = Vec::new();
    for part in expr.split(',').map(str::trim) {
        let mut found = false;
        if part != "_current" {
            for s in &stored {
                if part == "_all" || matches(part, &s.name) {
                    out.push((s.start_ms, s.name.clone(), snapshot_json(&repo, s)));
                    found = true;
                }
            }
        }
        for (name, j) in &jobs {
            let current = part == "_current" && j.failure.is_none();
            if current || part == "_all" || matches(part, name) {
                out.push((j.start_ms, name.clone(), job_json(&repo, name, j)));
                found = true;
            }
        }
        if !found && !part.contains('*') && part != "_all" && part != "_current" {
            return Err(snapshot_missing(&repo, part));
        }
    }
    out.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    out.dedup_by(|a, b| a.1 == b.1);
    let total = out.len();
    Ok(Json(json!({
        "snapshots": out.into_iter().map(|(_, _, v)| v).collect::<Vec<_>>(),
        "total": total,
        "remaining": 0,
    })))
}

/// `DELETE /_snapshot/{repo}/{snapshot}` (comma-separated names).
pub async fn delete_snapshot(
    State(state): State<Arc<AppState>>,
    Path((repo, expr)): Path<(String, String)>,
    uri: NoQuery,
) -> Result<Json<Value>, ApiError> {
    no_params(uri)?;
    if state.config.read_only {
        return Err(read_only());
    }
    let entry = state.snapshots.repo(&repo)?;
    if entry.readonly {
        return Err(ApiError::bad_request(format!("[{repo}] is a read-only repository")));
    }
    let names: Vec<String> = expr.split(',').map(|n| n.trim().to_string()).collect();
    // Names whose failed attempt was forgotten here: absent from the
    // repository is fine for them.
    let mut failed = Vec::new();
    {
        let mut jobs = state.snapshots.jobs();
        for n in &names {
            match jobs.get(&(repo.clone(), n.clone())) {
                Some(j) if j.failure.is_none() => {
                    return Err(ApiError::new(
                        StatusCode::CONFLICT,
                        "concurrent_snapshot_execution_exception",
                        format!("[{repo}:{n}] is being taken; delete it once it is done"),
                    ))
                }
                Some(_) => {
                    jobs.remove(&(repo.clone(), n.clone()));
                    failed.push(n.clone());
                }
                None => {}
            }
        }
    }
    let location = entry.location.clone();
    let repo2 = repo.clone();
    blocking(move || {
        let r = Repository::open(&location)?;
        for n in &names {
            match r.delete(n) {
                Ok(()) => {}
                Err(e) if e.kind() == tierdex::ErrorKind::NotFound && failed.contains(n) => {}
                Err(e) if e.kind() == tierdex::ErrorKind::NotFound => {
                    return Err(tierdex::Error::NotFound(format!("[{repo2}:{n}] is missing")))
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    })
    .await
    .map_err(|e| match e.status {
        StatusCode::NOT_FOUND => ApiError::new(
            StatusCode::NOT_FOUND,
            "snapshot_missing_exception",
            e.body["error"]["reason"].as_str().unwrap_or_default(),
        ),
        _ => e,
    })?;
    Ok(Json(json!({ "acknowledged": true })))
}

/// `POST /_snapshot/{repo}/{snapshot}/_restore`: restores indices of a
/// snapshot as new indices.
pub async fn restore(
    State(state): State<Arc<AppState>>,
    Path((repo, snap)): Path<(String, String)>,
    uri: WaitQuery,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    let wait = wait(uri)?;
    if state.config.read_only {
        return Err(read_only());
    }
    let Some(data) = state.indices().data_dir().map(FsPath::to_path_buf) else {
        return Err(ApiError::bad_request(
            "restoring makes new indices: this server serves one index directory; start it with \
             `tierdex serve --data DIR`, or restore with `tierdex restore`",
        ));
    };
    let entry = state.snapshots.repo(&repo)?;
    let o = body_object(&body, "a restore")?;
    only_keys(
        &o,
        "a restore",
        &[
            "indices",
            "ignore_unavailable",
            "include_global_state",
            "include_aliases",
            "rename_pattern",
            "rename_replacement",
            "partial",
        ],
    )?;
    if flag(&o, "include_global_state", false)? {
        return Err(ApiError::bad_request(
            "[include_global_state] true is not supported: snapshots hold no global state beyond each index's aliases",
        ));
    }
    if flag(&o, "partial", false)? {
        return Err(ApiError::bad_request("[partial] true is not supported"));
    }
    let ignore_unavailable = flag(&o, "ignore_unavailable", false)?;
    let include_aliases = flag(&o, "include_aliases", true)?;
    let text = |key: &str| -> Result<Option<String>, ApiError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(ApiError::bad_request(format!("[{key}] must be a string, not {v}"))),
        }
    };
    let rename = match (text("rename_pattern")?, text("rename_replacement")?) {
        (Some(p), Some(r)) => Some((
            regex::Regex::new(&p).map_err(|e| ApiError::bad_request(format!("[rename_pattern] is not valid: {e}")))?,
            r,
        )),
        (None, None) => None,
        _ => {
            return Err(ApiError::bad_request(
                "[rename_pattern] and [rename_replacement] go together",
            ))
        }
    };
    let location = entry.location.clone();
    let snap2 = snap.clone();
    let info = blocking(move || Repository::open(&location)?.snapshot(&snap2))
        .await
        .map_err(|e| match e.status {
            StatusCode::NOT_FOUND => snapshot_missing(&repo, &snap),
            _ => e,
        })?;
    let exprs = index_list(&o)?.unwrap_or_else(|| vec!["_all".into()]);
    let mut chosen: Vec<String> = Vec::new();
    for e in &exprs {
        let hits: Vec<&String> = info.indices.keys().filter(|n| e == "_all" || matches(e, n)).collect();
        if hits.is_empty() && !e.contains('*') && e != "_all" && !ignore_unavailable {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "index_not_found_exception",
                format!("no such index [{e}] in snapshot [{repo}:{snap}]"),
            ));
        }
        for h in hits {
            if !chosen.contains(h) {
                chosen.push(h.clone());
            }
        }
    }
    let mut plan = Vec::new();
    for index in chosen {
        let target = match &rename {
            Some((re, with)) => re.replace_all(&index, with.as_str()).into_owned(),
            None => index.clone(),
        };
        check_name(&target, "index")?;
        if state.indices().get(&target).is_some() || state.indices().aliases().contains_key(&target) {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "snapshot_restore_exception",
                format!(
                    "[{repo}:{snap}] cannot restore index [{target}] because an index or alias with the same name \
                     already exists (rename it with rename_pattern and rename_replacement, or delete it first)"
                ),
            ));
        }
        if plan.iter().any(|(_, t): &(String, String)| t == &target) {
            return Err(ApiError::bad_request(format!(
                "[{repo}:{snap}] two indices would be restored as [{target}]"
            )));
        }
        plan.push((index, target));
    }
    let st = state.clone();
    let (repo2, snap2) = (repo.clone(), snap.clone());
    let targets: Vec<String> = plan.iter().map(|(_, t)| t.clone()).collect();
    let run = async move {
        let mut done = Vec::new();
        for (index, target) in plan {
            let meta = info.indices[&index].metadata.clone();
            let location = entry.location.clone();
            let (snap3, index2, dest) = (snap2.clone(), index.clone(), data.join(&target));
            blocking(move || {
                Repository::open(&location)?
                    .restore(&snap3, &index2, &dest, &mut |_, _| {})
                    .map(|_| ())
            })
            .await?;
            let replicas = meta["replicas"].as_u64().unwrap_or(0) as u32;
            let tier = meta["tier"].as_str().and_then(|t| t.parse().ok());
            if let Err(e) = st.indices().adopt(&target, replicas, tier, &st.config) {
                let _ = std::fs::remove_dir_all(data.join(&target));
                return Err(e);
            }
            if include_aliases {
                let actions: Vec<crate::indices::AliasAction> = meta["aliases"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .filter(|a| st.indices().get(a).is_none())
                    .map(|a| crate::indices::AliasAction::Add {
                        index: target.clone(),
                        alias: a.to_string(),
                    })
                    .collect();
                if !actions.is_empty() {
                    st.indices().update_aliases(&actions, &st.config)?;
                }
            }
            tracing::info!("restored index [{index}] of snapshot [{repo2}:{snap2}] as [{target}]");
            done.push(target);
        }
        Ok::<_, ApiError>(done)
    };
    if wait {
        let done = run.await?;
        let n = done.len();
        Ok(Json(json!({
            "snapshot": {
                "snapshot": snap,
                "indices": done,
                "shards": { "total": n, "failed": 0, "successful": n },
            }
        })))
    } else {
        tokio::spawn(async move {
            if let Err(e) = run.await {
                tracing::error!("restoring {targets:?} failed: {}", e.body);
            }
        });
        Ok(Json(json!({ "accepted": true })))
    }
}

/// An Elasticsearch byte size (`40mb`, `1gb`, `512kb`, `100b`, `0`).
fn byte_size(s: &str) -> Option<u64> {
    let t = s.trim().to_ascii_lowercase();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let mult: u64 = match unit.trim() {
        "" | "b" => 1,
        "kb" | "k" => 1 << 10,
        "mb" | "m" => 1 << 20,
        "gb" | "g" => 1 << 30,
        "tb" | "t" => 1 << 40,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_read_as_elasticsearch_writes_them() {
        assert_eq!(byte_size("40mb"), Some(40 << 20));
        assert_eq!(byte_size("1GB"), Some(1 << 30));
        assert_eq!(byte_size("512"), Some(512));
        assert_eq!(byte_size("0"), Some(0));
        assert_eq!(byte_size("fast"), None);
        assert_eq!(byte_size("5pb"), None);
    }

    #[test]
    fn locations_must_lie_inside_path_repo() {
        let root = tempfile::tempdir().unwrap();
        let roots = vec![root.path().to_path_buf()];
        let inside = resolve_location("backups/one", &roots, "r").unwrap();
        assert!(inside.starts_with(root.path().canonicalize().unwrap()), "{inside:?}");
        let abs = root.path().join("two");
        assert!(resolve_location(abs.to_str().unwrap(), &roots, "r").is_ok());
        for bad in ["/etc", "../escape", "a/../../b", ""] {
            assert!(resolve_location(bad, &roots, "r").is_err(), "{bad}");
        }
        let e = resolve_location("x", &[], "r").unwrap_err();
        assert!(
            e.body["error"]["reason"].as_str().unwrap().contains("path-repo"),
            "{}",
            e.body
        );
        // A link out of the root does not count as inside it.
        std::os::unix::fs::symlink("/tmp", root.path().join("out")).unwrap();
        assert!(resolve_location("out/x", &roots, "r").is_err());
    }
}
