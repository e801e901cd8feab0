//! The write-ahead log's files as anyone opening an index reads them: their
//! names, the framing of their records, and how the end of a file is told
//! apart as torn or corrupt. The log itself (appending, syncing, replaying
//! into a writer) is [`crate::update::wal`]; readers use [`unapplied`] to
//! learn whether acknowledged batches are still only in the log.
//!
//! * Files `wal-<first seq>.log`, each starting with a header (magic, first
//!   sequence number). Records follow:
//!   `[payload length u32][seq u64][xxh3 of seq and payload u64][payload]`,
//!   the payload being a batch as JSON (which never holds a zero byte).
//!
//! # Torn or corrupt
//!
//! A batch is acknowledged once an `fdatasync` covers it, and records are
//! appended in order, so a crash can only cut the *last* record of the
//! *last* file short: what is left of it is a prefix of what was written
//! (on some file systems followed by zeros up to the file's end). Such a
//! tail was never acknowledged and is dropped. Anything else is damage to
//! acknowledged data and is reported as corruption ([`TailKind::Corrupt`]),
//! never dropped silently. The rule applied to a record at the end of the
//! last file that does not check out:
//!
//! * fewer bytes than a record header, or nothing but zeros: torn;
//! * a declared length beyond [`MAX_PAYLOAD`]: corrupt (a cut leaves the
//!   length it wrote, and no writer writes such a length);
//! * a declared length running past the end of the file: torn, unless the
//!   bytes that are there form a payload matching the header's checksum
//!   (a complete record whose length field was damaged): corrupt;
//! * all its declared bytes present but a checksum mismatch: corrupt,
//!   unless its payload holds a zero byte from which the file is zeros to
//!   its end (written in part, the rest never reached the disk): torn.
//!
//! Any failing record in an earlier file, or one followed by a valid
//! record, is corrupt.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Magic bytes at the start of every log file.
pub const MAGIC: &[u8; 8] = b"TDXWAL01";
/// Bytes of a file header: magic and first sequence number.
pub const HEADER: usize = 16;
/// Bytes of a record header: length, sequence number, checksum.
pub const RECORD_HEADER: usize = 20;
/// Largest payload accepted (a batch of this size is almost certainly a bug).
pub const MAX_PAYLOAD: usize = 1 << 30;

/// Name of the log file whose first record is `first`.
pub fn file_name(first: u64) -> String {
    format!("wal-{first:020}.log")
}

/// The log files in `dir`, by first sequence number.
pub fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let e = e.map_err(|e| Error::io(dir, e))?;
        let name = e.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix("wal-").and_then(|r| r.strip_suffix(".log")) {
            if let Ok(first) = n.parse::<u64>() {
                out.push((first, e.path()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The checksum of a record.
pub fn checksum(seq: u64, payload: &[u8]) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&seq.to_le_bytes());
    h.update(payload);
    h.digest()
}

/// A record's bytes: header and payload.
pub fn encode(seq: u64, payload: &[u8]) -> Vec<u8> {
    let mut rec = Vec::with_capacity(RECORD_HEADER + payload.len());
    rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    rec.extend_from_slice(&seq.to_le_bytes());
    rec.extend_from_slice(&checksum(seq, payload).to_le_bytes());
    rec.extend_from_slice(payload);
    rec
}

/// A record parsed at `at` in `bytes`: its sequence number, payload and end.
pub fn record(bytes: &[u8], at: usize) -> Option<(u64, &[u8], usize)> {
    let head = bytes.get(at..at + RECORD_HEADER)?;
    let len = u32::from_le_bytes(head[0..4].try_into().unwrap()) as usize;
    let seq = u64::from_le_bytes(head[4..12].try_into().unwrap());
    let sum = u64::from_le_bytes(head[12..20].try_into().unwrap());
    if len > MAX_PAYLOAD {
        return None;
    }
    let payload = bytes.get(at + RECORD_HEADER..at + RECORD_HEADER + len)?;
    (checksum(seq, payload) == sum).then_some((seq, payload, at + RECORD_HEADER + len))
}

/// What a record that does not check out is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailKind {
    /// A record a crash cut short: never acknowledged, droppable.
    Torn,
    /// Damage to a complete record: why.
    Corrupt(String),
}

/// Classifies the record at `at` of a file's `bytes`, expected to be
/// record `seq`, that [`record`] does not accept (see the module doc);
/// `last` says whether the file is the log's last one.
pub fn classify(bytes: &[u8], at: usize, seq: u64, last: bool) -> TailKind {
    if !last {
        return TailKind::Corrupt("it fails its checksum, and later log files follow".into());
    }
    if next_record(bytes, at, seq + 1).is_some() {
        return TailKind::Corrupt("it fails its checksum, and the log goes on after it".into());
    }
    let rest = &bytes[at..];
    if rest.len() < RECORD_HEADER || rest.iter().all(|&b| b == 0) {
        return TailKind::Torn;
    }
    let len = u32::from_le_bytes(rest[0..4].try_into().unwrap()) as usize;
    let seq = u64::from_le_bytes(rest[4..12].try_into().unwrap());
    let sum = u64::from_le_bytes(rest[12..20].try_into().unwrap());
    if len > MAX_PAYLOAD {
        return TailKind::Corrupt(format!("its length field says {len} bytes, more than any batch"));
    }
    let present = &rest[RECORD_HEADER..];
    if present.len() < len {
        if checksum(seq, present) == sum {
            return TailKind::Corrupt(format!(
                "its length field says {len} bytes but the {} bytes there are a whole record",
                present.len()
            ));
        }
        return TailKind::Torn;
    }
    match present[..len].iter().position(|&b| b == 0) {
        Some(z) if present[z..].iter().all(|&b| b == 0) => TailKind::Torn,
        _ => TailKind::Corrupt("it is complete but fails its checksum".into()),
    }
}

/// The offset of a valid record numbered `seq` anywhere after `at` (its
/// header holds the number, which a JSON payload, free of zero bytes,
/// cannot).
fn next_record(bytes: &[u8], at: usize, seq: u64) -> Option<usize> {
    let pattern = seq.to_le_bytes();
    let from = at + 1 + 4;
    let tail = bytes.get(from..)?;
    tail.windows(8)
        .enumerate()
        .filter(|(_, w)| *w == pattern)
        .map(|(i, _)| from + i - 4)
        .find(|&start| record(bytes, start).is_some_and(|(s, _, _)| s == seq))
}

/// What a read-only look at the log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogSummary {
    /// Records after the index's last applied one (acknowledged batches a
    /// writer has not applied to the segments yet).
    pub unapplied: u64,
    /// Damage found, if any (the records after it are not counted).
    pub problem: Option<String>,
}

/// Counts the log records in `dir` after sequence number `applied`,
/// without changing anything (a torn tail is ignored, damage reported in
/// [`LogSummary::problem`]).
pub fn unapplied(dir: &Path, applied: u64) -> Result<LogSummary> {
    let files = list(dir)?;
    let mut out = LogSummary::default();
    for (i, (first, path)) in files.iter().enumerate() {
        let last = i + 1 == files.len();
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            // Removed by a writer's checkpoint meanwhile: all applied.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(path, e)),
        };
        if bytes.len() < HEADER || &bytes[..8] != MAGIC {
            if !(last && bytes.len() < HEADER) {
                out.problem = Some(format!("{}: not a tierdex write-ahead log (bad header)", path.display()));
                return Ok(out);
            }
            continue;
        }
        let mut at = HEADER;
        let mut seq = *first;
        while at < bytes.len() {
            match record(&bytes, at) {
                Some((s, _, end)) if s == seq => {
                    if s > applied {
                        out.unapplied += 1;
                    }
                    seq += 1;
                    at = end;
                }
                _ => {
                    if let TailKind::Corrupt(why) = classify(&bytes, at, seq, last) {
                        out.problem = Some(format!("{}: record {seq} at offset {at}: {why}", path.display()));
                        return Ok(out);
                    }
                    break;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(payloads: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&1u64.to_le_bytes());
        let mut starts = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            starts.push(bytes.len());
            bytes.extend(encode(i as u64 + 1, p));
        }
        (bytes, starts)
    }

    #[test]
    fn every_cut_of_the_last_record_is_torn() {
        let (bytes, starts) = file(&[b"[\"first\"]", b"[\"second batch\"]"]);
        let at = starts[1];
        for cut in at + 1..bytes.len() {
            assert_eq!(classify(&bytes[..cut], at, 2, true), TailKind::Torn, "cut at {cut}");
            // The same cut followed by zeros up to a page.
            let mut zeros = bytes[..cut].to_vec();
            zeros.resize(bytes.len() + 40, 0);
            assert_eq!(classify(&zeros, at, 2, true), TailKind::Torn, "cut at {cut} then zeros");
        }
    }

    #[test]
    fn every_flipped_bit_of_the_last_record_is_corruption() {
        let (bytes, starts) = file(&[b"[\"first\"]", b"[\"second batch\"]"]);
        let at = starts[1];
        for pos in at..bytes.len() {
            for bit in 0..8 {
                let mut bad = bytes.clone();
                bad[pos] ^= 1 << bit;
                if record(&bad, at).is_some() {
                    continue;
                }
                assert!(
                    matches!(classify(&bad, at, 2, true), TailKind::Corrupt(_)),
                    "bit {bit} of byte {pos} read as a torn tail"
                );
                // The first record damaged, the second intact: corrupt.
                let mut bad = bytes.clone();
                bad[starts[0] + (pos - at).min(starts[1] - starts[0] - 1)] ^= 1 << bit;
                if record(&bad, starts[0]).is_none() {
                    assert!(
                        matches!(classify(&bad, starts[0], 1, true), TailKind::Corrupt(_)),
                        "bit {bit} of byte {pos} of the first record read as a torn tail"
                    );
                }
            }
        }
        // In an earlier file, damage is corruption.
        let mut bad = bytes.clone();
        bad[starts[1] + RECORD_HEADER + 1] ^= 1;
        assert!(matches!(classify(&bad, starts[1], 2, false), TailKind::Corrupt(_)));
    }
}
