//! How much memory this process may fill with an index's pages: the
//! kernel's estimate of available memory (`MemAvailable`, which counts the
//! page cache it can reclaim), bounded by the memory limits of the
//! process's control groups (v1 `memory.limit_in_bytes`, v2 `memory.max`,
//! of its group and every group above it). Query planning uses it to tell
//! an index that stays in memory from one read from the device as needed.

use std::path::Path;

/// The memory this process may use, in bytes: the least of `MemAvailable`
/// and its control groups' limits; `None` when neither can be read (not
/// Linux, or `/proc` not mounted).
pub fn available() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    let available = meminfo.as_deref().and_then(mem_available);
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|groups| cgroup_limit(&groups, Path::new("/sys/fs/cgroup")));
    match (available, limit) {
        (Some(a), Some(l)) => Some(a.min(l)),
        (a, l) => a.or(l),
    }
}

/// Whether an index of `index_bytes` stays resident when `memory` bytes
/// are available: it takes at most half of them, the rest left to the
/// process and everything else.
pub fn fits(index_bytes: u64, memory: Option<u64>) -> bool {
    memory.is_some_and(|m| index_bytes <= m / 2)
}

/// `MemAvailable` of a `/proc/meminfo` text, in bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let mut words = line.split_whitespace().skip(1);
    let value: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => value.checked_mul(1024),
        None => Some(value),
        Some(_) => None,
    }
}

/// The least memory limit of the groups named in a `/proc/self/cgroup`
/// text (`ID:CONTROLLERS:PATH` lines; v1's `memory` controller, or v2's
/// `0::PATH`) and of every group above them, read under `root` (the v1
/// hierarchy at `root/memory`, v2 at `root` or `root/unified`). Groups not
/// visible from this mount namespace are skipped; no limit found: `None`.
fn cgroup_limit(groups: &str, root: &Path) -> Option<u64> {
    let mut least: Option<u64> = None;
    let mut take = |value: Option<u64>| {
        if let Some(v) = value {
            least = Some(least.map_or(v, |l| l.min(v)));
        }
    };
    for line in groups.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let (bases, file): (Vec<_>, _) = if controllers.split(',').any(|c| c == "memory") {
            (vec![root.join("memory")], "memory.limit_in_bytes")
        } else if controllers.is_empty() {
            (vec![root.to_path_buf(), root.join("unified")], "memory.max")
        } else {
            continue;
        };
        for base in bases {
            let mut dir = base.clone();
            take(read_limit(&dir.join(file)));
            for part in path.split('/').filter(|p| !p.is_empty()) {
                dir.push(part);
                take(read_limit(&dir.join(file)));
            }
        }
    }
    least
}

/// A limit file's value: bytes, or `None` for `max` (v2: no limit), an
/// unreadable file or v1's "no limit" (a value near `i64::MAX`).
fn read_limit(file: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let value: u64 = text.trim().parse().ok()?;
    (value < 1 << 62).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read_in_bytes() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000 kB\n";
        assert_eq!(mem_available(text), Some(2000 * 1024));
        assert_eq!(mem_available("MemTotal: 5 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: x kB\n"), None);
    }

    #[test]
    fn the_least_limit_of_a_group_and_its_parents_counts() {
        let root = tempfile::tempdir().unwrap();
        let write = |rel: &str, value: &str| {
            let dir = root.path().join(rel);
            std::fs::create_dir_all(&dir).unwrap();
            let file = if rel.starts_with("memory") {
                "memory.limit_in_bytes"
            } else {
                "memory.max"
            };
            std::fs::write(dir.join(file), value).unwrap();
        };
        // v1: no limit at the root, 1 GiB above the group, 256 MiB on it.
        write("memory", "9223372036854771712\n");
        write("memory/bench", "1073741824\n");
        write("memory/bench/run", "268435456\n");
        let v1 = "9:pids:/\n4:memory:/bench/run\n0::/\n";
        assert_eq!(cgroup_limit(v1, root.path()), Some(256 << 20));
        // A group not visible here: the limits above it still count.
        assert_eq!(cgroup_limit("4:memory:/bench/gone\n", root.path()), Some(1 << 30));
        // v2: `max` is no limit.
        write("svc", "max\n");
        write("svc/api", "536870912\n");
        assert_eq!(cgroup_limit("0::/svc/api\n", root.path()), Some(512 << 20));
        assert_eq!(cgroup_limit("0::/svc\n", root.path()), None);
        assert_eq!(cgroup_limit("garbage\n", root.path()), None);
    }

    #[test]
    fn an_index_fits_in_half_the_memory() {
        assert!(fits(100, Some(200)));
        assert!(!fits(101, Some(200)));
        assert!(!fits(1, None));
        assert!(!fits(u64::MAX, Some(u64::MAX)));
    }
}
