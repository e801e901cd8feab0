//! Merging an index's segments into a new index directory, for tests that
//! compare merges (serial and parallel, merged and single builds, in input
//! order and reordered).

use std::path::Path;

use tierdex::indexing::merge::{merge_live, MergeOptions};
use tierdex::store::StoreOptions;
use tierdex::Index;

/// Merges the segments of the index in `src` into one segment in `out` on
/// `threads` threads (parallel whatever the size), with a manifest, so
/// that it opens as an index.
#[allow(dead_code)]
pub fn merge_into(src: &Index, out: &Path, threads: usize) {
    merge_into_with(src, out, MergeOptions::new(StoreOptions::default(), threads));
}

/// [`merge_into`] with `options` (parallel whatever the size).
#[allow(dead_code)]
pub fn merge_into_with(src: &Index, out: &Path, options: MergeOptions) {
    std::fs::create_dir_all(out).unwrap();
    let sources: Vec<_> = src
        .segments()
        .iter()
        .enumerate()
        .map(|(i, r)| (&**r, src.deletes(i)))
        .collect();
    let format = src.manifest().postings_format();
    let options = MergeOptions {
        parallel_min_bytes: 0,
        ..options
    };
    let meta = merge_live(out, &sources, "seg000000", format, &options, &|_| {}).unwrap();
    let mut m = src.manifest().clone();
    m.segments = vec![meta];
    m.next_segment = 1;
    m.store(out).unwrap();
}
