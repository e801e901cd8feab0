//! Names shared by brokers and nodes, and the shard a document id belongs to.

use xxhash_rust::xxh3::xxh3_64;

/// The key-value bucket of the cluster map.
pub const MAP_BUCKET: &str = "tierdex_map";
/// The key-value bucket of node heartbeats (entries expire).
pub const NODES_BUCKET: &str = "tierdex_nodes";
/// How long a node's heartbeat counts it live.
pub const NODE_TTL: std::time::Duration = std::time::Duration::from_secs(4);
/// How often a node renews its heartbeat.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(1000);

/// Index names a cluster accepts: lowercase letters, digits, `-` and `_`
/// (stream and subject names are built from them).
pub fn check_index_name(name: &str) -> crate::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !name.starts_with(['-', '_']);
    match ok {
        true => Ok(()),
        false => Err(crate::ClusterError::Invalid(format!(
            "invalid index name [{name}]: lowercase letters, digits, '-' and '_', not starting with '-' or '_'"
        ))),
    }
}

/// Node ids: letters, digits, `-` and `_` (a subject token).
pub fn check_node_id(id: &str) -> crate::Result<()> {
    match !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        true => Ok(()),
        false => Err(crate::ClusterError::Invalid(format!(
            "invalid node id {id:?}: letters, digits, '-' and '_'"
        ))),
    }
}

/// The JetStream stream of a shard.
pub fn stream(index: &str, shard: u32) -> String {
    format!("TIERDEX_{index}_{shard}")
}

/// The subject writes to a shard are published on.
pub fn write_subject(index: &str, shard: u32) -> String {
    format!("tierdex.w.{index}.{shard}")
}

/// The subject a node answers shard requests on.
pub fn node_subject(node: &str) -> String {
    format!("tierdex.q.{node}")
}

/// The durable consumer of one replica.
pub fn consumer(node: &str, index: &str, shard: u32) -> String {
    format!("{node}_{index}_{shard}")
}

/// The map key of an index.
pub fn index_key(index: &str) -> String {
    format!("index.{index}")
}

/// The shard of a document id: a hash of the id, so that every broker
/// routes an id to the same shard.
pub fn shard_of(id: &str, shards: u32) -> u32 {
    (xxh3_64(id.as_bytes()) % u64::from(shards.max(1))) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_spread_over_the_shards() {
        let mut counts = [0u32; 3];
        for i in 0..3000 {
            counts[shard_of(&format!("doc-{i}"), 3) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (800..1200).contains(&c)), "{counts:?}");
        assert_eq!(shard_of("x", 1), 0);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_index_name("ted-talks_2").is_ok());
        for bad in ["", "Ted", "a.b", "a b", "-a", "a*"] {
            assert!(check_index_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_node_id("node-1").is_ok());
        assert!(check_node_id("a.b").is_err());
    }
}
