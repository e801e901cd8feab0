//! The cluster map, kept in JetStream key-value buckets: each index's
//! mappings, shard count and which nodes hold its replicas
//! ([`MAP_BUCKET`], key `index.NAME`), and the live nodes
//! ([`NODES_BUCKET`], one heartbeat entry per node that expires after
//! [`NODE_TTL`]).

use async_nats::jetstream::{self, kv};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::names::{self, MAP_BUCKET, NODES_BUCKET, NODE_TTL};
use crate::{ClusterError, Result};

/// One index of the cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexMeta {
    /// Its name.
    pub name: String,
    /// Document-partitioned shards.
    pub shards: u32,
    /// Replicas wanted per shard.
    pub replicas: u32,
    /// Elasticsearch mappings every replica's schema is made from.
    pub mappings: Value,
    /// For each shard, the nodes holding a replica of it.
    pub assignment: Vec<Vec<String>>,
    /// Unique to this creation: an index deleted and created again under
    /// the same name is another index (its replicas live in other
    /// directories, so none resumes from the old one's stream position).
    #[serde(default)]
    pub uid: String,
}

impl IndexMeta {
    /// The schema of the index's mappings.
    pub fn schema(&self) -> Result<tierdex::Schema> {
        tierdex::Schema::from_json(&self.mappings.to_string())
            .map_err(|e| ClusterError::Invalid(format!("index [{}]: {e}", self.name)))
    }
}

/// Places `replicas` replicas of each of `shards` shards on `nodes`:
/// replica r of shard s on node (s + r) mod n, so a shard's replicas are
/// on distinct nodes (fewer than asked when there are fewer nodes).
pub fn assign(shards: u32, replicas: u32, nodes: &[String]) -> Vec<Vec<String>> {
    let n = nodes.len();
    (0..shards as usize)
        .map(|s| {
            (0..(replicas as usize).min(n))
                .map(|r| nodes[(s + r) % n].clone())
                .collect()
        })
        .collect()
}

/// A node's heartbeat.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeInfo {
    /// Its id.
    pub id: String,
    /// Its process id (for the tests and the operator).
    pub pid: u32,
}

/// The map's buckets.
#[derive(Clone)]
pub struct ClusterMap {
    map: kv::Store,
    nodes: kv::Store,
}

impl ClusterMap {
    /// Opens the buckets, creating them (with `replicas` copies) if need be.
    pub async fn open(js: &jetstream::Context, replicas: usize) -> Result<ClusterMap> {
        let map = match js.get_key_value(MAP_BUCKET).await {
            Ok(s) => s,
            Err(_) => js
                .create_key_value(kv::Config {
                    bucket: MAP_BUCKET.into(),
                    history: 5,
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(ClusterError::nats)?,
        };
        let nodes = match js.get_key_value(NODES_BUCKET).await {
            Ok(s) => s,
            Err(_) => js
                .create_key_value(kv::Config {
                    bucket: NODES_BUCKET.into(),
                    history: 1,
                    max_age: NODE_TTL,
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(ClusterError::nats)?,
        };
        Ok(ClusterMap { map, nodes })
    }

    /// An index's entry.
    pub async fn index(&self, name: &str) -> Result<Option<IndexMeta>> {
        match self.map.get(names::index_key(name)).await.map_err(ClusterError::nats)? {
            None => Ok(None),
            Some(b) => serde_json::from_slice(&b)
                .map(Some)
                .map_err(|e| ClusterError::Invalid(format!("the map's entry of [{name}]: {e}"))),
        }
    }

    /// An index's entry with its revision (for [`ClusterMap::replace_index`]).
    pub async fn index_revision(&self, name: &str) -> Result<Option<(IndexMeta, u64)>> {
        let entry = self
            .map
            .entry(names::index_key(name))
            .await
            .map_err(ClusterError::nats)?;
        match entry {
            Some(e) if e.operation == kv::Operation::Put => serde_json::from_slice(&e.value)
                .map(|m| Some((m, e.revision)))
                .map_err(|err| ClusterError::Invalid(format!("the map's entry of [{name}]: {err}"))),
            _ => Ok(None),
        }
    }

    /// Replaces an index's entry if it is still at `revision` (false when
    /// another writer changed it first).
    pub async fn replace_index(&self, meta: &IndexMeta, revision: u64) -> Result<bool> {
        let bytes = serde_json::to_vec(meta).expect("serialises");
        match self
            .map
            .update(names::index_key(&meta.name), bytes.into(), revision)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(false),
            Err(e) => Err(ClusterError::nats(e)),
        }
    }

    /// Every index's entry.
    pub async fn indices(&self) -> Result<Vec<IndexMeta>> {
        let mut keys = self.map.keys().await.map_err(ClusterError::nats)?;
        let mut out = Vec::new();
        while let Some(k) = keys.next().await {
            let k = k.map_err(ClusterError::nats)?;
            if let Some(name) = k.strip_prefix("index.") {
                if let Some(m) = self.index(name).await? {
                    out.push(m);
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Records a new index; fails if one of that name exists.
    pub async fn create_index(&self, meta: &IndexMeta) -> Result<()> {
        let bytes = serde_json::to_vec(meta).expect("serialises");
        self.map
            .create(names::index_key(&meta.name), bytes.into())
            .await
            .map(|_| ())
            .map_err(|e| match e.kind() {
                kv::CreateErrorKind::AlreadyExists => {
                    ClusterError::Invalid(format!("index [{}] already exists", meta.name))
                }
                _ => ClusterError::nats(e),
            })
    }

    /// Removes an index's entry.
    pub async fn delete_index(&self, name: &str) -> Result<()> {
        self.map
            .delete(names::index_key(name))
            .await
            .map_err(ClusterError::nats)
    }

    /// Renews a node's heartbeat.
    pub async fn heartbeat(&self, info: &NodeInfo) -> Result<()> {
        let bytes = serde_json::to_vec(info).expect("serialises");
        self.nodes
            .put(&info.id, bytes.into())
            .await
            .map(|_| ())
            .map_err(ClusterError::nats)
    }

    /// Takes a node out at once (a node stopping cleanly).
    pub async fn leave(&self, id: &str) -> Result<()> {
        self.nodes.purge(id).await.map_err(ClusterError::nats)
    }

    /// The nodes whose heartbeat is recent, by id.
    pub async fn live_nodes(&self) -> Result<Vec<String>> {
        let mut keys = self.nodes.keys().await.map_err(ClusterError::nats)?;
        let mut out = Vec::new();
        while let Some(k) = keys.next().await {
            out.push(k.map_err(ClusterError::nats)?);
        }
        out.sort();
        Ok(out)
    }
}

/// The assignment after nodes are lost: each shard keeps its replicas on
/// nodes not in `gone`, and gets new ones on `live` nodes not holding it
/// (those holding fewest replicas first) up to `replicas` copies. `None`
/// when nothing changes.
pub fn reassign(
    assignment: &[Vec<String>],
    replicas: u32,
    live: &[String],
    gone: &[String],
) -> Option<Vec<Vec<String>>> {
    let mut out: Vec<Vec<String>> = assignment
        .iter()
        .map(|held| held.iter().filter(|n| !gone.contains(n)).cloned().collect())
        .collect();
    let mut load: std::collections::BTreeMap<&str, usize> = live.iter().map(|n| (n.as_str(), 0)).collect();
    for held in &out {
        for n in held {
            if let Some(c) = load.get_mut(n.as_str()) {
                *c += 1;
            }
        }
    }
    for held in &mut out {
        while held.len() < replicas as usize {
            let Some((&node, _)) = load
                .iter()
                .filter(|(n, _)| !held.iter().any(|h| h == *n))
                .min_by_key(|(n, c)| (**c, **n))
            else {
                break;
            };
            held.push(node.to_string());
            *load.get_mut(node).expect("a live node") += 1;
        }
    }
    (out != assignment).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_of_a_shard_are_on_distinct_nodes() {
        let nodes: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let a = assign(3, 2, &nodes);
        assert_eq!(a, vec![vec!["a", "b"], vec!["b", "c"], vec!["c", "a"]]);
        let one = assign(2, 3, &nodes[..1]);
        assert_eq!(one, vec![vec!["a"], vec!["a"]]);
        assert!(assign(2, 1, &[]).iter().all(Vec::is_empty));
    }

    #[test]
    fn lost_nodes_replicas_move_to_the_least_loaded() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let a = vec![s(&["a", "b"]), s(&["b", "c"]), s(&["c", "a"])];
        // c lost: its two replicas go to a and b, one each where possible.
        let r = reassign(&a, 2, &s(&["a", "b"]), &s(&["c"])).unwrap();
        assert_eq!(r, vec![s(&["a", "b"]), s(&["b", "a"]), s(&["a", "b"])]);
        // Nothing lost, nothing missing: unchanged.
        assert_eq!(reassign(&a, 2, &s(&["a", "b", "c"]), &[]), None);
        // A new node takes the copies missing since creation.
        let one = vec![s(&["a"]), s(&["a"])];
        let r = reassign(&one, 2, &s(&["a", "d"]), &[]).unwrap();
        assert_eq!(r, vec![s(&["a", "d"]), s(&["a", "d"])]);
        // No live node left for a copy: the shard keeps what it has.
        assert_eq!(reassign(&one, 2, &s(&["a"]), &[]), None);
    }
}
