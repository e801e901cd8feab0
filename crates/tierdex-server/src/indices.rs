//! The indices a server holds, and their aliases.
//!
//! A server holds either one index directory (`tierdex serve DIR`: the
//! index keeps its name, and no other can be created), or a *data
//! directory* of many (`tierdex serve --data DIR`): each index in its own
//! subdirectory `DIR/{name}`, created by `PUT /{index}` or by its first
//! write (dynamic mapping, unless [`ServerConfig::auto_create_index`] is
//! off), deleted by `DELETE /{index}`. The catalog `DIR/_catalog.json`
//! keeps what the index directories do not: each index's uuid, creation
//! time and settings, and the aliases. It is replaced atomically (written
//! aside, synced, renamed); an index directory it does not name is taken
//! in at startup, and a deletion first renames the directory aside, so a
//! crash never brings a deleted index back.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tierdex::cache::ResultCache;
use tierdex::schema::Schema;
use tierdex::search::Searcher;
use tierdex::update::{IndexWriter, Maintainer, Strategy, WriterOptions};
use tierdex::{Tier, TierOptions};

use crate::{ApiError, ServerConfig};

/// The catalog file of a data directory.
const CATALOG: &str = "_catalog.json";

/// Prefix of an index directory being deleted.
const DELETING: &str = "_deleting-";

/// Where searches of one index get their snapshot.
pub(crate) enum Source {
    ReadOnly(Arc<Searcher>),
    Writer(Arc<IndexWriter>),
}

/// What the catalog remembers of an index.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IndexMeta {
    /// A name for this index that a deletion and re-creation changes.
    pub uuid: String,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// Replicas asked for: a single node holds none, so more than 0 leaves
    /// the index `yellow`, as in Elasticsearch.
    #[serde(default)]
    pub replicas: u32,
    /// The storage tier the index is read from (`index.tierdex.tier`;
    /// `None`: the server's `--tier`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier: Option<String>,
}

impl IndexMeta {
    fn new(replicas: u32, tier: Option<Tier>) -> IndexMeta {
        let created_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let seed = format!("{created_ms}-{}-{n}", std::process::id());
        use sha2::Digest;
        let digest = sha2::Sha256::digest(seed.as_bytes());
        let uuid: String = digest[..11].iter().map(|b| format!("{b:02x}")).collect();
        IndexMeta {
            uuid,
            created_ms,
            replicas,
            tier: tier.map(|t| tier_name(t).to_string()),
        }
    }
}

/// One index the server holds.
pub struct IndexHandle {
    name: String,
    dir: PathBuf,
    /// The tier it is read from.
    tier: Tier,
    pub(crate) source: Source,
    pub(crate) cache: Option<Arc<ResultCache>>,
    meta: IndexMeta,
    maintainer: Mutex<Option<Maintainer>>,
    /// Taken by partial updates (`_update`), so that two of them to one
    /// index read and write in turn, neither losing the other's change.
    pub(crate) updates: tokio::sync::Mutex<()>,
}

impl IndexHandle {
    /// The index's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// What the catalog remembers of it.
    pub fn meta(&self) -> &IndexMeta {
        &self.meta
    }

    /// The current snapshot.
    pub fn searcher(&self) -> Arc<Searcher> {
        match &self.source {
            Source::ReadOnly(s) => s.clone(),
            Source::Writer(w) => w.searcher(),
        }
    }

    /// The writer (none when the server is read-only).
    pub fn writer(&self) -> Option<&Arc<IndexWriter>> {
        match &self.source {
            Source::ReadOnly(_) => None,
            Source::Writer(w) => Some(w),
        }
    }

    /// The mapping now (with a writer, the fields dynamic mapping added
    /// since the last refresh too).
    pub fn schema(&self) -> Schema {
        match self.writer() {
            Some(w) => w.schema(),
            None => self.searcher().schema().clone(),
        }
    }

    /// The result cache, if the server has one.
    pub(crate) fn cache(&self) -> Option<&Arc<ResultCache>> {
        self.cache.as_ref()
    }

    /// Starts the writer's background refreshes and flushes (once).
    fn maintain(&self, interval: Duration) {
        let mut m = self.maintainer.lock().unwrap_or_else(|p| p.into_inner());
        if m.is_none() {
            if let Some(w) = self.writer() {
                *m = Some(w.maintain(interval));
            }
        }
    }

    /// Stops the background maintenance (after the step in progress).
    fn stop_maintenance(&self) {
        let m = self.maintainer.lock().unwrap_or_else(|p| p.into_inner()).take();
        drop(m);
    }

    /// `settings` in Elasticsearch's shape.
    pub fn settings_json(&self) -> Value {
        let strategy = self.writer().map(|w| w.strategy().name().to_string());
        json!({ "index": {
            "number_of_shards": "1",
            "number_of_replicas": self.meta.replicas.to_string(),
            "uuid": self.meta.uuid,
            "creation_date": self.meta.created_ms.to_string(),
            "provided_name": self.name,
            "tierdex": { "strategy": strategy, "tier": tier_name(self.tier) },
        }})
    }

    /// `green`, or `yellow` when replicas were asked for (a single node
    /// holds none).
    pub fn health(&self) -> &'static str {
        if self.meta.replicas > 0 {
            "yellow"
        } else {
            "green"
        }
    }
}

/// Settings of an index creation.
#[derive(Debug, Clone, Default)]
pub struct IndexSettings {
    /// `number_of_replicas` (default 0).
    pub replicas: u32,
    /// The maintenance strategy (`index.tierdex.strategy`; default: the
    /// server's).
    pub strategy: Option<Strategy>,
    /// The storage tier (`index.tierdex.tier`: ram, mmap, buffered or
    /// direct; default: the server's `--tier`).
    pub tier: Option<Tier>,
}

impl IndexSettings {
    /// Reads `settings` of `PUT /{index}`: `number_of_shards` (1),
    /// `number_of_replicas`, `tierdex.strategy`, flat, under `index`, or
    /// dotted (`index.number_of_replicas`). Anything else is a 400 naming
    /// it.
    pub fn parse(v: &Value) -> Result<IndexSettings, ApiError> {
        let mut flat = BTreeMap::new();
        flatten("", v, &mut flat)?;
        let mut s = IndexSettings::default();
        for (key, value) in flat {
            let short = key.strip_prefix("index.").unwrap_or(&key);
            let number = || -> Result<u64, ApiError> {
                match &value {
                    Value::Number(n) => n.as_u64(),
                    Value::String(t) => t.parse().ok(),
                    _ => None,
                }
                .ok_or_else(|| ApiError::bad_request(format!("[{key}] must be a whole number ≥ 0, not {value}")))
            };
            match short {
                "number_of_shards" => {
                    let n = number()?;
                    if n != 1 {
                        return Err(ApiError::bad_request(format!(
                            "[{key}] {n}: an index of this server is one shard (spread an index over several with a cluster)"
                        )));
                    }
                }
                "number_of_replicas" => {
                    s.replicas = u32::try_from(number()?)
                        .map_err(|_| ApiError::bad_request(format!("[{key}] {value} is too large")))?;
                }
                "tierdex.strategy" => {
                    let name = value
                        .as_str()
                        .ok_or_else(|| ApiError::bad_request(format!("[{key}] must be a string, not {value}")))?;
                    s.strategy = Some(
                        name.parse()
                            .map_err(|e: tierdex::Error| ApiError::bad_request(e.to_string()))?,
                    );
                }
                "tierdex.tier" => {
                    let name = value
                        .as_str()
                        .ok_or_else(|| ApiError::bad_request(format!("[{key}] must be a string, not {value}")))?;
                    s.tier = Some(
                        name.parse()
                            .map_err(|e: tierdex::Error| ApiError::bad_request(format!("[{key}] {e}")))?,
                    );
                }
                _ => {
                    return Err(ApiError::bad_request(format!(
                        "[settings] [{key}] is not supported (number_of_shards, number_of_replicas, tierdex.strategy, \
                         tierdex.tier; analyzers and phrase filters are chosen per field in the mappings)"
                    )))
                }
            }
        }
        Ok(s)
    }
}

/// The leaves of a settings object as dotted keys.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) -> Result<(), ApiError> {
    match v {
        Value::Object(o) => {
            for (k, x) in o {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out)?;
            }
            Ok(())
        }
        _ if prefix.is_empty() => Err(ApiError::bad_request(format!("[settings] must be an object, not {v}"))),
        _ => {
            out.insert(prefix.to_string(), v.clone());
            Ok(())
        }
    }
}

/// Checks a new index or alias name against Elasticsearch's rules.
pub fn check_name(name: &str, what: &str) -> Result<(), ApiError> {
    let bad = |why: &str| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_index_name_exception",
            format!("invalid {what} name [{name}]: {why}"),
        )
    };
    if name.is_empty() {
        return Err(bad("must not be empty"));
    }
    if name.len() > 255 {
        return Err(bad("longer than 255 bytes"));
    }
    if name == "." || name == ".." {
        return Err(bad("must not be '.' or '..'"));
    }
    if name.starts_with(['_', '-', '+']) {
        return Err(bad("must not start with '_', '-' or '+'"));
    }
    if name.chars().any(|c| c.is_uppercase()) {
        return Err(bad("must be lowercase"));
    }
    if let Some(c) = name.chars().find(|c| "\\/*?\"<>| ,#:".contains(*c) || c.is_control()) {
        return Err(bad(&format!("must not contain {c:?}")));
    }
    Ok(())
}

/// `pattern` (with `*` wildcards) matches `name`.
pub fn matches(pattern: &str, name: &str) -> bool {
    wildcard(pattern, name)
}

fn wildcard(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == name;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for p in &parts[1..parts.len() - 1] {
        match rest.find(p) {
            Some(i) => rest = &rest[i + p.len()..],
            None => return false,
        }
    }
    true
}

fn not_found(name: &str) -> ApiError {
    let mut e = ApiError::new(
        StatusCode::NOT_FOUND,
        "index_not_found_exception",
        format!("no such index [{name}]"),
    );
    e.body["error"]["index"] = name.into();
    e
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", e.to_string())
}

/// The catalog as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
struct CatalogFile {
    indices: BTreeMap<String, IndexMeta>,
    /// Alias -> the indices it names.
    aliases: BTreeMap<String, BTreeSet<String>>,
}

/// One change of `POST /_aliases`.
#[derive(Debug, Clone)]
pub enum AliasAction {
    /// Makes `alias` name `index` too.
    Add {
        /// An index name or pattern.
        index: String,
        /// The alias.
        alias: String,
    },
    /// Makes `alias` no longer name `index`.
    Remove {
        /// An index name or pattern.
        index: String,
        /// An alias name or pattern.
        alias: String,
    },
}

/// The indices of a server (see the module documentation).
pub struct Indices {
    /// The data directory (`None`: one served index directory).
    data: Option<PathBuf>,
    map: RwLock<BTreeMap<String, Arc<IndexHandle>>>,
    aliases: RwLock<BTreeMap<String, BTreeSet<String>>>,
    /// Serialises changes of the catalog.
    changes: Mutex<()>,
    /// The refresh interval once the server runs (new indices start their
    /// maintenance then).
    maintaining: Mutex<Option<Duration>>,
}

impl Indices {
    /// The one index directory of `config`, under `config.index_name`.
    pub fn single(config: &ServerConfig) -> tierdex::Result<Indices> {
        let source = if config.read_only {
            Source::ReadOnly(Arc::new(Searcher::open_with(&config.dir, config.open)?))
        } else {
            let options = WriterOptions {
                tier: config.open.tier,
                ..config.writer
            };
            let exists = tierdex::Index::exists(&config.dir);
            let w = match (exists, config.create) {
                (false, Some(strategy)) => {
                    IndexWriter::create(&config.dir, Default::default(), Default::default(), strategy, options)?
                }
                _ => IndexWriter::open(&config.dir, options)?,
            };
            Source::Writer(Arc::new(w))
        };
        let handle = handle(
            config,
            config.index_name.clone(),
            config.dir.clone(),
            source,
            IndexMeta::new(0, None),
        )?;
        Ok(Indices {
            data: None,
            map: RwLock::new(BTreeMap::from([(config.index_name.clone(), Arc::new(handle))])),
            aliases: RwLock::new(BTreeMap::new()),
            changes: Mutex::new(()),
            maintaining: Mutex::new(None),
        })
    }

    /// The indices of the data directory `data` (created if missing).
    pub fn open_data(config: &ServerConfig, data: &Path) -> tierdex::Result<Indices> {
        std::fs::create_dir_all(data).map_err(|e| tierdex::Error::io(data, e))?;
        let catalog_path = data.join(CATALOG);
        let mut catalog: CatalogFile = match std::fs::read(&catalog_path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                tierdex::Error::corrupt(&catalog_path, format!("the catalog is not what this server wrote: {e}"))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => CatalogFile::default(),
            Err(e) => return Err(tierdex::Error::io(&catalog_path, e)),
        };
        let mut map = BTreeMap::new();
        let entries = std::fs::read_dir(data).map_err(|e| tierdex::Error::io(data, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| tierdex::Error::io(data, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if name.starts_with(DELETING) || (name.starts_with('.') && name.contains(".restore-")) {
                // A deletion or a restore that a crash interrupted.
                std::fs::remove_dir_all(&path).map_err(|e| tierdex::Error::io(&path, e))?;
                continue;
            }
            if !path.is_dir() || check_name(&name, "index").is_err() {
                continue;
            }
            if !tierdex::Index::exists(&path) {
                tracing::warn!("{} holds no index; left alone", path.display());
                continue;
            }
            let meta = catalog
                .indices
                .entry(name.clone())
                .or_insert_with(|| IndexMeta::new(0, None))
                .clone();
            let source = open_source(config, &path, tier_of(config, &meta))?;
            let h = handle(config, name.clone(), path, source, meta)?;
            map.insert(name, Arc::new(h));
        }
        catalog.indices.retain(|name, _| {
            let kept = map.contains_key(name);
            if !kept {
                tracing::warn!(
                    "index [{name}] of the catalog has no directory in {}; forgotten",
                    data.display()
                );
            }
            kept
        });
        for targets in catalog.aliases.values_mut() {
            targets.retain(|i| map.contains_key(i));
        }
        catalog.aliases.retain(|_, t| !t.is_empty());
        let indices = Indices {
            data: Some(data.to_path_buf()),
            map: RwLock::new(map),
            aliases: RwLock::new(catalog.aliases),
            changes: Mutex::new(()),
            maintaining: Mutex::new(None),
        };
        if !indices.read_only(config) {
            indices
                .save()
                .map_err(|e| tierdex::Error::Internal(format!("{}", e.body)))?;
        }
        Ok(indices)
    }

    /// The data directory (`None`: one served index directory).
    pub fn data_dir(&self) -> Option<&Path> {
        self.data.as_deref()
    }

    /// Takes in the index directory `DATA/{name}` that a restore wrote,
    /// as index `name` with `replicas`.
    pub fn adopt(
        &self,
        name: &str,
        replicas: u32,
        tier: Option<Tier>,
        config: &ServerConfig,
    ) -> Result<Arc<IndexHandle>, ApiError> {
        let Some(data) = &self.data else {
            return Err(ApiError::bad_request("this server serves one index directory"));
        };
        check_name(name, "index")?;
        let _g = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        if self.get(name).is_some() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "resource_already_exists_exception",
                format!("index [{name}] already exists"),
            ));
        }
        let dir = data.join(name);
        let meta = IndexMeta::new(replicas, tier);
        let source = open_source(config, &dir, tier_of(config, &meta)).map_err(ApiError::engine)?;
        let h = Arc::new(handle(config, name.to_string(), dir, source, meta).map_err(ApiError::engine)?);
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), h.clone());
        self.save()?;
        if let Some(interval) = *self.maintaining.lock().unwrap_or_else(|p| p.into_inner()) {
            h.maintain(interval);
        }
        Ok(h)
    }

    fn read_only(&self, config: &ServerConfig) -> bool {
        config.read_only
    }

    /// Whether the server holds many indices (a data directory).
    pub fn is_data_dir(&self) -> bool {
        self.data.is_some()
    }

    /// Every index, by name.
    pub fn list(&self) -> Vec<Arc<IndexHandle>> {
        self.map
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The index named `name` (not an alias).
    pub fn get(&self, name: &str) -> Option<Arc<IndexHandle>> {
        self.map.read().unwrap_or_else(|p| p.into_inner()).get(name).cloned()
    }

    /// The only index, when the server holds exactly one.
    pub fn only(&self) -> Option<Arc<IndexHandle>> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        match map.len() {
            1 => map.values().next().cloned(),
            _ => None,
        }
    }

    /// The indices an expression names: comma-separated index names,
    /// aliases and `*` patterns, or `_all`. A name that is neither an
    /// index nor an alias is a 404; a pattern may match nothing.
    pub fn resolve(&self, expr: &str) -> Result<Vec<Arc<IndexHandle>>, ApiError> {
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        let aliases = self.aliases.read().unwrap_or_else(|p| p.into_inner());
        let mut names = BTreeSet::new();
        for part in expr.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(ApiError::bad_request(format!("empty index name in [{expr}]")));
            }
            if part == "_all" || part == "*" {
                names.extend(map.keys().cloned());
            } else if part.contains('*') {
                names.extend(map.keys().filter(|n| wildcard(part, n)).cloned());
                for (a, targets) in aliases.iter() {
                    if wildcard(part, a) {
                        names.extend(targets.iter().cloned());
                    }
                }
            } else if map.contains_key(part) {
                names.insert(part.to_string());
            } else if let Some(targets) = aliases.get(part) {
                names.extend(targets.iter().cloned());
            } else {
                return Err(not_found(part));
            }
        }
        Ok(names.iter().filter_map(|n| map.get(n).cloned()).collect())
    }

    /// The one index an expression names, for requests on one index.
    pub fn resolve_one(&self, expr: &str) -> Result<Arc<IndexHandle>, ApiError> {
        let mut found = self.resolve(expr)?;
        match found.len() {
            1 => Ok(found.pop().expect("one")),
            0 => Err(not_found(expr)),
            n => Err(ApiError::bad_request(format!(
                "[{expr}] names {n} indices ({}); this request works on one index at a time",
                found.iter().map(|h| h.name()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    /// The index a write to `name` goes to: an index, or an alias naming
    /// exactly one; in a data directory, with `create`, a new index
    /// (dynamic mapping) when nothing has that name and `config` allows it.
    pub fn write_target(&self, name: &str, config: &ServerConfig, create: bool) -> Result<Arc<IndexHandle>, ApiError> {
        if name.contains(['*', ',']) || name == "_all" {
            return Err(ApiError::bad_request(format!(
                "[{name}] names several indices; a write goes to one index or an alias of one"
            )));
        }
        if let Some(h) = self.get(name) {
            return Ok(h);
        }
        let targets = self
            .aliases
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned();
        if let Some(targets) = targets {
            if targets.len() != 1 {
                return Err(ApiError::bad_request(format!(
                    "alias [{name}] names {} indices; a write through an alias needs it to name exactly one",
                    targets.len()
                )));
            }
            let only = targets.iter().next().expect("one");
            return self.get(only).ok_or_else(|| not_found(only));
        }
        if !create || self.data.is_none() || !config.auto_create_index {
            return Err(not_found(name));
        }
        match self.create(name, Schema::dynamic(), IndexSettings::default(), config) {
            Ok(h) => Ok(h),
            // Created by a concurrent write.
            Err(_) if self.get(name).is_some() => Ok(self.get(name).expect("checked")),
            Err(e) => Err(e),
        }
    }

    /// Creates index `name` with `schema` in the data directory.
    pub fn create(
        &self,
        name: &str,
        schema: Schema,
        settings: IndexSettings,
        config: &ServerConfig,
    ) -> Result<Arc<IndexHandle>, ApiError> {
        let Some(data) = &self.data else {
            return Err(ApiError::bad_request(format!(
                "cannot create index [{name}]: this server serves one index directory; start it with \
                 `tierdex serve --data DIR` to hold many"
            )));
        };
        if config.read_only {
            return Err(read_only());
        }
        check_name(name, "index")?;
        let _g = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        if self.get(name).is_some() {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "resource_already_exists_exception",
                format!("index [{name}] already exists"),
            ));
        }
        if self
            .aliases
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(name)
        {
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_index_name_exception",
                format!("invalid index name [{name}]: an alias has this name"),
            ));
        }
        let dir = data.join(name);
        let meta = IndexMeta::new(settings.replicas, settings.tier);
        let options = WriterOptions {
            tier: TierOptions {
                tier: tier_of(config, &meta),
                ..config.open.tier
            },
            ..config.writer
        };
        let strategy = settings.strategy.or(config.create).unwrap_or_default();
        let w =
            IndexWriter::create_with_schema(&dir, schema, Default::default(), Default::default(), strategy, options)
                .map_err(ApiError::engine)?;
        let h = Arc::new(
            handle(config, name.to_string(), dir, Source::Writer(Arc::new(w)), meta).map_err(ApiError::engine)?,
        );
        self.map
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), h.clone());
        self.save()?;
        if let Some(interval) = *self.maintaining.lock().unwrap_or_else(|p| p.into_inner()) {
            h.maintain(interval);
        }
        tracing::info!("created index [{name}]");
        Ok(h)
    }

    /// Deletes the indices `expr` names (not through aliases); returns
    /// their names.
    pub fn delete(&self, expr: &str, config: &ServerConfig) -> Result<Vec<String>, ApiError> {
        let Some(data) = &self.data else {
            return Err(ApiError::bad_request(
                "this server serves one index directory, which it does not delete; start it with \
                 `tierdex serve --data DIR` to hold many",
            ));
        };
        if config.read_only {
            return Err(read_only());
        }
        let _g = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        let mut gone = Vec::new();
        {
            let map = self.map.read().unwrap_or_else(|p| p.into_inner());
            for part in expr.split(',') {
                if part == "_all" || part == "*" || part.contains('*') {
                    return Err(ApiError::bad_request(format!(
                        "deleting by pattern [{part}] is refused: name each index"
                    )));
                }
                if self
                    .aliases
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .contains_key(part)
                {
                    return Err(ApiError::bad_request(format!(
                        "[{part}] is an alias; delete the indices it names by their own names"
                    )));
                }
                let h = map.get(part).ok_or_else(|| not_found(part))?;
                gone.push(h.clone());
            }
        }
        for h in &gone {
            let aside = data.join(format!("{DELETING}{}", h.meta.uuid));
            std::fs::rename(&h.dir, &aside).map_err(internal)?;
            self.map.write().unwrap_or_else(|p| p.into_inner()).remove(&h.name);
            for targets in self.aliases.write().unwrap_or_else(|p| p.into_inner()).values_mut() {
                targets.remove(&h.name);
            }
        }
        self.aliases
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, t| !t.is_empty());
        self.save()?;
        for h in &gone {
            h.stop_maintenance();
            let aside = data.join(format!("{DELETING}{}", h.meta.uuid));
            if let Err(e) = std::fs::remove_dir_all(&aside) {
                tracing::warn!("removing {}: {e} (removed at the next start)", aside.display());
            }
            tracing::info!("deleted index [{}]", h.name);
        }
        Ok(gone.iter().map(|h| h.name.clone()).collect())
    }

    /// The aliases naming `index`.
    pub fn aliases_of(&self, index: &str) -> Vec<String> {
        self.aliases
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, t)| t.contains(index))
            .map(|(a, _)| a.clone())
            .collect()
    }

    /// Every alias, with the indices it names.
    pub fn aliases(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.aliases.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Applies `actions` all at once (none when one is wrong).
    pub fn update_aliases(&self, actions: &[AliasAction], config: &ServerConfig) -> Result<(), ApiError> {
        if self.data.is_none() {
            return Err(ApiError::bad_request(
                "aliases need a data directory: start the server with `tierdex serve --data DIR`",
            ));
        }
        if config.read_only {
            return Err(read_only());
        }
        let _g = self.changes.lock().unwrap_or_else(|p| p.into_inner());
        let mut next = self.aliases();
        let names: Vec<String> = self.list().iter().map(|h| h.name.clone()).collect();
        let indices_of = |pattern: &str| -> Result<Vec<String>, ApiError> {
            let found: Vec<String> = names.iter().filter(|n| wildcard(pattern, n)).cloned().collect();
            if found.is_empty() {
                return Err(not_found(pattern));
            }
            Ok(found)
        };
        for a in actions {
            match a {
                AliasAction::Add { index, alias } => {
                    check_name(alias, "alias")?;
                    if names.contains(alias) {
                        return Err(ApiError::new(
                            StatusCode::BAD_REQUEST,
                            "invalid_alias_name_exception",
                            format!("invalid alias name [{alias}]: an index has this name"),
                        ));
                    }
                    next.entry(alias.clone()).or_default().extend(indices_of(index)?);
                }
                AliasAction::Remove { index, alias } => {
                    let targets = indices_of(index)?;
                    let mut removed = false;
                    for (a, t) in next.iter_mut() {
                        if wildcard(alias, a) {
                            for i in &targets {
                                removed |= t.remove(i);
                            }
                        }
                    }
                    if !removed {
                        return Err(ApiError::new(
                            StatusCode::NOT_FOUND,
                            "aliases_not_found_exception",
                            format!("aliases [{alias}] missing on [{index}]"),
                        ));
                    }
                }
            }
        }
        next.retain(|_, t| !t.is_empty());
        *self.aliases.write().unwrap_or_else(|p| p.into_inner()) = next;
        self.save()
    }

    /// Starts every index's background maintenance, and that of indices
    /// created from now on.
    pub fn maintain(&self, interval: Duration) {
        *self.maintaining.lock().unwrap_or_else(|p| p.into_inner()) = Some(interval);
        for h in self.list() {
            h.maintain(interval);
        }
    }

    /// Stops every index's background maintenance.
    pub fn stop_maintenance(&self) {
        *self.maintaining.lock().unwrap_or_else(|p| p.into_inner()) = None;
        for h in self.list() {
            h.stop_maintenance();
        }
    }

    /// Writes the catalog atomically (aside, synced, renamed, directory
    /// synced).
    fn save(&self) -> Result<(), ApiError> {
        let Some(data) = &self.data else {
            return Ok(());
        };
        let file = CatalogFile {
            indices: self.list().iter().map(|h| (h.name.clone(), h.meta.clone())).collect(),
            aliases: self.aliases(),
        };
        let bytes = serde_json::to_vec_pretty(&file).map_err(internal)?;
        let tmp = data.join(format!("{CATALOG}.tmp"));
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, data.join(CATALOG))?;
            std::fs::File::open(data)?.sync_all()
        };
        write().map_err(|e| ApiError::engine(tierdex::Error::io(data.join(CATALOG), e)))
    }
}

fn read_only() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "read_only",
        "this server was started read-only",
    )
}

/// Opens an existing index directory as `config` says (read-only or with
/// a writer).
fn open_source(config: &ServerConfig, dir: &Path, tier: Tier) -> tierdex::Result<Source> {
    let tiers = TierOptions {
        tier,
        ..config.open.tier
    };
    Ok(if config.read_only {
        Source::ReadOnly(Arc::new(Searcher::open_with(
            dir,
            tierdex::OpenOptions {
                tier: tiers,
                ..config.open
            },
        )?))
    } else {
        let options = WriterOptions {
            tier: tiers,
            ..config.writer
        };
        Source::Writer(Arc::new(IndexWriter::open(dir, options)?))
    })
}

fn handle(
    config: &ServerConfig,
    name: String,
    dir: PathBuf,
    source: Source,
    meta: IndexMeta,
) -> tierdex::Result<IndexHandle> {
    let cache = config.cache.map(ResultCache::new).transpose()?.map(Arc::new);
    Ok(IndexHandle {
        tier: tier_of(config, &meta),
        name,
        dir,
        source,
        cache,
        meta,
        maintainer: Mutex::new(None),
        updates: tokio::sync::Mutex::new(()),
    })
}

/// The tier index `meta` is read from: its own, or the server's.
fn tier_of(config: &ServerConfig, meta: &IndexMeta) -> Tier {
    match meta.tier.as_deref().map(str::parse::<Tier>) {
        Some(Ok(t)) => t,
        Some(Err(e)) => {
            tracing::warn!("index {}: {e}; read from the server's tier", meta.uuid);
            config.open.tier.tier
        }
        None => config.open.tier.tier,
    }
}

/// A tier's name as settings write it.
pub fn tier_name(t: Tier) -> &'static str {
    match t {
        Tier::Ram => "ram",
        Tier::Mmap => "mmap",
        Tier::Buffered => "buffered",
        Tier::Direct => "direct",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_as_elasticsearch_patterns() {
        assert!(wildcard("logs-*", "logs-2024"));
        assert!(wildcard("*", "a"));
        assert!(wildcard("*-2024", "logs-2024"));
        assert!(wildcard("l*s-*4", "logs-2024"));
        assert!(!wildcard("logs-*", "log"));
        assert!(!wildcard("a*b*c", "acb"));
        assert!(wildcard("a*b*c", "abc"));
        assert!(!wildcard("abc", "abcd"));
    }

    #[test]
    fn index_names_follow_elasticsearch_rules() {
        for ok in ["logs", "logs-2024.01", "a_b", "é"] {
            assert!(check_name(ok, "index").is_ok(), "{ok}");
        }
        for bad in [
            "", "_x", "-x", "+x", "Logs", "a b", "a,b", "a*", "a/b", ".", "..", "a#b", "a:b",
        ] {
            assert!(check_name(bad, "index").is_err(), "{bad}");
        }
    }

    #[test]
    fn settings_take_three_shapes_and_name_what_they_refuse() {
        let s = IndexSettings::parse(&json!({"number_of_shards": 1, "number_of_replicas": 2})).unwrap();
        assert_eq!(s.replicas, 2);
        let s =
            IndexSettings::parse(&json!({"index": {"number_of_replicas": "1", "tierdex": {"strategy": "geometric"}}}))
                .unwrap();
        assert_eq!(s.replicas, 1);
        assert_eq!(s.strategy, Some(Strategy::Geometric));
        let s = IndexSettings::parse(&json!({"index": {"tierdex": {"tier": "direct"}}})).unwrap();
        assert_eq!(s.tier, Some(Tier::Direct));
        let s = IndexSettings::parse(&json!({"index.number_of_replicas": 0})).unwrap();
        assert_eq!(s.replicas, 0);
        let e = IndexSettings::parse(&json!({"number_of_shards": 3})).unwrap_err();
        assert!(e.body["error"]["reason"].as_str().unwrap().contains("one shard"));
        let e = IndexSettings::parse(&json!({"index": {"refresh_interval": "1s"}})).unwrap_err();
        assert!(e.body["error"]["reason"]
            .as_str()
            .unwrap()
            .contains("index.refresh_interval"));
        let e = IndexSettings::parse(&json!({"index": {"tierdex": {"strategy": "nope"}}})).unwrap_err();
        assert!(e.body["error"]["reason"].as_str().unwrap().contains("nope"));
    }
}
