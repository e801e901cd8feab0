//! Memory limits for query processes (DESIGN §3): cgroup v1 memory groups
//! that remove themselves, dropping the page cache, and the I/O counters of
//! `/proc/<pid>/io`.
//!
//! A [`Cgroup`] is created under the memory controller's root (or another
//! parent), named `tierdex-bench-<pid>-<n>`, with `memory.limit_in_bytes`
//! and, where the kernel accounts swap, `memory.memsw.limit_in_bytes` set
//! to the same value (so swap cannot stretch the limit). Page cache counts
//! in the limit: a cgroup v1 memory group is charged for the pages its
//! processes bring into the cache. [`Cgroup::wrap`] starts a command
//! through `sh -c 'echo $$ > cgroup.procs; exec ...'`, so the process is in
//! the group before the engine runs at all. Dropping the [`Cgroup`] kills
//! whatever is left in it (only processes this program started) and removes
//! it, on errors and panics alike; [`remove_on_interrupt`] does the same on
//! SIGINT, SIGTERM and SIGHUP.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// Where cgroup v1 mounts its memory controller.
pub const MEMORY_ROOT: &str = "/sys/fs/cgroup/memory";

/// Name prefix of the groups this program creates.
pub const PREFIX: &str = "tierdex-bench-";

/// Why memory-limited runs cannot happen on this machine under `parent`,
/// or `None` when they can.
pub fn unavailable(parent: &Path) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(
            "memory-limited runs need root (to create cgroup v1 memory groups and drop the page cache)".into(),
        );
    }
    if !parent.join("memory.limit_in_bytes").is_file() || !parent.join("cgroup.procs").is_file() {
        return Some(format!(
            "no cgroup v1 memory controller at {} (memory.limit_in_bytes missing)",
            parent.display()
        ));
    }
    if !Path::new("/proc/sys/vm/drop_caches").exists() {
        return Some("/proc/sys/vm/drop_caches is missing".into());
    }
    None
}

/// Writes back dirty pages, then drops the page cache, dentries and inodes
/// (`sync; echo 3 > /proc/sys/vm/drop_caches`). Pages mapped by running
/// processes stay.
pub fn drop_caches() -> Result<()> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3").context("writing 3 to /proc/sys/vm/drop_caches")
}

/// Groups alive in this process, for the interrupt handler.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static SEQ: AtomicU64 = AtomicU64::new(0);

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A cgroup v1 memory group, removed when dropped.
#[derive(Debug)]
pub struct Cgroup {
    path: PathBuf,
    limit: Option<u64>,
}

/// Counters of a memory group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupStats {
    /// `memory.max_usage_in_bytes`: the peak of anonymous memory plus page cache charged to the group.
    pub max_usage_bytes: u64,
    /// `memory.usage_in_bytes` when sampled.
    pub usage_bytes: u64,
    /// `memory.failcnt`: how often a charge hit the limit (the kernel then
    /// reclaimed). Some kernels (6.18 here) leave it at 0 even when the
    /// limit is reached: `max_usage_bytes` equal to the limit tells.
    pub failcnt: u64,
    /// `memory.memsw.failcnt` (0 where swap is not accounted).
    #[serde(default)]
    pub memsw_failcnt: u64,
    /// `oom_kill` of `memory.oom_control`: processes the OOM killer ended in the group.
    pub oom_kills: u64,
    /// `cache` of `memory.stat`: page cache charged to the group when sampled.
    pub cache_bytes: u64,
    /// `rss` of `memory.stat`: anonymous memory when sampled.
    pub rss_bytes: u64,
}

impl Cgroup {
    /// Creates `parent/tierdex-bench-<pid>-<n>` with a memory limit (`None`:
    /// unlimited, still measured).
    pub fn create(parent: &Path, limit_bytes: Option<u64>) -> Result<Cgroup> {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let path = parent.join(format!("{PREFIX}{}-{n}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating cgroup {}", path.display()))?;
        live().push(path.clone());
        // From here on the guard removes the group, whatever fails next.
        let cg = Cgroup {
            path,
            limit: limit_bytes,
        };
        if let Some(limit) = limit_bytes {
            // memory before memsw: the kernel wants memsw >= memory at all times.
            cg.write("memory.limit_in_bytes", &limit.to_string())?;
            if cg.path.join("memory.memsw.limit_in_bytes").exists() {
                cg.write("memory.memsw.limit_in_bytes", &limit.to_string())?;
            }
            let set = cg.read_u64("memory.limit_in_bytes")?;
            // The kernel rounds to whole pages.
            if set > limit || limit - set >= 1 << 16 {
                bail!(
                    "{}: asked for a limit of {limit} bytes, the kernel set {set}",
                    cg.path.display()
                );
            }
        }
        Ok(cg)
    }

    /// The group's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The limit asked for (`None`: unlimited).
    pub fn limit(&self) -> Option<u64> {
        self.limit
    }

    /// The group's name (the last component of its path).
    pub fn name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    fn write(&self, file: &str, value: &str) -> Result<()> {
        std::fs::write(self.path.join(file), value)
            .with_context(|| format!("writing {value} to {}", self.path.join(file).display()))
    }

    fn read_u64(&self, file: &str) -> Result<u64> {
        let p = self.path.join(file);
        let text = std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{} holds `{}`", p.display(), text.trim()))
    }

    /// Processes in the group.
    pub fn pids(&self) -> Vec<u32> {
        pids_of(&self.path)
    }

    /// Whether process `pid` is in this group (by `/proc/<pid>/cgroup`).
    pub fn contains(&self, pid: u32) -> bool {
        let name = self.name();
        std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|t| {
            t.lines().any(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
                controllers.is_some_and(|c| c.split(',').any(|c| c == "memory"))
                    && path.is_some_and(|p| p.rsplit('/').next() == Some(name.as_str()))
            })
        })
    }

    /// The group's counters now.
    pub fn stats(&self) -> CgroupStats {
        let key = |text: &str, k: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(k).and_then(|v| v.strip_prefix(' ')))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        let read = |f: &str| std::fs::read_to_string(self.path.join(f)).unwrap_or_default();
        let stat = read("memory.stat");
        CgroupStats {
            max_usage_bytes: self.read_u64("memory.max_usage_in_bytes").unwrap_or(0),
            usage_bytes: self.read_u64("memory.usage_in_bytes").unwrap_or(0),
            failcnt: self.read_u64("memory.failcnt").unwrap_or(0),
            memsw_failcnt: self.read_u64("memory.memsw.failcnt").unwrap_or(0),
            oom_kills: key(&read("memory.oom_control"), "oom_kill"),
            cache_bytes: key(&stat, "cache"),
            rss_bytes: key(&stat, "rss"),
        }
    }

    /// `cmd` started through a shell that first moves itself into this
    /// group, then execs the program (same pid): nothing the program reads
    /// is read outside the group. Arguments, environment and working
    /// directory are carried over; set up stdio on the result. If the move
    /// fails, the shell exits with status 125 before running anything.
    pub fn wrap(&self, cmd: &Command) -> Command {
        let mut w = Command::new("/bin/sh");
        w.arg("-c")
            .arg(r#"echo $$ > "$1" || exit 125; shift; exec "$@""#)
            .arg("tierdex-bench-cgroup")
            .arg(self.path.join("cgroup.procs"))
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => w.env(k, v),
                None => w.env_remove(k),
            };
        }
        if let Some(d) = cmd.get_current_dir() {
            w.current_dir(d);
        }
        w
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        remove(&self.path);
        live().retain(|p| p != &self.path);
    }
}

fn pids_of(group: &Path) -> Vec<u32> {
    std::fs::read_to_string(group.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Kills what is left in `group` (processes this program started) and
/// removes it; retries for up to 10 s while processes exit. Returns whether
/// the group is gone.
fn remove(group: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for pid in pids_of(group) {
            // SAFETY: kill has no memory-safety preconditions; the pid is one
            // of the group's, i.e. a process this program started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
        match std::fs::remove_dir(group) {
            Ok(()) => return true,
            Err(e) if e.kind() == ErrorKind::NotFound => return true,
            Err(e) if Instant::now() >= deadline => {
                eprintln!("warning: could not remove cgroup {}: {e}", group.display());
                return false;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Removes empty groups left by earlier runs of this program that died
/// without cleaning up (killed with SIGKILL); groups that still hold
/// processes are reported, not touched. Returns the groups removed.
pub fn sweep_stale(parent: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return removed;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        let path = e.path();
        if pids_of(&path).is_empty() {
            if std::fs::remove_dir(&path).is_ok() {
                removed.push(path);
            }
        } else {
            eprintln!(
                "warning: {} is left from an earlier run and still holds processes {:?}",
                path.display(),
                pids_of(&path)
            );
        }
    }
    removed
}

/// On SIGINT, SIGTERM or SIGHUP, kills the processes in the live groups,
/// removes the groups and exits with 128 + the signal. Call once, early,
/// before other threads start: the signals are blocked in the calling
/// thread (and so in the threads it starts later) and a watcher thread
/// waits for them. Child processes start with no blocked signals (the
/// standard library resets the mask), so Ctrl-C still reaches them.
pub fn remove_on_interrupt() {
    // SAFETY: plain libc calls on a local, initialised signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        std::thread::spawn(move || {
            let mut sig: libc::c_int = 0;
            if libc::sigwait(&set, &mut sig) != 0 {
                return;
            }
            let groups: Vec<PathBuf> = live().clone();
            for g in &groups {
                remove(g);
            }
            eprintln!("\ninterrupted (signal {sig}): removed {} cgroup(s)", groups.len());
            std::process::exit(128 + sig);
        });
    }
}

/// The counters of `/proc/<pid>/io`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcIo {
    /// Bytes asked for through read-like system calls (page cache hits included; mmap faults not).
    pub rchar: u64,
    /// Bytes written through write-like system calls.
    pub wchar: u64,
    /// Read-like system calls.
    pub syscr: u64,
    /// Write-like system calls.
    pub syscw: u64,
    /// Bytes this process caused to be fetched from the block layer: page
    /// cache misses of reads and of mmap faults (read-ahead included), and
    /// direct I/O. The honest "device bytes read".
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to the block layer.
    pub write_bytes: u64,
    /// Written bytes whose write-back was cancelled (truncation).
    pub cancelled_write_bytes: u64,
}

impl ProcIo {
    /// Parses the text of `/proc/<pid>/io`.
    pub fn parse(text: &str) -> Result<ProcIo> {
        let mut io = ProcIo::default();
        let mut seen = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let Some((k, v)) = line.split_once(':') else {
                bail!("unexpected line `{line}` in /proc/<pid>/io");
            };
            let v: u64 = v
                .trim()
                .parse()
                .with_context(|| format!("unexpected value in `{line}` of /proc/<pid>/io"))?;
            let slot = match k.trim() {
                "rchar" => &mut io.rchar,
                "wchar" => &mut io.wchar,
                "syscr" => &mut io.syscr,
                "syscw" => &mut io.syscw,
                "read_bytes" => &mut io.read_bytes,
                "write_bytes" => &mut io.write_bytes,
                "cancelled_write_bytes" => &mut io.cancelled_write_bytes,
                _ => continue,
            };
            *slot = v;
            seen += 1;
        }
        if seen < 7 {
            bail!("/proc/<pid>/io lacks counters (kernel without task I/O accounting?)");
        }
        Ok(io)
    }

    /// The counters of process `pid` (all its threads, live and exited).
    pub fn of(pid: u32) -> Result<ProcIo> {
        let p = format!("/proc/{pid}/io");
        ProcIo::parse(&std::fs::read_to_string(&p).with_context(|| format!("reading {p}"))?)
    }

    /// `self - earlier`, counter by counter (saturating).
    pub fn since(&self, earlier: &ProcIo) -> ProcIo {
        ProcIo {
            rchar: self.rchar.saturating_sub(earlier.rchar),
            wchar: self.wchar.saturating_sub(earlier.wchar),
            syscr: self.syscr.saturating_sub(earlier.syscr),
            syscw: self.syscw.saturating_sub(earlier.syscw),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self.cancelled_write_bytes.saturating_sub(earlier.cancelled_write_bytes),
        }
    }
}

/// `read_ahead_kb` of the block device holding `path` (the kernel reads
/// up to this much around an mmap fault under MADV_NORMAL, and ahead of
/// sequential reads).
pub fn read_ahead_kb(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    // A partition has no queue of its own: its disk's is one level up.
    [base.join("queue/read_ahead_kb"), base.join("../queue/read_ahead_kb")]
        .iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .and_then(|t| t.trim().parse().ok())
}

/// Reads completed so far by the block device holding `path` (the first
/// field of its `stat` in sysfs): device-wide, so it counts any process's
/// reads of that device, not only the benchmarked one's.
pub fn device_reads(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Runs `cmd` to completion inside a fresh group limited to `limit_bytes`
/// and returns its exit status with the group's counters (used by tests
/// and as a smoke check).
pub fn run_in(
    parent: &Path,
    limit_bytes: Option<u64>,
    cmd: &Command,
) -> Result<(std::process::ExitStatus, CgroupStats)> {
    let cg = Cgroup::create(parent, limit_bytes)?;
    let status = cg.wrap(cmd).status().context("starting a command in a cgroup")?;
    Ok((status, cg.stats()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "rchar: 323934931\nwchar: 323929600\nsyscr: 632687\nsyscw: 632675\nread_bytes: 4096\nwrite_bytes: 323932160\ncancelled_write_bytes: 0\n";

    #[test]
    fn parses_proc_io() {
        let io = ProcIo::parse(SAMPLE).unwrap();
        assert_eq!(io.rchar, 323_934_931);
        assert_eq!(io.syscr, 632_687);
        assert_eq!(io.read_bytes, 4096);
        assert_eq!(io.write_bytes, 323_932_160);
        let later = ProcIo {
            read_bytes: 12288,
            rchar: 323_934_931 + 10,
            ..io
        };
        assert_eq!(later.since(&io).read_bytes, 8192);
        assert_eq!(later.since(&io).rchar, 10);
        assert_eq!(io.since(&later).read_bytes, 0);
        assert!(ProcIo::parse("rchar: 1\n").is_err());
        assert!(ProcIo::parse("rchar: x\nwchar: 1\n").is_err());
        // Our own counters are readable.
        let me = ProcIo::of(std::process::id()).unwrap();
        assert!(me.rchar > 0);
    }

    /// A parent for test groups, or `None` (skip) without root and cgroup v1.
    fn test_parent() -> Option<PathBuf> {
        let parent = PathBuf::from(MEMORY_ROOT);
        match unavailable(&parent) {
            Some(why) => {
                eprintln!("skipped: {why}");
                None
            }
            None => Some(parent),
        }
    }

    fn ours(parent: &Path) -> Vec<String> {
        let prefix = format!("{PREFIX}{}-", std::process::id());
        std::fs::read_dir(parent)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&prefix))
            .collect()
    }

    #[test]
    fn device_reads_count_direct_reads() {
        let file = tempfile::NamedTempFile::new_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        std::fs::write(file.path(), vec![7u8; 1 << 16]).unwrap();
        let Some(before) = device_reads(file.path()) else {
            return; // not on a block device (e.g. an overlay file system)
        };
        let mut dd = Command::new("dd");
        dd.arg(format!("if={}", file.path().display()))
            .args(["of=/dev/null", "bs=4096", "count=16", "iflag=direct"]);
        // Not every file system takes O_DIRECT: count only when it did.
        if dd.output().unwrap().status.success() {
            assert!(device_reads(file.path()).unwrap() > before);
        }
    }

    #[test]
    fn groups_limit_measure_and_leave_nothing_behind() {
        let Some(parent) = test_parent() else {
            return;
        };
        // A limited group: both limits set, the process runs inside it.
        let cg = Cgroup::create(&parent, Some(64 << 20)).unwrap();
        let path = cg.path().to_path_buf();
        let name = cg.name();
        assert_eq!(
            std::fs::read_to_string(path.join("memory.limit_in_bytes"))
                .unwrap()
                .trim(),
            "67108864"
        );
        if path.join("memory.memsw.limit_in_bytes").exists() {
            assert_eq!(
                std::fs::read_to_string(path.join("memory.memsw.limit_in_bytes"))
                    .unwrap()
                    .trim(),
                "67108864"
            );
        }
        let mut sh = Command::new("/bin/sh");
        sh.args(["-c", "cat /proc/self/cgroup"]);
        let out = cg.wrap(&sh).output().unwrap();
        assert!(out.status.success());
        assert!(String::from_utf8_lossy(&out.stdout).contains(&name), "{out:?}");
        // A process still running when the guard drops is killed, the group removed.
        let mut sleep = Command::new("sleep");
        sleep.arg("60");
        let mut child = cg.wrap(&sleep).spawn().unwrap();
        let t = Instant::now();
        while !cg.contains(child.id()) && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(cg.contains(child.id()));
        assert_eq!(cg.pids(), vec![child.id()]);
        drop(cg);
        assert!(!path.exists());
        assert!(!child.wait().unwrap().success());

        // Unlimited groups measure too; a panic still removes the group.
        let p2 = parent.clone();
        let r = std::panic::catch_unwind(move || {
            let cg = Cgroup::create(&p2, None).unwrap();
            let mut dd = Command::new("/bin/sh");
            dd.args(["-c", "head -c 8000000 /dev/zero > /dev/null; echo $$"]);
            assert!(cg.wrap(&dd).status().unwrap().success());
            assert!(cg.stats().max_usage_bytes > 0);
            panic!("on purpose");
        });
        assert!(r.is_err());

        // A command that outgrows its limit is OOM-killed and reported.
        let mut hog = Command::new("/bin/sh");
        hog.args(["-c", "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}"]);
        let (status, stats) = run_in(&parent, Some(32 << 20), &hog).unwrap();
        assert!(!status.success(), "{status:?} {stats:?}");
        assert!(stats.oom_kills > 0, "{stats:?}");
        assert_eq!(stats.max_usage_bytes, 32 << 20, "{stats:?}");

        // This is the only unit test creating groups: none of this process's may be left.
        assert_eq!(ours(&parent), Vec::<String>::new());
    }
}
