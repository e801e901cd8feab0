//! The broker (`tierdex serve --cluster`): stateless, speaks the same
//! HTTP/Elasticsearch API as a single server for the calls below, and
//! keeps nothing but a connection.
//!
//! * Writes are routed by the hash of the id ([`names::shard_of`]),
//!   published to the shard's stream, and answered once JetStream has
//!   stored them.
//! * A search runs in three phases, as Elasticsearch's DFS
//!   query-then-fetch: every shard's statistics for the query are summed,
//!   each shard finds its best `from + size` with the sums (so scores equal
//!   those of one index holding every document), or its first `from +
//!   size` in a `sort`'s order after its part of a `search_after`; the
//!   broker merges the hits ([`crate::order`]: equal keys by shard, then by
//!   document) and the aggregation partials, then fetches the page's
//!   `_source` and highlights from the shards holding it.
//! * A shard is asked of one of its replicas, in turn, with a timeout; on a
//!   failure or no answer the next replica is asked. When none answers the
//!   shard is counted in `_shards.failed` and the answer is partial, as in
//!   Elasticsearch.
//!
//! Routes: `GET /`, `GET /_cluster/health`, `PUT|DELETE|GET /{index}`,
//! `PUT|POST /{index}/_doc/{id}`, `POST /{index}/_doc`,
//! `GET|DELETE /{index}/_doc/{id}`, `POST /_bulk`, `POST /{index}/_bulk`,
//! `GET|POST /{index}/_search` (`?scroll=`), `GET|POST /{index}/_count`,
//! `POST /{index}/_refresh`, `POST /{index}/_update/{id}`, `GET|POST
//! /_mget` and `/{index}/_mget`, `GET /{index}/_mapping`, `POST
//! /{index}/_delete_by_query`; points in time and scrolls ([`contexts`]):
//! `POST /{index}/_pit`, `DELETE /_pit`, `GET|POST /_search` with a `pit`,
//! `GET|POST|DELETE /_search/scroll` (and `/_search/scroll/{id}`).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use axum::extract::{Path, Query as UrlQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::{Json, Router};
use futures::future::join_all;
use serde::Deserialize;
use serde_json::{json, Value};
use tierdex::query::global::GlobalStats;
use tierdex_server::es::body_value;
use tierdex_server::ApiError;

use crate::map::{self, ClusterMap, IndexMeta};
use crate::names;
use crate::order::Order;
use crate::wire::{Answer, Ask, ContextRef, ShardHit, ShardRequest, WriteOp};

mod contexts;
use crate::{ClusterConfig, ClusterError};
use contexts::Pinned;

/// Largest request body (Elasticsearch's `http.max_content_length`).
const MAX_BODY: usize = 100 << 20;

/// Longest wait for a shard stream's last sequence before a real-time
/// read (beyond it the read does not wait for the replica).
const LAST_SEQUENCE_WAIT: Duration = Duration::from_millis(500);

/// Largest `from + size` of a search.
const MAX_WINDOW: usize = 10_000;

/// How to start a broker.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    /// The NATS cluster.
    pub cluster: ClusterConfig,
    /// Longest wait for one replica's answer before the next is asked.
    pub replica_timeout: Duration,
    /// How long a node may be away before its replicas are placed on other
    /// nodes (Elasticsearch's `index.unassigned.node_left.delayed_timeout`):
    /// a node restarted sooner keeps them.
    pub reassign_after: Duration,
}

/// A broker's connection and counters.
pub struct Broker {
    client: async_nats::Client,
    js: jetstream::Context,
    map: ClusterMap,
    config: BrokerConfig,
    turn: AtomicUsize,
    /// Index entries read lately, with when: reused for [`MAP_TTL`], and
    /// while the map cannot be read (searches go on without a JetStream
    /// quorum).
    cache: std::sync::Mutex<HashMap<String, (Instant, IndexMeta)>>,
}

/// How long a broker trusts an index entry it read.
const MAP_TTL: Duration = Duration::from_secs(1);

type Res<T> = std::result::Result<T, ApiError>;

/// A request the nodes refused as wrong: a 400, or a 404 for a search
/// context that expired or was closed.
fn invalid(m: String) -> ApiError {
    if m.contains(contexts::MISSING) {
        ApiError::new(StatusCode::NOT_FOUND, "search_context_missing_exception", m)
    } else {
        ApiError::bad_request(m)
    }
}

fn cluster_error(e: ClusterError) -> ApiError {
    match e {
        ClusterError::Invalid(m) => invalid(m),
        ClusterError::NoIndex(name) => ApiError::new(
            StatusCode::NOT_FOUND,
            "index_not_found_exception",
            format!("no such index [{name}]"),
        ),
        ClusterError::Engine(e) => ApiError::engine(e),
        other => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", other.to_string()),
    }
}

impl Broker {
    /// Connects to the NATS cluster, opens the map, and starts keeping the
    /// shards at their number of copies ([`Broker::rebalance`]).
    pub async fn connect(config: BrokerConfig) -> crate::Result<Arc<Broker>> {
        let client = config.cluster.connect("tierdex-broker").await?;
        let js = jetstream::new(client.clone());
        let map = ClusterMap::open(&js, config.cluster.stream_replicas).await?;
        let b = Arc::new(Broker {
            client,
            js,
            map,
            config,
            turn: AtomicUsize::new(0),
            cache: std::sync::Mutex::new(HashMap::new()),
        });
        tokio::spawn(b.clone().rebalance());
        Ok(b)
    }

    /// Keeps every shard at its number of copies: replicas of nodes away
    /// for [`BrokerConfig::reassign_after`] go to live nodes (which replay
    /// the shard's stream), and copies missing since creation go to nodes
    /// that join. Several brokers may run it: the map's revisions make the
    /// first change win and the others read it again.
    pub async fn rebalance(self: Arc<Self>) {
        let mut away: HashMap<String, Instant> = HashMap::new();
        loop {
            if let Err(e) = self.rebalance_once(&mut away).await {
                tracing::warn!("rebalancing: {e}");
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn rebalance_once(&self, away: &mut HashMap<String, Instant>) -> crate::Result<()> {
        let live = self.map.live_nodes().await?;
        let indices = self.map.indices().await?;
        let assigned: std::collections::BTreeSet<&String> =
            indices.iter().flat_map(|m| m.assignment.iter().flatten()).collect();
        away.retain(|n, _| !live.contains(n) && assigned.contains(n));
        for n in assigned {
            if !live.contains(n) {
                away.entry(n.clone()).or_insert_with(Instant::now);
            }
        }
        let gone: Vec<String> = away
            .iter()
            .filter(|(_, since)| since.elapsed() >= self.config.reassign_after)
            .map(|(n, _)| n.clone())
            .collect();
        for meta in indices {
            let Some(next) = map::reassign(&meta.assignment, meta.replicas, &live, &gone) else {
                continue;
            };
            let Some((current, revision)) = self.map.index_revision(&meta.name).await? else {
                continue;
            };
            if current.assignment != meta.assignment {
                continue;
            }
            let changed = IndexMeta {
                assignment: next,
                ..current
            };
            if self.map.replace_index(&changed, revision).await? {
                tracing::info!(
                    "[{}]: replicas now on {:?} (away: {gone:?})",
                    changed.name,
                    changed.assignment
                );
                self.cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&changed.name);
            }
        }
        Ok(())
    }

    /// The cluster map.
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    async fn index(&self, name: &str) -> Res<IndexMeta> {
        let cached = self.cache.lock().unwrap_or_else(|p| p.into_inner()).get(name).cloned();
        if let Some((at, m)) = &cached {
            if at.elapsed() < MAP_TTL {
                return Ok(m.clone());
            }
        }
        match self.map.index(name).await {
            Ok(Some(m)) => {
                self.cache
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(name.to_string(), (Instant::now(), m.clone()));
                Ok(m)
            }
            Ok(None) => {
                self.cache.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
                Err(cluster_error(ClusterError::NoIndex(name.to_string())))
            }
            Err(e) => match cached {
                Some((_, m)) => {
                    tracing::warn!("reading the cluster map: {e}; using the entry of [{name}] read before");
                    Ok(m)
                }
                None => Err(cluster_error(e)),
            },
        }
    }

    /// Creates an index: its shards' streams, then its map entry with the
    /// replicas placed on the live nodes.
    pub async fn create_index(
        &self,
        name: &str,
        mappings: Value,
        shards: u32,
        copies: u32,
    ) -> crate::Result<IndexMeta> {
        names::check_index_name(name)?;
        if shards == 0 || shards > 1024 {
            return Err(ClusterError::Invalid(format!(
                "[number_of_shards] must be 1 to 1024, not {shards}"
            )));
        }
        let nodes = self.map.live_nodes().await?;
        if nodes.is_empty() {
            return Err(ClusterError::Nats(
                "no live node to hold the shards: start `tierdex node` first".into(),
            ));
        }
        let meta = IndexMeta {
            name: name.to_string(),
            shards,
            replicas: copies,
            mappings,
            assignment: map::assign(shards, copies, &nodes),
            uid: format!(
                "{:x}{:x}",
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
                std::process::id()
            ),
        };
        meta.schema()?;
        if self.map.index(name).await?.is_some() {
            return Err(ClusterError::Invalid(format!("index [{name}] already exists")));
        }
        for shard in 0..shards {
            self.js
                .get_or_create_stream(stream::Config {
                    name: names::stream(name, shard),
                    subjects: vec![names::write_subject(name, shard)],
                    num_replicas: self.config.cluster.stream_replicas,
                    storage: stream::StorageType::File,
                    duplicate_window: Duration::from_secs(120),
                    ..Default::default()
                })
                .await
                .map_err(ClusterError::nats)?;
        }
        self.map.create_index(&meta).await?;
        Ok(meta)
    }

    /// Waits until every assigned replica of the index answers, caught up
    /// with its stream (nodes open their replicas when they next read the
    /// map); false if some did not within `timeout`.
    pub async fn wait_active(&self, meta: &IndexMeta, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            let mut asks = Vec::new();
            for (shard, nodes) in meta.assignment.iter().enumerate() {
                for node in nodes {
                    let req = ShardRequest {
                        context: None,
                        index: meta.name.clone(),
                        uid: meta.uid.clone(),
                        shard: shard as u32,
                        ask: Ask::Status,
                    };
                    let payload: bytes::Bytes = serde_json::to_vec(&req).expect("serialises").into();
                    asks.push(async move {
                        let sent = self.client.request(names::node_subject(node), payload);
                        matches!(
                            tokio::time::timeout(Duration::from_secs(2), sent).await,
                            Ok(Ok(m)) if matches!(serde_json::from_slice::<Answer>(&m.payload), Ok(Answer::Status(s)) if s.ready)
                        )
                    });
                }
            }
            if join_all(asks).await.into_iter().all(|ok| ok) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Deletes an index: its map entry (nodes then drop their replicas)
    /// and its streams.
    pub async fn delete_index(&self, name: &str) -> crate::Result<()> {
        let Some(meta) = self.map.index(name).await? else {
            return Err(ClusterError::NoIndex(name.to_string()));
        };
        self.map.delete_index(name).await?;
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
        for shard in 0..meta.shards {
            if let Err(e) = self.js.delete_stream(names::stream(name, shard)).await {
                tracing::warn!("deleting the stream of shard {shard} of [{name}]: {e}");
            }
        }
        Ok(())
    }

    /// Asks `shard` where `pins` says (its open snapshot's node), or any of
    /// its replicas.
    async fn ask_at(&self, meta: &IndexMeta, shard: u32, pins: Option<&Pinned>, ask: &Ask) -> crate::Result<Answer> {
        let Some(p) = pins else {
            return self.ask(meta, shard, ask).await;
        };
        let (node, id) = &p.shards[shard as usize];
        let req = ShardRequest {
            index: meta.name.clone(),
            uid: meta.uid.clone(),
            shard,
            ask: ask.clone(),
            context: Some(ContextRef {
                id: id.clone(),
                keep_ms: p.keep_ms,
            }),
        };
        let payload: bytes::Bytes = serde_json::to_vec(&req).expect("serialises").into();
        let sent = self.client.request(names::node_subject(node), payload);
        let why = match tokio::time::timeout(self.config.replica_timeout, sent).await {
            Err(_) => format!("node {node} did not answer within {:?}", self.config.replica_timeout),
            Ok(Err(e)) => format!("node {node} (holding the search context): {e}"),
            Ok(Ok(msg)) => match serde_json::from_slice::<Answer>(&msg.payload) {
                Ok(Answer::Error { reason, bad: true }) => return Err(ClusterError::Invalid(reason)),
                Ok(Answer::Error { reason, .. }) => reason,
                Ok(a) => return Ok(a),
                Err(e) => format!("node {node} answered {e}"),
            },
        };
        Err(ClusterError::ShardFailed {
            index: meta.name.clone(),
            shard,
            why,
        })
    }

    /// Asks a shard's replicas in turn until one answers.
    async fn ask(&self, meta: &IndexMeta, shard: u32, ask: &Ask) -> crate::Result<Answer> {
        let nodes = &meta.assignment[shard as usize];
        if nodes.is_empty() {
            return Err(ClusterError::ShardFailed {
                index: meta.name.clone(),
                shard,
                why: "no node holds a replica".into(),
            });
        }
        let req = ShardRequest {
            index: meta.name.clone(),
            uid: meta.uid.clone(),
            shard,
            ask: ask.clone(),
            context: None,
        };
        let payload: bytes::Bytes = serde_json::to_vec(&req).expect("serialises").into();
        let start = self.turn.fetch_add(1, Ordering::Relaxed);
        let mut why = String::new();
        for i in 0..nodes.len() {
            let node = &nodes[(start + i) % nodes.len()];
            let sent = self.client.request(names::node_subject(node), payload.clone());
            match tokio::time::timeout(self.config.replica_timeout, sent).await {
                Err(_) => why = format!("node {node} did not answer within {:?}", self.config.replica_timeout),
                Ok(Err(e)) => why = format!("node {node}: {e}"),
                Ok(Ok(msg)) => match serde_json::from_slice::<Answer>(&msg.payload) {
                    Ok(Answer::Error { reason, bad: true }) => return Err(ClusterError::Invalid(reason)),
                    Ok(Answer::Error { reason, .. }) => why = reason,
                    Ok(a) => return Ok(a),
                    Err(e) => why = format!("node {node} answered {e}"),
                },
            }
            tracing::debug!("shard {shard} of [{}]: {why}; asking another replica", meta.name);
        }
        Err(ClusterError::ShardFailed {
            index: meta.name.clone(),
            shard,
            why,
        })
    }

    /// Asks every shard at once; the failed shards' errors are kept apart.
    async fn ask_all(&self, meta: &IndexMeta, ask: impl Fn(u32) -> Ask) -> Vec<(u32, crate::Result<Answer>)> {
        self.ask_all_at(meta, None, ask).await
    }

    /// [`Broker::ask_all`], each shard where `pins` says.
    async fn ask_all_at(
        &self,
        meta: &IndexMeta,
        pins: Option<&Pinned>,
        ask: impl Fn(u32) -> Ask,
    ) -> Vec<(u32, crate::Result<Answer>)> {
        let asks: Vec<(u32, Ask)> = (0..meta.shards).map(|s| (s, ask(s))).collect();
        join_all(
            asks.iter()
                .map(|(s, a)| async move { (*s, self.ask_at(meta, *s, pins, a).await) }),
        )
        .await
    }

    /// Publishes writes to their shards' streams; each item's stream
    /// sequence once stored, or why not.
    async fn publish(&self, meta: &IndexMeta, ops: Vec<WriteOp>) -> Vec<Result<(u32, u64), String>> {
        let max = self.client.server_info().max_payload;
        let mut acks = Vec::with_capacity(ops.len());
        for op in &ops {
            let id = match op {
                WriteOp::Index { id, .. } | WriteOp::Delete { id } | WriteOp::Update { id, .. } => id,
            };
            let shard = names::shard_of(id, meta.shards);
            let bytes = serde_json::to_vec(op).expect("serialises");
            if max > 0 && bytes.len() > max {
                acks.push((
                    shard,
                    Err(format!(
                        "document [{id}] takes {} bytes, above the NATS servers' max_payload of {max}",
                        bytes.len()
                    )),
                ));
                continue;
            }
            let sent = self
                .js
                .publish(names::write_subject(&meta.name, shard), bytes.into())
                .await;
            acks.push((shard, sent.map_err(|e| e.to_string())));
        }
        // The acknowledgements are awaited together: each waits up to the
        // JetStream timeout, which would add up one after another.
        join_all(acks.into_iter().map(|(shard, a)| async move {
            match a {
                Err(e) => Err(e),
                Ok(fut) => fut.await.map(|ack| (shard, ack.sequence)).map_err(|e| e.to_string()),
            }
        }))
        .await
    }

    /// Which of `ids` the index holds now (asked of the shards); with
    /// `real_time`, once the replicas have applied every write stored
    /// before (for `create` and `update`, which must know; plain index and
    /// delete items only report `created` or `updated` from it, and do not
    /// wait on replicas).
    async fn existing(&self, meta: &IndexMeta, ids: &[&str], real_time: bool) -> Res<Vec<Option<bool>>> {
        let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, id) in ids.iter().enumerate() {
            by_shard.entry(names::shard_of(id, meta.shards)).or_default().push(i);
        }
        let mut out = vec![None; ids.len()];
        let asks = by_shard.into_iter().map(|(shard, at)| async move {
            let ask = Ask::Fetch {
                ids: at.iter().map(|&i| ids[i].to_string()).collect(),
                source: Some(json!(false)),
                upto: match real_time {
                    true => self.last_sequence(meta, shard).await,
                    false => None,
                },
            };
            (at, self.ask(meta, shard, &ask).await)
        });
        for (at, r) in join_all(asks).await {
            match r {
                Ok(Answer::Fetch(found)) => {
                    for (&i, f) in at.iter().zip(found) {
                        out[i] = Some(f.is_some());
                    }
                }
                Ok(other) => return Err(unexpected(&other)),
                Err(ClusterError::Invalid(why)) => return Err(ApiError::bad_request(why)),
                // A replica busy (flushing a segment) or away: the write
                // does not wait on it; the caller decides per item.
                Err(e) => tracing::debug!("[{}]: whether ids exist is not known: {e}", meta.name),
            }
        }
        Ok(out)
    }

    /// Waits until every live replica of the shards has applied their
    /// streams up to `upto` (per shard) and made it searchable.
    async fn sync(&self, meta: &IndexMeta, upto: &BTreeMap<u32, u64>, timeout: Duration) -> (usize, usize) {
        let mut asks = Vec::new();
        for (&shard, &seq) in upto {
            for node in &meta.assignment[shard as usize] {
                let req = ShardRequest {
                    context: None,
                    index: meta.name.clone(),
                    uid: meta.uid.clone(),
                    shard,
                    ask: Ask::Sync {
                        upto: seq,
                        timeout_ms: timeout.as_millis() as u64,
                    },
                };
                let payload: bytes::Bytes = serde_json::to_vec(&req).expect("serialises").into();
                asks.push(async move {
                    let sent = self.client.request(names::node_subject(node), payload);
                    matches!(
                        tokio::time::timeout(timeout + Duration::from_secs(1), sent).await,
                        Ok(Ok(m)) if matches!(serde_json::from_slice::<Answer>(&m.payload), Ok(Answer::Synced(_)))
                    )
                });
            }
        }
        let done = join_all(asks).await;
        // A shard no node holds (its replicas being moved) is not synced:
        // it counts as one failed copy.
        let unheld = upto.keys().filter(|&&s| meta.assignment[s as usize].is_empty()).count();
        (done.iter().filter(|&&ok| ok).count(), done.len() + unheld)
    }

    /// The last stream sequence of each shard.
    /// The last stream sequence of `shard` (`None` when JetStream cannot
    /// say: reads then go on without waiting, as searches do without a
    /// quorum).
    async fn last_sequence(&self, meta: &IndexMeta, shard: u32) -> Option<u64> {
        let ask = async {
            let mut s = self.js.get_stream(names::stream(&meta.name, shard)).await.ok()?;
            Some(s.info().await.ok()?.state.last_sequence)
        };
        // While JetStream moves a stream's leader (a NATS server lost) it
        // may not answer for seconds: writes do not wait on that.
        tokio::time::timeout(LAST_SEQUENCE_WAIT, ask).await.ok().flatten()
    }

    async fn last_sequences(&self, meta: &IndexMeta) -> Res<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        for shard in 0..meta.shards {
            let mut s = self
                .js
                .get_stream(names::stream(&meta.name, shard))
                .await
                .map_err(|e| cluster_error(ClusterError::nats(e)))?;
            let info = s.info().await.map_err(|e| cluster_error(ClusterError::nats(e)))?;
            out.insert(shard, info.state.last_sequence);
        }
        Ok(out)
    }
}

fn unexpected(a: &Answer) -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        format!("a node answered out of turn: {a:?}"),
    )
}

/// The broker's routes, guarded as a server's are (authentication and
/// CORS per `guard`, JSON-only writes, JSON errors, the product header).
pub fn router(broker: Arc<Broker>, guard: Arc<tierdex_server::security::Guard>) -> Router {
    let routes = Router::new()
        .route("/", get(info))
        .route("/_cluster/health", get(health))
        .route("/{index}", put(create).delete(delete).get(get_index))
        .route("/{index}/_doc", post(index_doc))
        .route(
            "/{index}/_doc/{id}",
            put(index_doc_id).post(index_doc_id).get(get_doc).delete(delete_doc),
        )
        .route("/{index}/_update/{id}", post(update_doc))
        .route("/{index}/_mapping", get(get_mapping))
        .route("/{index}/_delete_by_query", post(delete_by_query))
        .route("/_mget", get(mget_all).post(mget_all))
        .route("/{index}/_mget", get(mget_in).post(mget_in))
        .route("/_bulk", post(bulk_all).put(bulk_all))
        .route("/{index}/_bulk", post(bulk).put(bulk))
        .route("/{index}/_search", get(search).post(search))
        .route("/_search", get(contexts::search_pit).post(contexts::search_pit))
        .route("/{index}/_pit", post(contexts::open_pit))
        .route("/_pit", axum::routing::delete(contexts::close_pit))
        .route(
            "/_search/scroll",
            get(contexts::next_page)
                .post(contexts::next_page)
                .delete(contexts::clear_scroll),
        )
        .route(
            "/_search/scroll/{id}",
            get(contexts::next_page_in_path)
                .post(contexts::next_page_in_path)
                .delete(contexts::clear_scroll_in_path),
        )
        .route("/{index}/_count", get(count).post(count))
        .route("/{index}/_refresh", post(refresh).get(refresh))
        .with_state(broker);
    tierdex_server::guarded(routes, guard).layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
}

async fn info() -> Json<Value> {
    Json(json!({
        "name": "tierdex-broker",
        "cluster_name": "tierdex",
        "cluster_uuid": "_na_",
        "version": {
            "number": tierdex_server::ES_API_VERSION,
            "distribution": "tierdex",
            "tierdex": env!("CARGO_PKG_VERSION"),
            "build_flavor": "default",
            "lucene_version": "none",
            "minimum_wire_compatibility_version": "7.17.0",
            "minimum_index_compatibility_version": "7.0.0",
        },
        "tagline": "tierdex: read as needed",
    }))
}

async fn health(State(b): State<Arc<Broker>>) -> Res<Json<Value>> {
    let nodes = b.map.live_nodes().await.map_err(cluster_error)?;
    let indices = b.map.indices().await.map_err(cluster_error)?;
    let (mut active, mut unassigned, mut red) = (0usize, 0usize, false);
    for m in &indices {
        for held in &m.assignment {
            let live = held.iter().filter(|n| nodes.contains(n)).count();
            active += live;
            unassigned += m.replicas as usize - live.min(m.replicas as usize);
            red |= live == 0;
        }
    }
    let status = match (red, unassigned) {
        (true, _) => "red",
        (false, 0) => "green",
        _ => "yellow",
    };
    Ok(Json(json!({
        "cluster_name": "tierdex",
        "status": status,
        "number_of_nodes": nodes.len(),
        "number_of_data_nodes": nodes.len(),
        "active_shards": active,
        "unassigned_shards": unassigned,
        "nodes": nodes,
    })))
}

fn setting(settings: Option<&Value>, key: &str, default: u64) -> Res<u64> {
    let Some(s) = settings else { return Ok(default) };
    let v = s.get(key).or_else(|| s.get("index").and_then(|i| i.get(key)));
    match v {
        None => Ok(default),
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_str().and_then(|t| t.parse().ok()))
            .ok_or_else(|| ApiError::bad_request(format!("[{key}] must be a whole number, not {v}"))),
    }
}

/// `PUT /{index}`: `mappings` (required: the shards must agree on them)
/// and `settings.number_of_shards` (default 1) and
/// `settings.number_of_replicas` (copies beyond the first, as in
/// Elasticsearch; default 1).
async fn create(State(b): State<Arc<Broker>>, Path(index): Path<String>, body: axum::body::Bytes) -> Res<Json<Value>> {
    let v = body_value(&body)?;
    let o = v.as_object().expect("an object");
    if let Some(k) = o.keys().find(|k| !["mappings", "settings"].contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in a cluster index creation (mappings, settings)"
        )));
    }
    let Some(mappings) = o.get("mappings") else {
        return Err(ApiError::bad_request(
            "a cluster index needs its [mappings] at creation: every shard must map fields alike",
        ));
    };
    let settings = o.get("settings");
    if let Some(s) = settings.and_then(Value::as_object) {
        let flat = s.get("index").and_then(Value::as_object).unwrap_or(s);
        if let Some(k) = flat
            .keys()
            .find(|k| !["number_of_shards", "number_of_replicas", "index"].contains(&k.as_str()))
        {
            return Err(ApiError::bad_request(format!(
                "[settings.{k}] is not supported in a cluster index (number_of_shards, number_of_replicas)"
            )));
        }
    }
    let shards = setting(settings, "number_of_shards", 1)?;
    let replicas = setting(settings, "number_of_replicas", 1)?;
    if replicas > 16 {
        return Err(ApiError::bad_request(format!(
            "[number_of_replicas] must be at most 16, not {replicas}"
        )));
    }
    let meta = b
        .create_index(
            &index,
            mappings.clone(),
            shards.min(u64::from(u32::MAX)) as u32,
            replicas as u32 + 1,
        )
        .await
        .map_err(cluster_error)?;
    let active = b.wait_active(&meta, Duration::from_secs(30)).await;
    Ok(Json(
        json!({ "acknowledged": true, "shards_acknowledged": active, "index": index }),
    ))
}

async fn delete(State(b): State<Arc<Broker>>, Path(index): Path<String>) -> Res<Json<Value>> {
    b.delete_index(&index).await.map_err(cluster_error)?;
    Ok(Json(json!({ "acknowledged": true })))
}

async fn get_index(State(b): State<Arc<Broker>>, Path(index): Path<String>) -> Res<Json<Value>> {
    let m = b.index(&index).await?;
    Ok(Json(json!({ index: {
        "mappings": m.mappings,
        "settings": { "index": {
            "number_of_shards": m.shards.to_string(),
            "number_of_replicas": (m.replicas.saturating_sub(1)).to_string(),
        }},
        "shards": m.assignment,
    }})))
}

/// `POST /{index}/_delete_by_query` (`query`): every shard's matching ids
/// (from its latest refreshed snapshot, as Elasticsearch's), deleted
/// through the shards' streams; shards that fail are listed in `failures`
/// and their documents left.
async fn delete_by_query(
    State(b): State<Arc<Broker>>,
    Path(index): Path<String>,
    q: Result<UrlQuery<WriteQuery>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    let started = Instant::now();
    let UrlQuery(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let refresh = q.wants_refresh()?;
    let v = body_value(&body)?;
    if let Some(k) = v.as_object().and_then(|o| o.keys().find(|k| *k != "query")) {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in a delete by query (query)"
        )));
    }
    let Some(query) = v.get("query").cloned() else {
        return Err(ApiError::bad_request("a delete by query needs a [query]"));
    };
    let meta = b.index(&index).await?;
    let schema = meta.schema().map_err(cluster_error)?;
    tierdex::query::dsl::query(&schema, &tierdex::query::QueryLimits::default(), &query).map_err(ApiError::engine)?;
    let mut failures = Vec::new();
    let mut ids = Vec::new();
    for (shard, r) in b.ask_all(&meta, |_| Ask::Matching { query: query.clone() }).await {
        match r {
            Ok(Answer::Ids(found)) => ids.extend(found),
            Ok(other) => return Err(unexpected(&other)),
            Err(ClusterError::Invalid(m)) => return Err(invalid(m)),
            Err(e) => failures.push(json!({ "index": index, "shard": shard, "cause": { "type": "shard_failure", "reason": e.to_string() } })),
        }
    }
    let total = ids.len();
    let (mut deleted, mut batches) = (0usize, 0usize);
    let mut upto: BTreeMap<u32, u64> = BTreeMap::new();
    for chunk in ids.chunks(1000) {
        let ops = chunk.iter().map(|id| WriteOp::Delete { id: id.clone() }).collect();
        for (id, r) in chunk.iter().zip(b.publish(&meta, ops).await) {
            match r {
                Ok((shard, seq)) => {
                    deleted += 1;
                    let e = upto.entry(shard).or_default();
                    *e = (*e).max(seq);
                }
                Err(e) => {
                    failures.push(json!({ "index": index, "id": id, "cause": { "type": "unavailable", "reason": e } }))
                }
            }
        }
        batches += 1;
    }
    if refresh && !upto.is_empty() {
        b.sync(&meta, &upto, Duration::from_secs(60)).await;
    }
    Ok(Json(json!({
        "took": started.elapsed().as_millis() as u64, "timed_out": false, "total": total, "deleted": deleted,
        "batches": batches, "version_conflicts": 0, "noops": 0, "failures": failures,
        "retries": { "bulk": 0, "search": 0 }, "throttled_millis": 0, "requests_per_second": -1.0,
        "throttled_until_millis": 0,
    })))
}

/// `GET /{index}/_mapping`.
async fn get_mapping(State(b): State<Arc<Broker>>, Path(index): Path<String>) -> Res<Json<Value>> {
    let m = b.index(&index).await?;
    Ok(Json(json!({ index: { "mappings": m.mappings } })))
}

/// An id of an `_mget` request (a string, or a number as text).
fn mget_id(v: Option<&Value>, what: &str) -> Res<String> {
    match v {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        _ => Err(ApiError::bad_request(format!("{what} needs an `_id` (a string)"))),
    }
}

async fn mget_all(State(b): State<Arc<Broker>>, body: axum::body::Bytes) -> Res<Json<Value>> {
    mget(&b, None, &body).await
}

async fn mget_in(State(b): State<Arc<Broker>>, Path(index): Path<String>, body: axum::body::Bytes) -> Res<Json<Value>> {
    mget(&b, Some(index), &body).await
}

/// `POST /_mget` and `/{index}/_mget` (`ids`, or `docs` with `_index`,
/// `_id`, `_source`): real-time gets, each shard asked once.
async fn mget(b: &Broker, path_index: Option<String>, body: &[u8]) -> Res<Json<Value>> {
    let v = body_value(body)?;
    let o = v.as_object().expect("an object");
    if let Some(k) = o.keys().find(|k| *k != "docs" && *k != "ids") {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in _mget (docs, ids)"
        )));
    }
    // (index, id, _source filter) in the request's order.
    let mut wanted: Vec<(String, String, Option<Value>)> = Vec::new();
    if let Some(ids) = o.get("ids") {
        let Some(ix) = &path_index else {
            return Err(ApiError::bad_request(
                "[ids] needs an index in the path: /{index}/_mget",
            ));
        };
        let list = ids
            .as_array()
            .ok_or_else(|| ApiError::bad_request("[ids] must be a list"))?;
        for id in list {
            wanted.push((ix.clone(), mget_id(Some(id), "[ids] entry")?, None));
        }
    }
    if let Some(docs) = o.get("docs") {
        let list = docs
            .as_array()
            .ok_or_else(|| ApiError::bad_request("[docs] must be a list"))?;
        for d in list {
            let d = d
                .as_object()
                .ok_or_else(|| ApiError::bad_request("[docs] entries are objects"))?;
            if let Some(k) = d.keys().find(|k| !["_id", "_index", "_source"].contains(&k.as_str())) {
                return Err(ApiError::bad_request(format!(
                    "[docs] entry key [{k}] is not supported"
                )));
            }
            let id = mget_id(d.get("_id"), "a [docs] entry")?;
            let ix = match (d.get("_index"), &path_index) {
                (Some(Value::String(i)), _) => i.clone(),
                (Some(other), _) => {
                    return Err(ApiError::bad_request(format!("[_index] must be a string, not {other}")))
                }
                (None, Some(ix)) => ix.clone(),
                (None, None) => return Err(ApiError::bad_request(format!("[docs] entry [{id}] names no `_index`"))),
            };
            if let Some(s) = d.get("_source") {
                tierdex::query::dsl::SourceFilter::parse(s).map_err(ApiError::engine)?;
            }
            wanted.push((ix, id, d.get("_source").cloned()));
        }
    }
    // One real-time fetch per (index, shard, _source filter).
    let mut groups: BTreeMap<(String, u32, String), Vec<usize>> = BTreeMap::new();
    let mut metas: HashMap<String, Res<IndexMeta>> = HashMap::new();
    for (i, (ix, id, src)) in wanted.iter().enumerate() {
        if !metas.contains_key(ix) {
            metas.insert(ix.clone(), b.index(ix).await);
        }
        if let Some(Ok(m)) = metas.get(ix) {
            let key = (
                ix.clone(),
                names::shard_of(id, m.shards),
                src.as_ref().map_or(String::new(), Value::to_string),
            );
            groups.entry(key).or_default().push(i);
        }
    }
    let mut out: Vec<Value> = wanted
        .iter()
        .map(|(ix, id, _)| match metas.get(ix) {
            Some(Err(e)) => json!({ "_index": ix, "_id": id, "error": { "type": "index_not_found_exception", "reason": e.reason() } }),
            _ => Value::Null,
        })
        .collect();
    for ((ix, shard, _), at) in groups {
        let meta = metas[&ix].as_ref().expect("known");
        let ask = Ask::Fetch {
            ids: at.iter().map(|&i| wanted[i].1.clone()).collect(),
            source: wanted[at[0]].2.clone(),
            upto: b.last_sequence(meta, shard).await,
        };
        match b.ask(meta, shard, &ask).await {
            Ok(Answer::Fetch(docs)) => {
                for (&i, d) in at.iter().zip(docs) {
                    let id = &wanted[i].1;
                    out[i] = match d {
                        Some(source) => json!({ "_index": ix, "_id": id, "found": true, "_source": source }),
                        None => json!({ "_index": ix, "_id": id, "found": false }),
                    };
                }
            }
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => {
                let reason = e.to_string();
                for &i in &at {
                    out[i] = json!({ "_index": ix, "_id": wanted[i].1, "error": { "type": "unavailable", "reason": reason } });
                }
            }
        }
    }
    Ok(Json(json!({ "docs": out })))
}

/// `?refresh=` of a write; any other parameter is a 400 naming it.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct WriteQuery {
    refresh: Option<String>,
    /// Accepted: answers are JSON either way.
    #[allow(dead_code)]
    pretty: Option<String>,
}

impl WriteQuery {
    fn wants_refresh(&self) -> Res<bool> {
        match self.refresh.as_deref() {
            None | Some("false") => Ok(false),
            Some("" | "true" | "wait_for") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "[refresh] must be true, false or wait_for, not [{other}]"
            ))),
        }
    }
}

/// Checks a document against the index's mappings before it is published
/// (a record that would not apply is refused here, not in the nodes).
fn check_doc(meta: &IndexMeta, schema: &mut tierdex::Schema, id: &str, source: &Value) -> Res<()> {
    let doc = crate::node::source_doc(id.to_string(), source).map_err(ApiError::bad_request)?;
    let before = schema.len();
    schema.admit(&doc).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "mapper_parsing_exception",
            format!("index [{}]: {e}", meta.name),
        )
    })?;
    if schema.len() != before {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "strict_dynamic_mapping_exception",
            format!(
                "index [{}]: document [{id}] has fields the mappings do not have; a cluster index's mappings are fixed at creation",
                meta.name
            ),
        ));
    }
    Ok(())
}

async fn write_one(b: &Broker, meta: &IndexMeta, op: WriteOp, refresh: bool) -> Res<(u32, u64)> {
    let r = b.publish(meta, vec![op]).await.pop().expect("one");
    let (shard, seq) = r.map_err(|e| ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e))?;
    if refresh {
        b.sync(meta, &BTreeMap::from([(shard, seq)]), Duration::from_secs(30))
            .await;
    }
    Ok((shard, seq))
}

async fn put_doc(b: &Broker, index: &str, id: String, q: WriteQuery, body: &[u8]) -> Res<(StatusCode, Json<Value>)> {
    let meta = b.index(index).await?;
    let source = body_value(body)?;
    let mut schema = meta.schema().map_err(cluster_error)?;
    check_doc(&meta, &mut schema, &id, &source)?;
    // Unknown (no replica answered in time): written, reported as a replacement.
    let existed = b.existing(&meta, &[&id], false).await?[0].unwrap_or(true);
    let (shard, seq) = write_one(b, &meta, WriteOp::Index { id: id.clone(), source }, q.wants_refresh()?).await?;
    let (status, result) = match existed {
        true => (StatusCode::OK, "updated"),
        false => (StatusCode::CREATED, "created"),
    };
    Ok((
        status,
        Json(json!({ "_index": index, "_id": id, "result": result, "_seq_no": seq,
            "_shards": { "total": meta.replicas, "successful": 1, "failed": 0 }, "_shard": shard })),
    ))
}

fn new_id() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!(
        "{nanos:x}{:04x}{:x}",
        NEXT.fetch_add(1, Ordering::Relaxed),
        std::process::id()
    )
}

async fn index_doc(
    State(b): State<Arc<Broker>>,
    Path(index): Path<String>,
    UrlQuery(q): UrlQuery<WriteQuery>,
    body: axum::body::Bytes,
) -> Res<(StatusCode, Json<Value>)> {
    put_doc(&b, &index, new_id(), q, &body).await
}

async fn index_doc_id(
    State(b): State<Arc<Broker>>,
    Path((index, id)): Path<(String, String)>,
    UrlQuery(q): UrlQuery<WriteQuery>,
    body: axum::body::Bytes,
) -> Res<(StatusCode, Json<Value>)> {
    put_doc(&b, &index, id, q, &body).await
}

async fn delete_doc(
    State(b): State<Arc<Broker>>,
    Path((index, id)): Path<(String, String)>,
    UrlQuery(q): UrlQuery<WriteQuery>,
) -> Res<(StatusCode, Json<Value>)> {
    let meta = b.index(&index).await?;
    let existed = b.existing(&meta, &[&id], false).await?[0].unwrap_or(true);
    let (_, seq) = write_one(&b, &meta, WriteOp::Delete { id: id.clone() }, q.wants_refresh()?).await?;
    let (status, result) = match existed {
        true => (StatusCode::OK, "deleted"),
        false => (StatusCode::NOT_FOUND, "not_found"),
    };
    Ok((
        status,
        Json(json!({ "_index": index, "_id": id, "result": result, "_seq_no": seq })),
    ))
}

async fn get_doc(
    State(b): State<Arc<Broker>>,
    Path((index, id)): Path<(String, String)>,
) -> Res<(StatusCode, Json<Value>)> {
    let meta = b.index(&index).await?;
    let shard = names::shard_of(&id, meta.shards);
    let ask = Ask::Fetch {
        ids: vec![id.clone()],
        source: None,
        upto: b.last_sequence(&meta, shard).await,
    };
    match b.ask(&meta, shard, &ask).await.map_err(cluster_error)? {
        Answer::Fetch(mut v) => Ok(match v.pop().flatten() {
            Some(source) => (
                StatusCode::OK,
                Json(json!({ "_index": index, "_id": id, "found": true, "_source": source })),
            ),
            None => (
                StatusCode::NOT_FOUND,
                Json(json!({ "_index": index, "_id": id, "found": false })),
            ),
        }),
        other => Err(unexpected(&other)),
    }
}

/// An update's body (`doc`, `upsert`, `doc_as_upsert`, `detect_noop`) as
/// a stream write, checked against the mapping; and `detect_noop`.
fn update_op(meta: &IndexMeta, schema: &mut tierdex::Schema, id: &str, body: &Value) -> Res<(WriteOp, bool)> {
    let o = body
        .as_object()
        .ok_or_else(|| ApiError::bad_request("an update is a JSON object"))?;
    if let Some(k) = o
        .keys()
        .find(|k| !["doc", "upsert", "doc_as_upsert", "detect_noop"].contains(&k.as_str()))
    {
        return Err(ApiError::bad_request(format!(
            "[{k}] is not supported in an update (doc, upsert, doc_as_upsert, detect_noop)"
        )));
    }
    let flag = |k: &str, default: bool| match o.get(k) {
        None => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiError::bad_request(format!(
            "[{k}] must be true or false, not {other}"
        ))),
    };
    let (doc_as_upsert, detect_noop) = (flag("doc_as_upsert", false)?, flag("detect_noop", true)?);
    let (doc, upsert) = (o.get("doc").cloned(), o.get("upsert").cloned());
    for (k, x) in [("doc", &doc), ("upsert", &upsert)] {
        match x {
            Some(v) if !v.is_object() => return Err(ApiError::bad_request(format!("[{k}] must be an object"))),
            Some(v) => check_doc(meta, schema, id, v)?,
            None => {}
        }
    }
    if doc.is_none() && upsert.is_none() {
        return Err(ApiError::bad_request("an update needs [doc] (or [upsert])"));
    }
    Ok((
        WriteOp::Update {
            id: id.to_string(),
            doc,
            upsert,
            doc_as_upsert,
        },
        detect_noop,
    ))
}

/// `POST /{index}/_update/{id}`: merges `doc` into the document, or creates
/// it from `upsert` (or from `doc` with `doc_as_upsert`). The merge is
/// applied by every replica at the update's place in the shard's stream,
/// so concurrent updates of one document are applied one after the other
/// and none is lost; the answer (`updated`, `created`, `noop`, or 404 for
/// a missing document) is judged from a replica's document now.
async fn update_doc(
    State(b): State<Arc<Broker>>,
    Path((index, id)): Path<(String, String)>,
    q: Result<UrlQuery<WriteQuery>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Res<(StatusCode, Json<Value>)> {
    let UrlQuery(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let meta = b.index(&index).await?;
    let mut schema = meta.schema().map_err(cluster_error)?;
    let (op, detect_noop) = update_op(&meta, &mut schema, &id, &body_value(&body)?)?;
    let WriteOp::Update {
        doc,
        upsert,
        doc_as_upsert,
        ..
    } = &op
    else {
        unreachable!("an update")
    };
    let shard = names::shard_of(&id, meta.shards);
    let ask = Ask::Fetch {
        ids: vec![id.clone()],
        source: None,
        upto: b.last_sequence(&meta, shard).await,
    };
    // `None`: no replica could tell in time (the update goes ahead).
    let current = match b.ask(&meta, shard, &ask).await {
        Ok(Answer::Fetch(mut v)) => Some(v.pop().flatten()),
        _ => None,
    };
    let answer = |status: StatusCode, result: &str, seq: Option<u64>| {
        let mut v = json!({ "_index": index, "_id": id, "result": result, "_shard": shard,
            "_shards": { "total": meta.replicas, "successful": 1, "failed": 0 } });
        if let Some(s) = seq {
            v["_seq_no"] = json!(s);
        }
        (status, Json(v))
    };
    match &current {
        Some(None) if upsert.is_none() && !(*doc_as_upsert && doc.is_some()) => {
            return Err(ApiError::new(
                StatusCode::NOT_FOUND,
                "document_missing_exception",
                format!("[{id}]: document missing"),
            ))
        }
        Some(Some(cur)) => {
            let mut after = cur.clone();
            if let Some(d) = doc {
                tierdex_server::es::merge_source(&mut after, d);
            }
            if doc.is_none() || (detect_noop && after == *cur) {
                return Ok(answer(StatusCode::OK, "noop", None));
            }
        }
        _ => {}
    }
    let (_, seq) = write_one(&b, &meta, op, q.wants_refresh()?).await?;
    Ok(match current {
        Some(None) => answer(StatusCode::CREATED, "created", Some(seq)),
        _ => answer(StatusCode::OK, "updated", Some(seq)),
    })
}

async fn bulk_all(
    State(b): State<Arc<Broker>>,
    UrlQuery(q): UrlQuery<WriteQuery>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    run_bulk(&b, None, q, &body).await
}

async fn bulk(
    State(b): State<Arc<Broker>>,
    Path(index): Path<String>,
    UrlQuery(q): UrlQuery<WriteQuery>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    run_bulk(&b, Some(&index), q, &body).await
}

/// One bulk item as parsed.
struct Item {
    action: String,
    index: String,
    id: String,
    op: Result<BulkOp, ApiError>,
}

/// A bulk item as parsed: a write, or an update's body (read against the
/// index's mapping once the index is known).
enum BulkOp {
    Write(WriteOp),
    Update(Value),
}

fn parse_bulk(default_index: Option<&str>, body: &[u8]) -> Res<Vec<Item>> {
    let text = std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the bulk body is not UTF-8"))?;
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let mut items = Vec::new();
    while let Some((n, line)) = lines.next() {
        let meta: Value = serde_json::from_str(line)
            .map_err(|e| ApiError::bad_request(format!("bulk line {}: not JSON: {e}", n + 1)))?;
        let Some((action, m)) = meta.as_object().filter(|o| o.len() == 1).and_then(|o| o.iter().next()) else {
            return Err(ApiError::bad_request(format!(
                "bulk line {}: an action must be an object with one key (index, create, update, delete)",
                n + 1
            )));
        };
        let index = match m.get("_index").and_then(Value::as_str).or(default_index) {
            Some(i) => i.to_string(),
            None => return Err(ApiError::bad_request(format!("bulk line {}: no [_index]", n + 1))),
        };
        let id = m.get("_id").and_then(Value::as_str).map(str::to_string);
        match action.as_str() {
            "delete" => {
                let Some(id) = id else {
                    return Err(ApiError::bad_request(format!(
                        "bulk line {}: a delete needs an [_id]",
                        n + 1
                    )));
                };
                items.push(Item {
                    action: action.clone(),
                    index,
                    id: id.clone(),
                    op: Ok(BulkOp::Write(WriteOp::Delete { id })),
                });
            }
            "update" => {
                let Some(id) = id else {
                    return Err(ApiError::bad_request(format!(
                        "bulk line {}: an update needs an [_id]",
                        n + 1
                    )));
                };
                let Some((_, body)) = lines.next() else {
                    return Err(ApiError::bad_request(format!(
                        "bulk line {}: the update has no body line after it",
                        n + 1
                    )));
                };
                // Read against the mapping once the index is known.
                let op = serde_json::from_str::<Value>(body)
                    .map_err(|e| ApiError::bad_request(format!("the update is not JSON: {e}")))
                    .map(BulkOp::Update);
                items.push(Item {
                    action: action.clone(),
                    index,
                    id,
                    op,
                });
            }
            "index" | "create" => {
                let Some((_, doc)) = lines.next() else {
                    return Err(ApiError::bad_request(format!(
                        "bulk line {}: the action has no document line after it",
                        n + 1
                    )));
                };
                let id = id.unwrap_or_else(new_id);
                let op = serde_json::from_str::<Value>(doc)
                    .map_err(|e| ApiError::bad_request(format!("the document is not JSON: {e}")))
                    .map(|source| BulkOp::Write(WriteOp::Index { id: id.clone(), source }));
                items.push(Item {
                    action: action.clone(),
                    index,
                    id,
                    op,
                });
            }
            other => {
                return Err(ApiError::bad_request(format!(
                    "bulk line {}: [{other}] is not supported by the cluster broker (index, create, update, delete)",
                    n + 1
                )))
            }
        }
    }
    Ok(items)
}

fn item_error(status: u16, kind: &str, reason: &str) -> Value {
    json!({ "status": status, "error": { "type": kind, "reason": reason } })
}

async fn run_bulk(b: &Broker, default_index: Option<&str>, q: WriteQuery, body: &[u8]) -> Res<Json<Value>> {
    let started = Instant::now();
    let refresh = q.wants_refresh()?;
    let mut items = parse_bulk(default_index, body)?;
    let mut results: Vec<Option<Value>> = vec![None; items.len()];
    let mut by_index: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        by_index.entry(it.index.clone()).or_default().push(i);
    }
    for (name, at) in by_index {
        let meta = match b.index(&name).await {
            Ok(m) => m,
            Err(_) => {
                for &i in &at {
                    results[i] = Some(item_error(
                        404,
                        "index_not_found_exception",
                        &format!("no such index [{name}]"),
                    ));
                }
                continue;
            }
        };
        let mut schema = meta.schema().map_err(cluster_error)?;
        let ids: Vec<&str> = at.iter().map(|&i| items[i].id.as_str()).collect();
        let real_time = at
            .iter()
            .any(|&i| matches!(items[i].action.as_str(), "create" | "update"));
        let mut present: HashMap<String, Option<bool>> = ids
            .iter()
            .zip(b.existing(&meta, &ids, real_time).await?)
            .map(|(id, e)| (id.to_string(), e))
            .collect();
        let mut ops = Vec::new();
        let mut sent = Vec::new();
        for &i in &at {
            let it = &mut items[i];
            let op = match std::mem::replace(&mut it.op, Err(ApiError::bad_request(""))) {
                Err(e) => {
                    results[i] = Some(item_error(400, "mapper_parsing_exception", &e.reason()));
                    continue;
                }
                Ok(op) => op,
            };
            let op = match op {
                BulkOp::Update(body) => match update_op(&meta, &mut schema, &it.id, &body) {
                    Ok((op, _)) => op,
                    Err(e) => {
                        results[i] = Some(item_error(400, "illegal_argument_exception", &e.reason()));
                        continue;
                    }
                },
                BulkOp::Write(op) => op,
            };
            if let WriteOp::Index { id, source } = &op {
                if let Err(e) = check_doc(&meta, &mut schema, id, source) {
                    results[i] = Some(item_error(400, "mapper_parsing_exception", &e.reason()));
                    continue;
                }
            }
            let known = present.get(&it.id).copied().flatten();
            if let WriteOp::Update {
                doc,
                upsert,
                doc_as_upsert,
                ..
            } = &op
            {
                let creates = upsert.is_some() || (*doc_as_upsert && doc.is_some());
                if known == Some(false) && !creates {
                    results[i] = Some(item_error(
                        404,
                        "document_missing_exception",
                        &format!("[{}]: document missing", it.id),
                    ));
                    continue;
                }
                // Unknown: applied in stream order all the same, reported
                // as an update.
                let (status, result) = match known {
                    Some(false) => (201, "created"),
                    _ => (200, "updated"),
                };
                present.insert(it.id.clone(), Some(true));
                ops.push(op);
                sent.push((i, status, result));
                continue;
            }
            if it.action == "create" && known.is_none() {
                results[i] = Some(item_error(
                    503,
                    "unavailable",
                    &format!(
                        "[{}]: no replica could tell in time whether the id is new; not written",
                        it.id
                    ),
                ));
                continue;
            }
            // Unknown (no replica answered in time): written all the same,
            // reported as a replacement.
            let existed = known.unwrap_or(true);
            if it.action == "create" && existed {
                results[i] = Some(item_error(
                    409,
                    "version_conflict_engine_exception",
                    &format!("[{}]: document already exists", it.id),
                ));
                continue;
            }
            let (status, result) = match (&op, existed) {
                (WriteOp::Index { .. }, true) => (200, "updated"),
                (WriteOp::Index { .. }, false) => (201, "created"),
                (WriteOp::Delete { .. }, true) => (200, "deleted"),
                (WriteOp::Delete { .. }, false) => (404, "not_found"),
                (WriteOp::Update { .. }, _) => unreachable!("answered above"),
            };
            present.insert(it.id.clone(), Some(matches!(op, WriteOp::Index { .. })));
            ops.push(op);
            sent.push((i, status, result));
        }
        let mut upto: BTreeMap<u32, u64> = BTreeMap::new();
        for ((i, status, result), r) in sent.into_iter().zip(b.publish(&meta, ops).await) {
            results[i] = Some(match r {
                Ok((shard, seq)) => {
                    let e = upto.entry(shard).or_default();
                    *e = (*e).max(seq);
                    json!({ "_index": name, "_id": items[i].id, "status": status, "result": result, "_seq_no": seq })
                }
                Err(e) => item_error(503, "unavailable", &format!("not stored by JetStream: {e}")),
            });
        }
        if refresh && !upto.is_empty() {
            b.sync(&meta, &upto, Duration::from_secs(60)).await;
        }
    }
    let mut errors = false;
    let out: Vec<Value> = items
        .iter()
        .zip(results)
        .map(|(it, r)| {
            let mut r = r.expect("every item answered");
            if r.get("error").is_some() {
                errors = true;
                r["_index"] = json!(it.index);
                r["_id"] = json!(it.id);
            }
            json!({ it.action.clone(): r })
        })
        .collect();
    Ok(Json(json!({
        "took": started.elapsed().as_millis() as u64,
        "errors": errors,
        "items": out,
    })))
}

/// The URI parameters of a search; any other is a 400 naming it.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct SearchQuery {
    size: Option<usize>,
    from: Option<usize>,
    /// Keep a scroll open this long (`1m`).
    scroll: Option<String>,
    /// `hits.total` as a number.
    rest_total_hits_as_int: Option<bool>,
    /// Accepted: answers are JSON either way.
    #[allow(dead_code)]
    pretty: Option<String>,
}

fn body_usize(body: &Value, key: &str) -> Res<Option<usize>> {
    match body.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(n as usize))
            .ok_or_else(|| ApiError::bad_request(format!("[{key}] must be a whole number ≥ 0, not {v}"))),
    }
}

/// A hit of a page: from which shard, with its `_source` and `highlight`
/// once fetched.
struct PageHit {
    hit: ShardHit,
    shard: u32,
    source: Option<Value>,
    highlight: Option<Value>,
}

/// A search's answer gathered from the shards.
struct Gathered {
    hits: Vec<PageHit>,
    order: Order,
    count: u64,
    aggregations: Option<Value>,
    shards: u32,
    failures: Vec<Value>,
}

async fn gather(
    b: &Broker,
    meta: &IndexMeta,
    body: &Value,
    (from, size, count): (usize, usize, bool),
    pins: Option<&Pinned>,
) -> Res<Gathered> {
    let query = body.get("query").cloned();
    let aggs_v = body.get("aggs").or_else(|| body.get("aggregations")).cloned();
    let schema = meta.schema().map_err(cluster_error)?;
    let limits = tierdex::query::QueryLimits::default();
    // Checked here first: a bad query or aggregation is the request's
    // fault, answered once rather than per shard.
    if let Some(q) = &query {
        tierdex::query::dsl::query(&schema, &limits, q).map_err(ApiError::engine)?;
    }
    let order = Order::parse(&schema, body, meta.shards).map_err(ApiError::engine)?;
    let highlight = body.get("highlight").cloned();
    if let Some(h) = &highlight {
        tierdex::query::dsl::HighlightSpec::parse(&schema, h).map_err(ApiError::engine)?;
    }
    let aggs_req = match &aggs_v {
        None => None,
        Some(a) => {
            tierdex::aggs::Aggregations::from_body(&schema, &limits, json!({ "aggs": a }).as_object().expect("object"))
                .map_err(ApiError::engine)?
        }
    };
    let mut failures = Vec::new();
    let mut failed = vec![false; meta.shards as usize];
    let fail = |failures: &mut Vec<Value>, failed: &mut Vec<bool>, shard: u32, e: ClusterError| -> Res<()> {
        if let ClusterError::Invalid(m) = e {
            return Err(invalid(m));
        }
        failed[shard as usize] = true;
        failures.push(json!({ "shard": shard, "index": meta.name, "reason": { "type": "shard_failure", "reason": e.to_string() } }));
        Ok(())
    };
    let mut global = GlobalStats::default();
    for (shard, r) in b.ask_all_at(meta, pins, |_| Ask::Stats { query: query.clone() }).await {
        match r {
            Ok(Answer::Stats(g)) => global.merge(&g),
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => fail(&mut failures, &mut failed, shard, e)?,
        }
    }
    let k = from + size;
    let search = |shard| Ask::Search {
        query: query.clone(),
        k,
        count,
        aggs: aggs_v.clone(),
        global: global.clone(),
        sort: order.node_sort(),
        after: order.shard_after(shard),
    };
    let mut hits: Vec<(ShardHit, u32)> = Vec::new();
    let mut total = 0u64;
    let mut partial = aggs_req.as_ref().map(tierdex::aggs::AggsPartial::empty);
    for (shard, r) in b.ask_all_at(meta, pins, search).await {
        if failed[shard as usize] {
            continue;
        }
        match r {
            Ok(Answer::Search {
                hits: h,
                count: c,
                aggs,
            }) => {
                total += c.unwrap_or(0);
                hits.extend(h.into_iter().map(|h| (h, shard)));
                if let (Some(m), Some(p)) = (partial.as_mut(), aggs) {
                    m.merge(p);
                }
            }
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => fail(&mut failures, &mut failed, shard, e)?,
        }
    }
    hits.sort_by(|a, b| order.cmp((&a.0, a.1), (&b.0, b.1)));
    let mut page: Vec<PageHit> = hits
        .into_iter()
        .skip(from)
        .take(size)
        .map(|(hit, shard)| PageHit {
            hit,
            shard,
            source: None,
            highlight: None,
        })
        .collect();
    // Fetch phase: `_source` and highlights from the shards holding the page.
    let source = body.get("_source").cloned();
    let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, h) in page.iter().enumerate() {
        by_shard.entry(h.shard).or_default().push(i);
    }
    let ids = |at: &[usize]| at.iter().map(|&i| page[i].hit.id.clone()).collect::<Vec<_>>();
    let mut asks = Vec::new();
    for (&shard, at) in &by_shard {
        if source != Some(json!(false)) {
            asks.push((
                shard,
                Ask::Fetch {
                    ids: ids(at),
                    source: source.clone(),
                    upto: None,
                },
            ));
        }
        if let Some(h) = &highlight {
            asks.push((
                shard,
                Ask::Highlight {
                    ids: ids(at),
                    query: query.clone(),
                    highlight: h.clone(),
                },
            ));
        }
    }
    let fetches = asks
        .iter()
        .map(|(shard, ask)| async move { (*shard, b.ask_at(meta, *shard, pins, ask).await) });
    for (shard, r) in join_all(fetches).await {
        match r {
            Ok(Answer::Fetch(docs)) => {
                for (&i, d) in by_shard[&shard].iter().zip(docs) {
                    page[i].source = d;
                }
            }
            Ok(Answer::Highlights(h)) => {
                for (&i, d) in by_shard[&shard].iter().zip(h) {
                    page[i].highlight = Some(d);
                }
            }
            Ok(other) => return Err(unexpected(&other)),
            Err(e) => fail(&mut failures, &mut failed, shard, e)?,
        }
    }
    let aggregations = match (&aggs_req, &partial) {
        (Some(req), Some(p)) => Some(tierdex::aggs::finalize(req, p).map_err(ApiError::engine)?),
        _ => None,
    };
    Ok(Gathered {
        hits: page,
        order,
        count: total,
        aggregations,
        shards: meta.shards,
        failures,
    })
}

fn shards_json(g: &Gathered) -> Value {
    let failed = g.failures.len() as u32;
    let mut s =
        json!({ "total": g.shards, "successful": g.shards - failed.min(g.shards), "skipped": 0, "failed": failed });
    if failed > 0 {
        s["failures"] = json!(g.failures);
    }
    s
}

/// The keys a search body may have.
const SEARCH_KEYS: &[&str] = &[
    "query",
    "size",
    "from",
    "_source",
    "aggs",
    "aggregations",
    "track_total_hits",
    "timeout",
    "sort",
    "search_after",
    "highlight",
    "pit",
];

/// Refuses a search body key the broker does not take (`pit` only where
/// `pit` is true).
fn check_search_keys(body: &Value, pit: bool) -> Res<()> {
    for key in body.as_object().into_iter().flat_map(|o| o.keys()) {
        if !SEARCH_KEYS.contains(&key.as_str()) || (key == "pit" && !pit) {
            return Err(ApiError::bad_request(format!(
                "[{key}] is not supported by the cluster broker here (query, size, from, sort, search_after, \
                 _source, highlight, aggs, track_total_hits; pit in /_search without an index)"
            )));
        }
    }
    Ok(())
}

/// `from` and `size` of a search (the body's, else the URI's).
fn window(body: &Value, q: &SearchQuery) -> Res<(usize, usize)> {
    let size = body_usize(body, "size")?.or(q.size).unwrap_or(10);
    let from = body_usize(body, "from")?.or(q.from).unwrap_or(0);
    if from.saturating_add(size) > MAX_WINDOW {
        return Err(ApiError::bad_request(format!(
            "[from] + [size] must be at most {MAX_WINDOW}, not {}",
            from.saturating_add(size)
        )));
    }
    Ok((from, size))
}

/// Runs a search over `meta` (from the snapshots `pins` names, if any) and
/// answers in Elasticsearch's shape; also the gathered hits.
async fn run_search(
    b: &Broker,
    meta: &IndexMeta,
    body: &Value,
    (from, size, count): (usize, usize, bool),
    pins: Option<&Pinned>,
    q: &SearchQuery,
) -> Res<(Value, Gathered)> {
    let started = Instant::now();
    let g = gather(b, meta, body, (from, size, count), pins).await?;
    let hits: Vec<Value> = g
        .hits
        .iter()
        .map(|p| {
            let mut v = json!({ "_index": meta.name, "_id": p.hit.id, "_score": p.hit.score });
            if let Some(s) = &p.source {
                v["_source"] = s.clone();
            }
            if let Some(s) = g.order.hit_values(&p.hit, p.shard) {
                v["sort"] = s;
            }
            if let Some(h) = &p.highlight {
                v["highlight"] = h.clone();
            }
            v
        })
        .collect();
    let mut out = json!({
        "took": started.elapsed().as_millis() as u64,
        "timed_out": false,
        "_shards": shards_json(&g),
        "hits": { "max_score": g.hits.first().map(|h| h.hit.score), "hits": hits },
    });
    if count {
        out["hits"]["total"] = total_json(g.count, q);
    }
    if let Some(a) = &g.aggregations {
        out["aggregations"] = a.clone();
    }
    Ok((out, g))
}

/// `hits.total`: an object, or a number with `rest_total_hits_as_int`.
fn total_json(n: u64, q: &SearchQuery) -> Value {
    if q.rest_total_hits_as_int == Some(true) {
        json!(n)
    } else {
        json!({ "value": n, "relation": "eq" })
    }
}

async fn search(
    State(b): State<Arc<Broker>>,
    Path(index): Path<String>,
    q: Result<UrlQuery<SearchQuery>, axum::extract::rejection::QueryRejection>,
    body: axum::body::Bytes,
) -> Res<Json<Value>> {
    let UrlQuery(q) = q.map_err(|e| ApiError::bad_request(e.body_text()))?;
    let body = body_value(&body)?;
    check_search_keys(&body, false)?;
    let meta = b.index(&index).await?;
    if let Some(keep) = &q.scroll {
        return contexts::first_page(&b, &meta, body, keep, &q).await;
    }
    let (from, size) = window(&body, &q)?;
    let count = !matches!(body.get("track_total_hits"), Some(Value::Bool(false)));
    let (out, _) = run_search(&b, &meta, &body, (from, size, count), None, &q).await?;
    Ok(Json(out))
}

async fn count(State(b): State<Arc<Broker>>, Path(index): Path<String>, body: axum::body::Bytes) -> Res<Json<Value>> {
    let body = body_value(&body)?;
    if let Some(k) = body
        .as_object()
        .into_iter()
        .flat_map(|o| o.keys())
        .find(|k| *k != "query")
    {
        return Err(ApiError::bad_request(format!("[{k}] is not supported in a count")));
    }
    let meta = b.index(&index).await?;
    let g = gather(&b, &meta, &body, (0, 0, true), None).await?;
    Ok(Json(json!({ "count": g.count, "_shards": shards_json(&g) })))
}

async fn refresh(State(b): State<Arc<Broker>>, Path(index): Path<String>) -> Res<Json<Value>> {
    let meta = b.index(&index).await?;
    let upto = b.last_sequences(&meta).await?;
    let (ok, total) = b.sync(&meta, &upto, Duration::from_secs(60)).await;
    Ok(Json(
        json!({ "_shards": { "total": total, "successful": ok, "failed": total - ok } }),
    ))
}
