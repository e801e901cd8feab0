//! The zstd side of the store: one reusable compression context, bounded
//! decompression, and dictionary training.

use zstd::zstd_safe::{self, CCtx, CParameter, DCtx, DDict};

use super::format;

/// A zstd compression context configured for store records (content size and
/// content checksum in every frame, no dictionary id), reused across records.
pub(super) struct Compressor {
    cctx: CCtx<'static>,
}

fn zstd_error(code: usize) -> String {
    format!("zstd: {}", zstd_safe::get_error_name(code))
}

impl Compressor {
    pub fn new(level: i32) -> Result<Compressor, String> {
        let mut cctx = CCtx::try_create().ok_or("zstd could not allocate a compression context")?;
        for param in [
            CParameter::CompressionLevel(level),
            CParameter::ChecksumFlag(true),
            CParameter::ContentSizeFlag(true),
            CParameter::DictIdFlag(false),
        ] {
            cctx.set_parameter(param).map_err(zstd_error)?;
        }
        Ok(Compressor { cctx })
    }

    /// Uses `dict` for the following records (an empty slice: no dictionary).
    /// zstd digests the dictionary once and keeps it for every later frame.
    pub fn set_dictionary(&mut self, dict: &[u8]) -> Result<(), String> {
        self.cctx.load_dictionary(dict).map_err(zstd_error)?;
        Ok(())
    }

    /// Compresses `src` as one frame into `dst` (cleared first).
    pub fn compress(&mut self, src: &[u8], dst: &mut Vec<u8>) -> Result<(), String> {
        dst.clear();
        dst.reserve(zstd_safe::compress_bound(src.len()));
        self.cctx.compress2(dst, src).map_err(zstd_error)?;
        Ok(())
    }
}

/// Decompresses one record into `out` (cleared first). The output is bounded
/// by the length the frame header states, itself checked for plausibility
/// first, so a corrupt record never makes us allocate more than it could
/// legitimately describe. The error is the reason the record is corrupt.
pub(super) fn decompress(
    dctx: &mut DCtx<'static>,
    ddict: Option<&DDict<'static>>,
    record: &[u8],
    out: &mut Vec<u8>,
) -> Result<(), String> {
    let size = format::record_content_size(record)?;
    out.clear();
    out.reserve_exact(size);
    let written = match ddict {
        Some(ddict) => dctx.decompress_using_ddict(out, record, ddict),
        None => dctx.decompress(out, record),
    }
    .map_err(zstd_error)?;
    if written != size {
        return Err(format!("record decompressed to {written} bytes but states {size}"));
    }
    Ok(())
}

/// Limits of dictionary training.
pub(super) struct TrainLimits {
    /// Only the first `sample_prefix` bytes of each document are used: a
    /// dictionary helps the start of a document, the rest finds its matches
    /// in the document itself.
    pub sample_prefix: usize,
    /// Largest dictionary.
    pub max_dict: usize,
}

/// Fewest sample documents worth training on.
pub(super) const MIN_TRAINING_DOCS: usize = 16;
/// Smallest sample (bytes) worth training on.
pub(super) const MIN_TRAINING_BYTES: usize = 16 << 10;

/// Trains a dictionary on serialised documents; `None` when there is too
/// little material or zstd gives up.
pub(super) fn train(samples: &[Vec<u8>], limits: &TrainLimits) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    let mut sizes = Vec::with_capacity(samples.len());
    for s in samples {
        let s = &s[..s.len().min(limits.sample_prefix)];
        data.extend_from_slice(s);
        sizes.push(s.len());
    }
    if samples.len() < MIN_TRAINING_DOCS || data.len() < MIN_TRAINING_BYTES {
        return None;
    }
    // zstd's rule of thumb: samples about 100 times the dictionary size; the
    // dictionary should not be more than a tenth of them.
    let max_dict = (data.len() / 10).clamp(1 << 10, limits.max_dict);
    match zstd::dict::from_continuous(&data, &sizes, max_dict) {
        Ok(dict) => Some(dict),
        Err(e) => {
            tracing::debug!(
                samples = samples.len(),
                bytes = data.len(),
                "zstd dictionary training failed: {e}"
            );
            None
        }
    }
}
