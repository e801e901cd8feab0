//! tierdex beyond one machine (DESIGN §9, issue #26): document-partitioned
//! shards and their replicas fed by NATS JetStream, and stateless brokers
//! that gather.
//!
//! ```text
//!  clients (HTTP, Elasticsearch API)
//!        |
//!   broker (stateless) -- cluster map (JetStream key-value) -- nodes' heartbeats
//!        | writes: publish to the shard's stream, answer once JetStream stored it
//!        | reads:  stats -> search with global statistics -> fetch, per shard
//!        v                                  from any live replica (NATS request)
//!   JetStream: one stream per shard (replicated by Raft over the NATS cluster)
//!        | durable pull consumer per replica, applied in order
//!        v
//!   nodes: one tierdex index per replica held; the applied stream sequence
//!          is kept with each batch (Op::Mark) and in the index manifest
//! ```
//!
//! * [`names`]: streams, subjects, buckets, and the shard of an id.
//! * [`map`]: the cluster map (indices, their mappings, shards and which
//!   node holds which replica) and node liveness, in key-value buckets.
//! * [`wire`]: what brokers and nodes send each other.
//! * [`node`]: a node holding replicas: consumes, applies, answers.
//! * [`broker`]: the HTTP service in front.
//! * [`order`]: how the broker orders the shards' hits (score or `sort`,
//!   `search_after`).
//! * [`local`]: NATS servers on loopback (cluster up, demo, tests) and a
//!   whole cluster in one process ([`local::LocalCluster`]).
//! * [`check`]: comparing a cluster's answers with one index's.

pub mod broker;
pub mod check;
pub mod local;
pub mod map;
pub mod names;
pub mod node;
pub mod order;
pub mod wire;

/// What can go wrong between the parts of a cluster.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// NATS or JetStream refused or failed.
    #[error("NATS: {0}")]
    Nats(String),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] tierdex::Error),
    /// A request or a record that does not make sense.
    #[error("{0}")]
    Invalid(String),
    /// No such index.
    #[error("no such index [{0}]")]
    NoIndex(String),
    /// No replica of a shard answered.
    #[error("shard {shard} of [{index}]: {why}")]
    ShardFailed {
        /// The index.
        index: String,
        /// The shard.
        shard: u32,
        /// The last replica's failure.
        why: String,
    },
}

impl ClusterError {
    /// A NATS failure, from any of the client's error types.
    pub fn nats(e: impl std::fmt::Display) -> ClusterError {
        ClusterError::Nats(e.to_string())
    }
}

/// Results of this crate.
pub type Result<T> = std::result::Result<T, ClusterError>;

/// How to reach the NATS cluster and how much JetStream replicates.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// NATS servers' URLs (comma-separated in the CLI).
    pub urls: Vec<String>,
    /// Copies JetStream keeps of every stream and bucket (3 on a 3-node
    /// NATS cluster; 1 on a single server).
    pub stream_replicas: usize,
}

impl ClusterConfig {
    /// Connects, retrying the first connection, reconnecting for ever.
    pub async fn connect(&self, name: &str) -> Result<async_nats::Client> {
        if self.urls.is_empty() {
            return Err(ClusterError::Invalid("no NATS server URL given".into()));
        }
        let addrs: Vec<async_nats::ServerAddr> = self
            .urls
            .iter()
            .map(|u| {
                u.parse()
                    .map_err(|e| ClusterError::Invalid(format!("NATS URL {u:?}: {e}")))
            })
            .collect::<Result<_>>()?;
        async_nats::ConnectOptions::new()
            .name(name)
            .retry_on_initial_connect()
            .connect(addrs)
            .await
            .map_err(ClusterError::nats)
    }
}
