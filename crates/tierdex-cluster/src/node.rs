//! A node holding replicas (`tierdex node`): for each replica the cluster
//! map gives it, an index under `DATA/INDEX/UID/SHARD` fed by a durable
//! consumer of the shard's stream, and answers to brokers' requests on the
//! node's subject.
//!
//! # Applying a stream exactly once
//!
//! Messages are fetched in batches and applied as one writer batch that
//! ends with [`Op::Mark`] of the last message's stream sequence: the batch
//! and its mark are durable together (the writer's log, then its
//! manifest). Only then is the consumer acknowledged (acknowledging all
//! before). Whenever a replica starts consuming (at open, after a crash,
//! after a failure) its durable consumer is made again to deliver from the
//! index's mark on, in stream order: none is applied twice, none skipped.
//! (Kept from before a crash, a consumer would deliver the dead process's
//! unacknowledged messages only after the ack wait, after newer ones.)

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use serde_json::Value;
use tierdex::update::wal::Op;
use tierdex::update::{IndexWriter, Strategy, WriterOptions};
use tierdex::{Document, Mode, Schema};
use tokio::task::JoinHandle;

use crate::map::{ClusterMap, IndexMeta, NodeInfo};
use crate::names;
use crate::wire::{Answer, Ask, ContextRef, ReplicaStatus, ShardHit, ShardRequest, WriteOp};
use crate::{ClusterConfig, ClusterError, Result};

/// Messages fetched per batch.
const BATCH: usize = 512;
/// How often the node reads the map for replicas it should hold.
const MAP_POLL: Duration = Duration::from_millis(300);
/// Longest wait for NATS while stopping.
pub const STOP_WAIT: Duration = Duration::from_secs(3);
/// Consecutive consumer failures logged quietly (the map poll stops the
/// consumers of a deleted index within about this many attempts).
const QUIET_FAILURES: u32 = 4;

/// How to start a node.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The NATS cluster.
    pub cluster: ClusterConfig,
    /// The node's id (stable across restarts: the map assigns replicas to it).
    pub id: String,
    /// Where its replicas' indices live.
    pub data: PathBuf,
}

/// One replica held by this node.
struct Replica {
    index: String,
    /// The index's creation ([`IndexMeta::uid`]).
    uid: String,
    shard: u32,
    writer: Arc<IndexWriter>,
    applied: tokio::sync::watch::Sender<u64>,
    skipped: AtomicU64,
    rejected: AtomicU64,
    /// Caught up with its stream once since it was opened: until then it
    /// answers no search (a replica replaying its stream, or restarted
    /// behind, would answer with part of the shard).
    ready: std::sync::atomic::AtomicBool,
    consumer: Mutex<Option<JoinHandle<()>>>,
    /// Snapshots kept open for points in time and scrolls, with when they
    /// expire.
    contexts: Mutex<HashMap<String, (Arc<tierdex::Searcher>, Instant)>>,
}

/// Longest a real-time read waits for its replica to apply the writes
/// stored before it.
const REAL_TIME_WAIT: Duration = Duration::from_secs(10);

/// Open snapshots per replica at most (Elasticsearch's
/// `search.max_open_scroll_context`).
pub const MAX_CONTEXTS: usize = 500;

/// Numbers the contexts a node opens.
static NEXT_CONTEXT: AtomicU64 = AtomicU64::new(0);

impl Replica {
    /// Keeps the current snapshot open for `keep`; its id.
    fn open(&self, node: &str, keep: Duration) -> tierdex::Result<String> {
        let now = Instant::now();
        let mut m = self.contexts.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, (_, until)| *until > now);
        if m.len() >= MAX_CONTEXTS {
            return Err(tierdex::Error::Unavailable(format!(
                "shard {} of [{}] on node {node} holds {MAX_CONTEXTS} open contexts (points in time, scrolls): \
                 close some or wait until they expire",
                self.shard, self.index
            )));
        }
        let id = format!(
            "{node}-{}-{}",
            std::process::id(),
            NEXT_CONTEXT.fetch_add(1, Ordering::Relaxed)
        );
        m.insert(id.clone(), (self.writer.searcher(), now + keep));
        Ok(id)
    }

    /// The snapshot of an open context, kept `c.keep_ms` longer.
    fn context(&self, c: &ContextRef) -> tierdex::Result<Arc<tierdex::Searcher>> {
        let now = Instant::now();
        let mut m = self.contexts.lock().unwrap_or_else(|p| p.into_inner());
        m.retain(|_, (_, until)| *until > now);
        match m.get_mut(&c.id) {
            Some((s, until)) => {
                if c.keep_ms > 0 {
                    *until = now + Duration::from_millis(c.keep_ms);
                }
                Ok(s.clone())
            }
            None => Err(tierdex::Error::NotFound(format!(
                "no search context [{}] on shard {} of [{}]: it expired or was closed",
                c.id, self.shard, self.index
            ))),
        }
    }

    /// Drops the contexts whose keep-alive has passed (their snapshots
    /// keep segments alive).
    fn sweep(&self) {
        let now = Instant::now();
        self.contexts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, (_, until)| *until > now);
    }

    /// Closes a context; whether it was open.
    fn close(&self, id: &str) -> bool {
        self.contexts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
            .is_some()
    }

    fn applied(&self) -> u64 {
        *self.applied.borrow()
    }

    fn status(&self) -> ReplicaStatus {
        ReplicaStatus {
            applied: self.applied(),
            docs: self.writer.live_docs(),
            skipped: self.skipped.load(Ordering::Relaxed),
            rejected: self.rejected.load(Ordering::Relaxed),
            ready: self.ready.load(Ordering::Relaxed),
            contexts: self.contexts.lock().unwrap_or_else(|p| p.into_inner()).len(),
        }
    }
}

struct Inner {
    id: String,
    data: PathBuf,
    client: async_nats::Client,
    js: jetstream::Context,
    map: ClusterMap,
    replicas: Mutex<HashMap<(String, u32), Arc<Replica>>>,
}

/// A running node; [`Node::stop`] (or dropping it) stops its work.
pub struct Node {
    inner: Arc<Inner>,
    tasks: Vec<JoinHandle<()>>,
}

impl Node {
    /// Connects, announces itself, and starts holding the replicas the map
    /// gives it.
    pub async fn start(config: NodeConfig) -> Result<Node> {
        names::check_node_id(&config.id)?;
        std::fs::create_dir_all(&config.data)
            .map_err(|e| ClusterError::Invalid(format!("data directory {}: {e}", config.data.display())))?;
        let client = config.cluster.connect(&format!("tierdex-node-{}", config.id)).await?;
        let js = jetstream::new(client.clone());
        let map = ClusterMap::open(&js, config.cluster.stream_replicas).await?;
        let sub = client
            .subscribe(names::node_subject(&config.id))
            .await
            .map_err(ClusterError::nats)?;
        let inner = Arc::new(Inner {
            id: config.id.clone(),
            data: config.data,
            client,
            js,
            map,
            replicas: Mutex::new(HashMap::new()),
        });
        let info = NodeInfo {
            id: config.id,
            pid: std::process::id(),
        };
        // A bucket just created on a NATS cluster may refuse writes for a
        // moment: the first heartbeat is retried.
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = inner.map.heartbeat(&info).await {
            if Instant::now() > deadline {
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let mut tasks = Vec::new();
        let i = inner.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                tokio::time::sleep(names::HEARTBEAT).await;
                if let Err(e) = i.map.heartbeat(&info).await {
                    tracing::warn!("heartbeat: {e}");
                }
            }
        }));
        let i = inner.clone();
        tasks.push(tokio::spawn(async move { i.serve(sub).await }));
        let i = inner.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                if let Err(e) = i.follow_map().await {
                    tracing::warn!("reading the cluster map: {e}");
                }
                let reps: Vec<Arc<Replica>> = i
                    .replicas
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                    .cloned()
                    .collect();
                for r in reps {
                    r.sweep();
                }
                tokio::time::sleep(MAP_POLL).await;
            }
        }));
        Ok(Node { inner, tasks })
    }

    /// The node's id.
    pub fn id(&self) -> &str {
        &self.inner.id
    }

    /// The replicas held now, with their counters.
    pub fn replicas(&self) -> Vec<(String, u32, ReplicaStatus)> {
        let reps = self.inner.replicas.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<_> = reps.values().map(|r| (r.index.clone(), r.shard, r.status())).collect();
        out.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        out
    }

    /// Stops: leaves the map at once, stops consuming and answering, and
    /// closes the replicas' indices (everything applied is durable).
    ///
    /// With NATS unreachable it does not wait for ever: leaving the map and
    /// flushing each get [`STOP_WAIT`], then the node stops anyway (its
    /// heartbeat expires instead).
    pub async fn stop(mut self) {
        match tokio::time::timeout(STOP_WAIT, self.inner.map.leave(&self.inner.id)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("leaving the cluster map: {e}"),
            Err(_) => tracing::warn!("leaving the cluster map: no answer from NATS within {STOP_WAIT:?}"),
        }
        self.halt();
        let _ = tokio::time::timeout(STOP_WAIT, self.inner.client.flush()).await;
    }

    fn halt(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
        }
        let reps: Vec<Arc<Replica>> = {
            let mut reps = self.inner.replicas.lock().unwrap_or_else(|p| p.into_inner());
            reps.drain().map(|(_, r)| r).collect()
        };
        for r in reps {
            if let Some(t) = r.consumer.lock().unwrap_or_else(|p| p.into_inner()).take() {
                t.abort();
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.halt();
    }
}

impl Inner {
    /// Opens the replicas the map assigns to this node and starts their
    /// consumers; stops those it no longer assigns.
    async fn follow_map(self: &Arc<Self>) -> Result<()> {
        let indices = self.map.indices().await?;
        let mut wanted = Vec::new();
        for meta in &indices {
            for (shard, nodes) in meta.assignment.iter().enumerate() {
                if nodes.iter().any(|n| *n == self.id) {
                    wanted.push((meta, shard as u32));
                }
            }
        }
        // First let go of the replicas no longer wanted (or of an earlier
        // index of the same name), then open the missing ones.
        let gone: Vec<Arc<Replica>> = {
            let mut reps = self.replicas.lock().unwrap_or_else(|p| p.into_inner());
            let keys: Vec<(String, u32)> = reps
                .iter()
                .filter(|((ix, s), r)| !wanted.iter().any(|(m, w)| m.name == *ix && w == s && m.uid == r.uid))
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| reps.remove(k)).collect()
        };
        for r in gone {
            tracing::info!("no longer holding shard {} of [{}]", r.shard, r.index);
            if let Some(t) = r.consumer.lock().unwrap_or_else(|p| p.into_inner()).take() {
                t.abort();
            }
            let deleted = !indices.iter().any(|m| m.name == r.index && m.uid == r.uid);
            if deleted {
                // The index is gone: its replica's files go too.
                let dir = self.replica_dir(&r.index, &r.uid, r.shard);
                drop(r);
                if let Err(e) = std::fs::remove_dir_all(&dir) {
                    tracing::warn!("removing {}: {e}", dir.display());
                }
            }
        }
        for (meta, shard) in &wanted {
            let held = self
                .replicas
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&(meta.name.clone(), *shard));
            if !held {
                let rep = self.open_replica(meta, *shard).await?;
                let i = self.clone();
                let r = rep.clone();
                *rep.consumer.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(tokio::spawn(async move { i.consume(r).await }));
                self.replicas
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert((meta.name.clone(), *shard), rep);
            }
        }
        Ok(())
    }

    /// Where a replica's index lives: `DATA/INDEX/UID/SHARD`.
    fn replica_dir(&self, index: &str, uid: &str, shard: u32) -> PathBuf {
        self.data.join(index).join(uid).join(shard.to_string())
    }

    async fn open_replica(&self, meta: &IndexMeta, shard: u32) -> Result<Arc<Replica>> {
        let dir = self.replica_dir(&meta.name, &meta.uid, shard);
        let schema = meta.schema()?;
        let writer = tokio::task::spawn_blocking(move || -> tierdex::Result<IndexWriter> {
            std::fs::create_dir_all(&dir).map_err(|e| tierdex::Error::io(&dir, e))?;
            match IndexWriter::open(&dir, WriterOptions::default()) {
                Err(tierdex::Error::NotFound(_)) => IndexWriter::create_with_schema(
                    &dir,
                    schema,
                    Default::default(),
                    Default::default(),
                    Strategy::default(),
                    WriterOptions::default(),
                ),
                r => r,
            }
        })
        .await
        .map_err(|e| ClusterError::Invalid(format!("opening a replica: {e}")))??;
        let applied = writer.source_seq();
        tracing::info!(
            "holding shard {shard} of [{}], applied up to stream sequence {applied}",
            meta.name
        );
        Ok(Arc::new(Replica {
            index: meta.name.clone(),
            uid: meta.uid.clone(),
            shard,
            writer: Arc::new(writer),
            applied: tokio::sync::watch::channel(applied).0,
            skipped: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            ready: std::sync::atomic::AtomicBool::new(false),
            consumer: Mutex::new(None),
            contexts: Mutex::new(HashMap::new()),
        }))
    }

    /// Consumes a replica's stream for ever, starting again after failures
    /// (the stream not created yet, NATS away).
    ///
    /// An index deleted takes its streams with it before the map poll stops
    /// this task: failures are logged as warnings only once they last
    /// beyond [`QUIET_FAILURES`] attempts in a row.
    async fn consume(self: Arc<Self>, rep: Arc<Replica>) {
        let mut failures = 0u32;
        loop {
            let started = Instant::now();
            match self.consume_once(&rep).await {
                Err(e) if failures >= QUIET_FAILURES => {
                    tracing::warn!("consuming shard {} of [{}]: {e} (trying again)", rep.shard, rep.index)
                }
                Err(e) => tracing::debug!("consuming shard {} of [{}]: {e} (trying again)", rep.shard, rep.index),
                Ok(()) => {}
            }
            // A consumer that ran a while before failing starts a new count.
            failures = if started.elapsed() > Duration::from_secs(5) {
                1
            } else {
                failures + 1
            };
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    async fn consumer(&self, rep: &Replica) -> Result<consumer::PullConsumer> {
        let stream = self
            .js
            .get_stream(names::stream(&rep.index, rep.shard))
            .await
            .map_err(ClusterError::nats)?;
        let durable = names::consumer(&self.id, &rep.index, rep.shard);
        let applied = rep.applied();
        // Always made again from the index's mark: a consumer kept from
        // before a crash would deliver new messages first and the ones the
        // dead process had fetched only after the ack wait, by when the
        // mark is past them and they would be skipped as applied.
        if stream.get_consumer::<consumer::pull::Config>(&durable).await.is_ok() {
            stream.delete_consumer(&durable).await.map_err(ClusterError::nats)?;
        }
        let deliver_policy = match applied {
            0 => consumer::DeliverPolicy::All,
            n => consumer::DeliverPolicy::ByStartSequence { start_sequence: n + 1 },
        };
        stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(durable),
                ack_policy: consumer::AckPolicy::All,
                deliver_policy,
                max_ack_pending: 100_000,
                ..Default::default()
            })
            .await
            .map_err(ClusterError::nats)
    }

    async fn consume_once(&self, rep: &Arc<Replica>) -> Result<()> {
        let consumer = self.consumer(rep).await?;
        let mut schema = rep.writer.schema();
        let mut last_refresh = Instant::now();
        let mut dirty = false;
        loop {
            let mut batch = consumer
                .fetch()
                .max_messages(BATCH)
                .expires(Duration::from_millis(200))
                .messages()
                .await
                .map_err(ClusterError::nats)?;
            let mut msgs = Vec::new();
            while let Some(m) = batch.next().await {
                msgs.push(m.map_err(ClusterError::nats)?);
            }
            let caught_up = msgs.len() < BATCH;
            let applied = rep.applied();
            let mut writes = Vec::with_capacity(msgs.len());
            let mut last = applied;
            for m in &msgs {
                let seq = m.info().map_err(ClusterError::nats)?.stream_sequence;
                if seq <= applied {
                    rep.skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
                if seq != last + 1 {
                    // Messages come in stream order from the mark on; a gap
                    // means this consumer went astray: start it again.
                    return Err(ClusterError::Nats(format!(
                        "stream message {seq} came after {last}: restarting the consumer"
                    )));
                }
                last = seq;
                writes.push((seq, m.payload.clone()));
            }
            if last > applied {
                // Converted where the writer may be read (an update merges
                // into the document as it is at its place in the stream).
                let r = rep.clone();
                let mut sch = std::mem::replace(&mut schema, Schema::title_body());
                schema = tokio::task::spawn_blocking(move || -> tierdex::Result<Schema> {
                    let mut pending = Pending::new();
                    let mut ops = Vec::with_capacity(writes.len() + 1);
                    for (seq, payload) in &writes {
                        match to_op(&mut sch, payload, &mut pending, &r.writer) {
                            Ok(Some(op)) => ops.push(op),
                            Ok(None) => {}
                            Err(why) => {
                                r.rejected.fetch_add(1, Ordering::Relaxed);
                                tracing::error!(
                                    "shard {} of [{}]: stream message {seq} is not applied: {why}",
                                    r.shard,
                                    r.index
                                );
                            }
                        }
                    }
                    ops.push(Op::Mark(last));
                    r.writer.apply(ops)?;
                    Ok(sch)
                })
                .await
                .map_err(|e| ClusterError::Invalid(format!("applying: {e}")))??;
                rep.applied.send_replace(last);
                dirty = true;
            }
            if let Some(m) = msgs.last() {
                m.ack().await.map_err(ClusterError::nats)?;
            }
            let since = last_refresh.elapsed();
            let becomes_ready = caught_up && !rep.ready.load(Ordering::Relaxed);
            if dirty
                && (becomes_ready
                    || (caught_up && since >= Duration::from_millis(100))
                    || since >= Duration::from_secs(1))
            {
                let w = rep.writer.clone();
                tokio::task::spawn_blocking(move || w.refresh().map(|_| ()))
                    .await
                    .map_err(|e| ClusterError::Invalid(format!("refreshing: {e}")))??;
                last_refresh = Instant::now();
                dirty = false;
            }
            if becomes_ready {
                tracing::info!(
                    "shard {} of [{}] caught up with its stream at {}: answering searches",
                    rep.shard,
                    rep.index,
                    rep.applied()
                );
                rep.ready.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Answers brokers' requests, each on its own task.
    async fn serve(self: Arc<Self>, mut sub: async_nats::Subscriber) {
        while let Some(msg) = sub.next().await {
            let me = self.clone();
            tokio::spawn(async move {
                let answer = match serde_json::from_slice::<ShardRequest>(&msg.payload) {
                    Ok(r) => me.answer(r).await,
                    Err(e) => Answer::Error {
                        reason: format!("bad request: {e}"),
                        bad: true,
                    },
                };
                if let Some(reply) = msg.reply {
                    let bytes = serde_json::to_vec(&answer).expect("serialises");
                    if let Err(e) = me.client.publish(reply, bytes.into()).await {
                        tracing::warn!("answering a broker: {e}");
                    }
                }
            });
        }
    }

    async fn answer(&self, req: ShardRequest) -> Answer {
        let rep = self
            .replicas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(req.index.clone(), req.shard))
            .cloned();
        let Some(rep) = rep.filter(|r| req.uid.is_empty() || r.uid == req.uid) else {
            return Answer::Error {
                reason: format!(
                    "node {} holds no replica of shard {} of [{}]",
                    self.id, req.shard, req.index
                ),
                bad: false,
            };
        };
        match req.ask {
            Ask::Sync { upto, timeout_ms } => {
                let mut rx = rep.applied.subscribe();
                let wait = rx.wait_for(|&a| a >= upto);
                match tokio::time::timeout(Duration::from_millis(timeout_ms), wait).await {
                    Ok(Ok(_)) => {}
                    _ => {
                        return Answer::Error {
                            reason: format!(
                                "shard {} of [{}] on node {}: applied {} of {upto} within {timeout_ms} ms",
                                req.shard,
                                req.index,
                                self.id,
                                rep.applied()
                            ),
                            bad: false,
                        }
                    }
                }
                let w = rep.writer.clone();
                match tokio::task::spawn_blocking(move || w.refresh().map(|_| ())).await {
                    Ok(Ok(())) => {
                        // `upto` was the stream's end when the refresh was
                        // asked: caught up, so searches are answered now
                        // (not only once the consumer notices).
                        if !rep.ready.swap(true, Ordering::Relaxed) {
                            tracing::info!(
                                "shard {} of [{}] caught up with its stream at {}: answering searches",
                                rep.shard,
                                rep.index,
                                rep.applied()
                            );
                        }
                        Answer::Synced(rep.applied())
                    }
                    Ok(Err(e)) => Answer::Error {
                        reason: e.to_string(),
                        bad: false,
                    },
                    Err(e) => Answer::Error {
                        reason: e.to_string(),
                        bad: false,
                    },
                }
            }
            Ask::Status => Answer::Status(rep.status()),
            Ask::Close => Answer::Closed(req.context.is_some_and(|c| rep.close(&c.id))),
            _ if req.context.is_none() && !rep.ready.load(Ordering::Relaxed) => Answer::Error {
                reason: format!(
                    "shard {} of [{}] on node {} is catching up with its stream (at {})",
                    req.shard,
                    req.index,
                    self.id,
                    rep.applied()
                ),
                bad: false,
            },
            Ask::Open { keep_ms } => match rep.open(&self.id, Duration::from_millis(keep_ms)) {
                Ok(context) => Answer::Opened {
                    node: self.id.clone(),
                    context,
                },
                Err(e) => Answer::Error {
                    reason: e.to_string(),
                    bad: false,
                },
            },
            ask => {
                if let Ask::Fetch { upto: Some(upto), .. } = &ask {
                    // A real-time read: every write stored before it.
                    let mut rx = rep.applied.subscribe();
                    let wait = rx.wait_for(|&a| a >= *upto);
                    if !matches!(tokio::time::timeout(REAL_TIME_WAIT, wait).await, Ok(Ok(_))) {
                        return Answer::Error {
                            reason: format!(
                                "shard {} of [{}] on node {}: applied {} of {upto} within {REAL_TIME_WAIT:?}",
                                req.shard,
                                req.index,
                                self.id,
                                rep.applied()
                            ),
                            bad: false,
                        };
                    }
                }
                let r = rep.clone();
                let context = req.context;
                match tokio::task::spawn_blocking(move || read(&r, context.as_ref(), ask)).await {
                    Ok(Ok(a)) => a,
                    Ok(Err(e)) => Answer::Error {
                        // A context is on this node only: no other replica
                        // would answer better.
                        bad: matches!(
                            e,
                            tierdex::Error::Query(_) | tierdex::Error::InvalidArgument(_) | tierdex::Error::NotFound(_)
                        ),
                        reason: e.to_string(),
                    },
                    Err(e) => Answer::Error {
                        reason: e.to_string(),
                        bad: false,
                    },
                }
            }
        }
    }
}

/// A stream message as a writer operation, checked against the schema (so
/// that one bad record is left out instead of failing its whole batch).
/// The sources written earlier in the batch being converted (`None`:
/// deleted), for the updates that follow them.
type Pending = HashMap<String, Option<Value>>;

/// The writer operation of a stream message (`None`: nothing to do, an
/// update that changes nothing or of a document that does not exist).
fn to_op(
    schema: &mut Schema,
    payload: &[u8],
    pending: &mut Pending,
    writer: &IndexWriter,
) -> std::result::Result<Option<Op>, String> {
    let op: WriteOp = serde_json::from_slice(payload).map_err(|e| format!("not a write: {e}"))?;
    let (id, source) = match op {
        WriteOp::Delete { id } => {
            pending.insert(id.clone(), None);
            return Ok(Some(Op::Delete(id)));
        }
        WriteOp::Index { id, source } => (id, source),
        WriteOp::Update {
            id,
            doc,
            upsert,
            doc_as_upsert,
        } => {
            let current = match pending.get(&id) {
                Some(c) => c.clone(),
                None => writer
                    .get(&id)
                    .map_err(|e| format!("reading [{id}] to update it: {e}"))?
                    .and_then(|d| tierdex::query::dsl::SourceFilter::default().apply(&d)),
            };
            let next = match (current, doc) {
                (Some(mut cur), Some(patch)) => {
                    let before = cur.clone();
                    tierdex_server::es::merge_source(&mut cur, &patch);
                    if cur == before {
                        return Ok(None);
                    }
                    cur
                }
                (Some(_), None) => return Ok(None),
                (None, doc) => match (upsert, doc) {
                    (Some(u), _) => u,
                    (None, Some(d)) if doc_as_upsert => d,
                    _ => return Ok(None),
                },
            };
            (id, next)
        }
    };
    let doc = source_doc(id.clone(), &source)?;
    schema.admit(&doc).map_err(|e| e.to_string())?;
    pending.insert(id, Some(source));
    Ok(Some(Op::Add(doc)))
}

/// A document from an Elasticsearch `_source` object (null fields left out).
pub fn source_doc(id: String, source: &Value) -> std::result::Result<Document, String> {
    let obj = source.as_object().ok_or("the document must be a JSON object")?;
    if id.is_empty() {
        return Err("a document id must not be empty".into());
    }
    let mut d = Document::new(id);
    for (k, x) in obj {
        if !x.is_null() {
            d.fields.insert(k.clone(), x.clone());
        }
    }
    Ok(d)
}

/// The query object of a request, or every document.
fn query_of(s: &tierdex::Searcher, v: &Option<Value>) -> tierdex::Result<tierdex::query::ast::Query> {
    match v {
        None => Ok(tierdex::query::ast::Query::MatchAll),
        Some(q) => tierdex::query::dsl::query(s.schema(), s.query_limits(), q),
    }
}

/// The reading asks, on a blocking thread: from the open snapshot
/// `context`, or the replica's latest.
fn read(rep: &Replica, context: Option<&ContextRef>, ask: Ask) -> tierdex::Result<Answer> {
    let s = match context {
        Some(c) => rep.context(c)?,
        None => rep.writer.searcher(),
    };
    match ask {
        Ask::Stats { query } => {
            let q = query_of(&s, &query)?;
            Ok(Answer::Stats(s.global_stats(&q)?))
        }
        Ask::Search {
            query,
            k,
            count,
            aggs,
            global,
            sort,
            after,
        } => {
            let q = query_of(&s, &query)?;
            let view = s.with_global_stats(Arc::new(global));
            let mut req = tierdex::search::SearchRequest::new(&q, k);
            req.mode = match (k, count) {
                (0, _) => Mode::Count,
                (_, true) => Mode::TopKAndCount,
                (_, false) => Mode::TopK,
            };
            if let Some(v) = &sort {
                req.sort = tierdex::query::dsl::sort(view.schema(), v)?;
            }
            req.search_after = after;
            let r = view.search_request(&req)?;
            let keys = req.sort.len();
            let mut hits = Vec::with_capacity(r.hits.len());
            for (i, h) in r.hits.iter().enumerate() {
                hits.push(ShardHit {
                    id: view.doc_id(h.doc)?,
                    score: h.score,
                    doc: h.doc,
                    sort: r.sort.as_ref().map(|v| v[i][..keys.min(v[i].len())].to_vec()),
                });
            }
            let aggs = match aggs {
                None => None,
                Some(a) => {
                    let body = serde_json::json!({ "aggs": a });
                    let req = tierdex::aggs::Aggregations::from_body(
                        view.schema(),
                        view.query_limits(),
                        body.as_object().expect("an object"),
                    )?
                    .ok_or_else(|| tierdex::Error::InvalidArgument("empty aggregations".into()))?;
                    let mut merged = tierdex::aggs::AggsPartial::empty(&req);
                    for p in view.aggregate_parts(&q, &req)? {
                        merged.merge(p);
                    }
                    Some(merged)
                }
            };
            Ok(Answer::Search {
                hits,
                count: r.count,
                aggs,
            })
        }
        Ask::Fetch { ids, source, .. } => {
            if context.is_none() && source == Some(Value::Bool(false)) {
                // Which ids exist: the writer's id map, no document read.
                return Ok(Answer::Fetch(
                    ids.iter()
                        .map(|id| rep.writer.contains(id).then(|| Value::Object(Default::default())))
                        .collect(),
                ));
            }
            let filter = match &source {
                None => tierdex::query::dsl::SourceFilter::default(),
                Some(v) => tierdex::query::dsl::SourceFilter::parse(v)?,
            };
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                // From the open snapshot, else the writer (real time). An
                // empty object when the filter keeps nothing (a JSON null
                // would read back as not found).
                let doc = match context {
                    Some(_) => s.get(id)?,
                    None => rep.writer.get(id)?,
                };
                out.push(doc.map(|d| filter.apply(&d).unwrap_or_else(|| Value::Object(Default::default()))));
            }
            Ok(Answer::Fetch(out))
        }
        Ask::Matching { query } => {
            let q = query_of(&s, &Some(query))?;
            let docs = s.matching_docs(&q, None)?;
            Ok(Answer::Ids(
                docs.into_iter().map(|d| s.doc_id(d)).collect::<tierdex::Result<_>>()?,
            ))
        }
        Ask::Highlight { ids, query, highlight } => {
            let q = query_of(&s, &query)?;
            let spec = tierdex::query::dsl::HighlightSpec::parse(s.schema(), &highlight)?;
            let plan = s.plan(&q)?;
            let mut out = Vec::with_capacity(ids.len());
            for id in &ids {
                out.push(match s.index().find_id(id)? {
                    Some(doc) => spec.render(&s.highlight(&plan, doc, spec.max_bytes)?),
                    None => Value::Object(Default::default()),
                });
            }
            Ok(Answer::Highlights(out))
        }
        Ask::Sync { .. } | Ask::Status | Ask::Open { .. } | Ask::Close => {
            Err(tierdex::Error::Internal("answered elsewhere".into()))
        }
    }
}
