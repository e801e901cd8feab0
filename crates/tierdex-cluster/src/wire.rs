//! What brokers publish to shard streams and ask of nodes, and what nodes
//! answer (JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tierdex::aggs::AggsPartial;
use tierdex::query::global::GlobalStats;
use tierdex::search::SortValue;

/// One write, as stored in a shard's stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteOp {
    /// Add or replace the document `id` with this `_source`.
    Index {
        /// External id.
        id: String,
        /// The document's fields.
        source: Value,
    },
    /// Merge `doc` into the document `id` as it is at this place in the
    /// stream (every replica applies the stream in order, so concurrent
    /// updates are applied one after the other, none lost); when it does
    /// not exist, create it from `upsert`, or from `doc` with
    /// `doc_as_upsert`, else nothing.
    Update {
        /// External id.
        id: String,
        /// The fields to merge (objects merge key by key).
        doc: Option<Value>,
        /// The document to create when there is none.
        upsert: Option<Value>,
        /// Create it from `doc` when there is none.
        doc_as_upsert: bool,
    },
    /// Delete the document `id`.
    Delete {
        /// External id.
        id: String,
    },
}

/// A request to the node holding a replica of `shard` of `index`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardRequest {
    /// The index.
    pub index: String,
    /// The shard.
    pub shard: u32,
    /// The index's creation ([`crate::map::IndexMeta::uid`]; empty: any).
    #[serde(default)]
    pub uid: String,
    /// What is asked.
    pub ask: Ask,
    /// Read from this open snapshot of the replica (a point in time or a
    /// scroll) instead of its latest one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextRef>,
}

/// An open snapshot on one node, and how long to keep it from now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextRef {
    /// The snapshot's id on its node.
    pub id: String,
    /// Keep it this many milliseconds from now (0: as it was).
    pub keep_ms: u64,
}

/// What a broker asks of a replica.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ask {
    /// The statistics the query scores with (first phase).
    Stats {
        /// The query object of the request (`None`: every document).
        query: Option<Value>,
    },
    /// The best `k` with the summed statistics, the count, and the
    /// aggregations' partials (second phase).
    Search {
        /// The query object.
        query: Option<Value>,
        /// Hits wanted (`from + size`).
        k: usize,
        /// Count the matches.
        count: bool,
        /// The request's `aggs` object, if any.
        aggs: Option<Value>,
        /// Statistics summed over every shard.
        global: GlobalStats,
        /// The order, as a request's `sort` (`None`: by score).
        #[serde(default)]
        sort: Option<Value>,
        /// Hits after these sort values only (this shard's part of the
        /// request's `search_after`; a trailing document number as the
        /// engine takes it).
        #[serde(default)]
        after: Option<Vec<SortValue>>,
    },
    /// The `_source` of documents by id, filtered as `source` says (third
    /// phase, and gets).
    Fetch {
        /// External ids.
        ids: Vec<String>,
        /// The request's `_source` (`None`: the whole document).
        source: Option<Value>,
        /// Read once the replica has applied its stream through this
        /// sequence (real-time gets: every write stored before the read).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        upto: Option<u64>,
    },
    /// Highlighted snippets of documents by id, as the request's
    /// `highlight` asks (fetch phase).
    Highlight {
        /// External ids.
        ids: Vec<String>,
        /// The query object whose terms are marked (`None`: every document).
        query: Option<Value>,
        /// The request's `highlight` object.
        highlight: Value,
    },
    /// The ids of every live document the query matches (a delete by
    /// query), from the replica's latest snapshot.
    Matching {
        /// The query object.
        query: Value,
    },
    /// Keep the replica's current snapshot open for `keep_ms` (a point in
    /// time): later asks with its [`ContextRef`] read from it.
    Open {
        /// Milliseconds.
        keep_ms: u64,
    },
    /// Close the request's context.
    Close,
    /// Wait until the replica has applied the stream up to `upto`, then
    /// make it searchable.
    Sync {
        /// Stream sequence.
        upto: u64,
        /// Longest wait in milliseconds.
        timeout_ms: u64,
    },
    /// The replica's counters.
    Status,
}

/// A hit of one shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardHit {
    /// External id.
    pub id: String,
    /// BM25 score with the global statistics.
    pub score: f32,
    /// Document number in the replica's snapshot (orders equal scores).
    pub doc: u32,
    /// With a sort: the hit's value for each key (no document number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort: Option<Vec<SortValue>>,
}

/// A replica's counters.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ReplicaStatus {
    /// Last stream sequence applied.
    pub applied: u64,
    /// Live documents.
    pub docs: u64,
    /// Stream messages skipped as already applied (redelivered after a
    /// restart).
    pub skipped: u64,
    /// Stream messages that could not be applied (bad records).
    pub rejected: u64,
    /// Caught up with its stream since it was opened (answers searches).
    pub ready: bool,
    /// Snapshots kept open for points in time and scrolls.
    #[serde(default)]
    pub contexts: usize,
}

/// What a node answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// The shard's part of the statistics.
    Stats(GlobalStats),
    /// The shard's best hits, count and aggregation partials.
    Search {
        /// Best hits, best first.
        hits: Vec<ShardHit>,
        /// Matches, when counted.
        count: Option<u64>,
        /// Aggregation partials, when asked.
        aggs: Option<AggsPartial>,
    },
    /// Documents' `_source` by id (`None`: not found).
    Fetch(Vec<Option<Value>>),
    /// The ids a [`Ask::Matching`] asked for.
    Ids(Vec<String>),
    /// Documents' `highlight` objects by id (empty: not found or no match).
    Highlights(Vec<Value>),
    /// A snapshot kept open on `node`.
    Opened {
        /// The node holding it.
        node: String,
        /// Its id there.
        context: String,
    },
    /// Whether the context was open.
    Closed(bool),
    /// Applied and searchable up to this sequence.
    Synced(u64),
    /// Counters.
    Status(ReplicaStatus),
    /// The request failed on the replica (`bad`: the request itself is
    /// wrong, so another replica would fail it too).
    Error {
        /// Why.
        reason: String,
        /// The request is wrong (not the replica).
        bad: bool,
    },
}
