//! Round trips of term regions through the writer and the cursor.

use proptest::prelude::*;

use super::*;
use crate::bloom::{self, BloomParams, Direction, Probe};
use crate::layout::{Codec, Format, Layout, PostingsFiles, PostingsWriter};
use crate::schema::TERMINATED;
use crate::storage::{FileWriter, IndexFile, Storage, Tier, TierOptions};
use crate::termdict::TermInfo;

/// Random postings over `max_doc` documents.
fn postings(max_doc: u32) -> impl Strategy<Value = TermPostings> {
    proptest::collection::btree_set(0..max_doc, 1..(max_doc as usize).min(700))
        .prop_flat_map(|docs| {
            let docs: Vec<u32> = docs.into_iter().collect();
            let n = docs.len();
            (Just(docs), proptest::collection::vec(1u32..6, n), any::<u64>())
        })
        .prop_map(|(docs, freqs, seed)| with_payload(docs, freqs, seed))
}

/// Postings of `docs` with `freqs`, random positions and offsets, and
/// filters for two terms in three (a third of them empty), from `seed`.
fn with_payload(docs: Vec<u32>, freqs: Vec<u32>, seed: u64) -> TermPostings {
    let mut p = TermPostings {
        docs,
        freqs,
        ..Default::default()
    };
    let mut x = seed | 1;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    // Two terms in three get filters, a third of them empty.
    if !seed.is_multiple_of(3) {
        let fb = BloomParams::default().shape().unwrap().bytes as usize;
        for _ in 0..p.docs.len() {
            for filters in [&mut p.after, &mut p.before] {
                let empty = rnd() % 3 == 0;
                filters.extend((0..fb).map(|_| if empty { 0 } else { rnd() as u8 | 1 }));
            }
        }
    }
    for &f in &p.freqs {
        let (mut pos, mut end) = (0u32, 0u32);
        for j in 0..f {
            pos += (rnd() % 40) as u32 + u32::from(j > 0);
            let start = end + (rnd() % 30) as u32;
            end = start + 1 + (rnd() % 12) as u32;
            p.positions.push(pos);
            p.starts.push(start);
            p.ends.push(end);
        }
    }
    p
}

/// Long postings (up to hundreds of blocks, so skip tables with a second
/// level): each of `max_doc` documents present with probability `density`%.
fn long_postings() -> impl Strategy<Value = TermPostings> {
    (5_000u32..80_000, 1u64..95, any::<u64>()).prop_map(|(max_doc, density, seed)| {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let docs: Vec<u32> = (0..max_doc).filter(|_| rnd() % 100 < density).collect();
        let docs = if docs.is_empty() { vec![max_doc / 2] } else { docs };
        let freqs = docs.iter().map(|_| 1 + (rnd() % 4) as u32).collect();
        with_payload(docs, freqs, seed)
    })
}

/// Every layout x codec combination.
const KINDS: [(Layout, Codec); 4] = [
    (Layout::Grouped, Codec::Compressed),
    (Layout::Grouped, Codec::Direct),
    (Layout::Split, Codec::Compressed),
    (Layout::Split, Codec::Direct),
];

/// Writes `terms` (keys "t0", "t1", ...) with the real postings writer and
/// opens them on `tier`.
fn write_terms(
    terms: &[TermPostings],
    norms: &[u8],
    layout: Layout,
    codec: Codec,
    tier: Tier,
) -> (tempfile::TempDir, PostingsFiles, Vec<TermInfo>) {
    let dir = tempfile::tempdir().unwrap();
    let format = Format {
        layout,
        codec,
        bloom: Some(BloomParams::default()),
        ..Format::default()
    };
    let mut w = PostingsWriter::create(dir.path(), "s", format).unwrap();
    for (i, t) in terms.iter().enumerate() {
        w.add(format!("t{i:04}").as_bytes(), t, norms).unwrap();
    }
    w.finish().unwrap();
    let storage = Storage::new(TierOptions::on(tier)).unwrap();
    let files = PostingsFiles::open(format, |e| storage.open(dir.path().join(format!("s.{e}")))).unwrap();
    let infos = (0..terms.len())
        .map(|i| files.term_info(format!("t{i:04}").as_bytes()).unwrap().unwrap())
        .collect();
    (dir, files, infos)
}

/// Doc, frequency, positions and offsets of one posting.
type Posting = (u32, u32, Vec<u32>, Vec<(u32, u32)>);

fn per_doc(p: &TermPostings) -> Vec<Posting> {
    let mut out = Vec::new();
    let mut k = 0;
    for (i, &d) in p.docs.iter().enumerate() {
        let f = p.freqs[i] as usize;
        let pos = p.positions[k..k + f].to_vec();
        let off = (k..k + f).map(|j| (p.starts[j], p.ends[j])).collect();
        out.push((d, p.freqs[i], pos, off));
        k += f;
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn iterate_everything(terms in proptest::collection::vec(postings(3000), 1..4)) {
        let norms: Vec<u8> = (0..3000u32).map(|d| (d * 7 % 251) as u8).collect();
        for (k, (layout, codec)) in KINDS.into_iter().enumerate() {
        let tier = [Tier::Ram, Tier::Mmap, Tier::Buffered, Tier::Direct][k];
        let (_dir, files, infos) = write_terms(&terms, &norms, layout, codec, tier);
        let (mut pos, mut off) = (Vec::new(), Vec::new());
        let shape = BloomParams::default().shape().unwrap();
        let fb = shape.bytes as usize;
        let probes: Vec<Probe> = (0..8).map(|i| Probe::new(shape, format!("p{i}").as_bytes())).collect();
        let mut filter = Vec::new();
        for (t, info) in terms.iter().zip(&infos) {
            let mut c = files.cursor(info).unwrap();
            prop_assert_eq!(c.doc_freq() as usize, t.docs.len());
            prop_assert_eq!(c.has_filters(), !t.after.is_empty());
            let all = per_doc(t);
            for (i, (d, f, p, o)) in all.iter().cloned().enumerate() {
                // Filters: tested before positions are read, as a phrase does.
                for (dir, want) in [(Direction::After, &t.after), (Direction::Before, &t.before)] {
                    for probe in &probes {
                        let expect = want.is_empty() || bloom::may_contain(&want[i * fb..(i + 1) * fb], probe);
                        prop_assert_eq!(c.filter_may_contain(dir, probe), expect);
                    }
                    filter.clear();
                    prop_assert_eq!(c.copy_filter(dir, &mut filter), !want.is_empty());
                    if !want.is_empty() {
                        prop_assert_eq!(&filter[..], &want[i * fb..(i + 1) * fb]);
                    }
                }
                prop_assert_eq!(c.doc(), d);
                // A document ahead, when the cursor tells it, is that one.
                for k in [1usize, 7, 16] {
                    if let Some(u) = c.upcoming(k) {
                        prop_assert_eq!(Some(u), all.get(i + k).map(|x| x.0));
                    }
                }
                prop_assert_eq!(c.freq(), f);
                c.positions(&mut pos);
                prop_assert_eq!(&pos, &p);
                c.offsets(&mut off);
                prop_assert_eq!(&off, &o);
                // Impacts of the doc's block dominate it.
                prop_assert_eq!(c.shallow_advance(d) >= d, true);
                let imp = c.block_impacts().unwrap();
                let imp = &imp;
                prop_assert!(imp.as_slice().iter().any(|i| i.freq >= f && i.norm <= norms[d as usize]));
                prop_assert!(c.term_impacts().as_slice().iter().any(|i| i.freq >= f && i.norm <= norms[d as usize]));
                c.advance();
            }
            prop_assert_eq!(c.doc(), TERMINATED);
            prop_assert!(c.take_error().is_none());
        }
        }
    }

    #[test]
    fn seeks_with_sparse_positions(t in postings(5000), targets in proptest::collection::vec(0u32..5200, 1..60), every in 1usize..5) {
        let norms = vec![10u8; 5000];
        let (layout, codec) = KINDS[every % 4];
        let (_dir, files, infos) = write_terms(std::slice::from_ref(&t), &norms, layout, codec, Tier::Mmap);
        let docs = per_doc(&t);
        let mut targets = targets;
        targets.sort_unstable();
        let mut c = files.cursor(&infos[0]).unwrap();
        let mut pos = Vec::new();
        for (n, &target) in targets.iter().enumerate() {
            // Sometimes look ahead with the skip position first.
            if n % 3 == 0 {
                let last = c.shallow_advance(target + 300);
                let expect = docs.iter().position(|x| x.0 >= target + 300);
                prop_assert_eq!(last == TERMINATED, expect.is_none());
            }
            let got = c.seek(target);
            let want = docs.iter().find(|x| x.0 >= target.max(c.doc().min(target)));
            match docs.iter().find(|x| x.0 >= target) {
                None => prop_assert_eq!(got, TERMINATED),
                Some(w) => {
                    prop_assert_eq!(got, w.0);
                    if n % every == 0 {
                        prop_assert_eq!(c.freq(), w.1);
                        if n % 2 == 1 {
                            // A partial read first: up to the first
                            // position above the limit, then the whole.
                            let limit = target % 97;
                            pos.clear();
                            c.positions_while(|p| {
                                pos.push(p);
                                p <= limit
                            });
                            let upto = w.2.iter().position(|&p| p > limit).map_or(w.2.len(), |i| i + 1);
                            prop_assert_eq!(&pos[..], &w.2[..upto]);
                        }
                        c.positions(&mut pos);
                        prop_assert_eq!(&pos, &w.2);
                    }
                }
            }
            let _ = want;
        }
        prop_assert!(c.take_error().is_none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Seeks over long postings jump through the skip table's second level;
    /// every landing must equal a scan: document, frequency, positions,
    /// offsets and filters, with skip look-aheads between, then the rest by
    /// advancing.
    #[test]
    fn long_seeks_through_the_second_skip_level(t in long_postings(), gaps in proptest::collection::vec(1u32..20_000, 1..40), kind in 0usize..4) {
        let max_doc = t.docs.last().copied().unwrap() + 1;
        let norms: Vec<u8> = (0..max_doc).map(|d| (d * 7 % 251) as u8).collect();
        let (layout, codec) = KINDS[kind];
        let tier = [Tier::Mmap, Tier::Direct, Tier::Ram, Tier::Buffered][kind];
        let (_dir, files, infos) = write_terms(std::slice::from_ref(&t), &norms, layout, codec, tier);
        let docs = per_doc(&t);
        let fb = BloomParams::default().shape().unwrap().bytes as usize;
        let mut c = files.cursor(&infos[0]).unwrap();
        let (mut pos, mut off, mut filter) = (Vec::new(), Vec::new(), Vec::new());
        let mut target = 0u32;
        let mut at = 0usize;
        for (n, gap) in gaps.iter().enumerate() {
            target += gap;
            if n % 4 == 1 {
                let last = c.shallow_advance(target + 200);
                prop_assert_eq!(last == TERMINATED, !docs.iter().any(|x| x.0 >= target + 200));
            }
            let got = c.seek(target);
            match docs.iter().position(|x| x.0 >= target) {
                None => {
                    prop_assert_eq!(got, TERMINATED);
                    at = docs.len();
                    break;
                }
                Some(i) => {
                    let (d, f, p, o) = &docs[i];
                    prop_assert_eq!(got, *d);
                    prop_assert_eq!(c.freq(), *f);
                    c.positions(&mut pos);
                    prop_assert_eq!(&pos, p);
                    c.offsets(&mut off);
                    prop_assert_eq!(&off, o);
                    filter.clear();
                    prop_assert_eq!(c.copy_filter(Direction::After, &mut filter), !t.after.is_empty());
                    if !t.after.is_empty() {
                        prop_assert_eq!(&filter[..], &t.after[i * fb..(i + 1) * fb]);
                    }
                    let imp = c.block_impacts().unwrap();
                    prop_assert!(imp.as_slice().iter().any(|x| x.freq >= *f && x.norm <= norms[*d as usize]));
                    at = i;
                }
            }
        }
        // The rest, one by one.
        if at < docs.len() {
            for x in &docs[at..] {
                prop_assert_eq!(c.doc(), x.0);
                c.advance();
            }
        }
        prop_assert_eq!(c.advance(), TERMINATED);
        prop_assert!(c.take_error().is_none());
    }

    /// Runs a block at a time (`for_each_run_upto`, after a seek, in steps
    /// of `steps`) and unions into a bit set (dense blocks ORed in whole,
    /// sparse ones bit by bit, over words that already hold other bits)
    /// give the postings' documents and frequencies exactly.
    #[test]
    fn runs_and_unions_give_every_posting(t in long_postings(), start in 0u32..3000, steps in proptest::collection::vec(1u32..5000, 1..30), kind in 0usize..4) {
        let max_doc = t.docs.last().copied().unwrap() + 1;
        let norms: Vec<u8> = (0..max_doc).map(|d| (d * 7 % 251) as u8).collect();
        let (layout, codec) = KINDS[kind];
        let tier = [Tier::Ram, Tier::Mmap, Tier::Buffered, Tier::Direct][kind];
        let (_dir, files, infos) = write_terms(std::slice::from_ref(&t), &norms, layout, codec, tier);
        let want: Vec<(u32, u32)> = t.docs.iter().copied().zip(t.freqs.iter().copied()).filter(|&(d, _)| d >= start).collect();
        let mut c = files.cursor(&infos[0]).unwrap();
        c.seek(start);
        let mut got = Vec::new();
        let mut upto = start;
        for s in steps.iter().cycle().take(400) {
            upto = upto.saturating_add(*s);
            c.for_each_run_upto(upto, |docs, freqs| {
                assert!(!docs.is_empty() && docs.len() == freqs.len());
                got.extend(docs.iter().copied().zip(freqs.iter().copied()));
            });
            prop_assert!(c.doc() > upto);
            if c.doc() == TERMINATED {
                break;
            }
        }
        prop_assert_eq!(&got, &want);
        prop_assert!(c.take_error().is_none());

        let words_len = (max_doc as usize).div_ceil(64);
        let before: Vec<u64> = (0..words_len as u64).map(|w| w.wrapping_mul(0x9E37_79B9_7F4A_7C15) & 0x0101_0101_0101_0101).collect();
        let mut words = before.clone();
        let mut c = files.cursor(&infos[0]).unwrap();
        c.seek(start);
        c.union_into(&mut words);
        prop_assert!(c.take_error().is_none());
        let mut expect = before;
        for &(d, _) in &want {
            expect[(d / 64) as usize] |= 1 << (d % 64);
        }
        prop_assert_eq!(words, expect);
    }

    /// Intersecting two cursors (blocks merged, dense ones written out,
    /// seeks across blocks) reaches exactly the documents both hold, each
    /// with the right frequencies and positions, also after seeks of
    /// either cursor in between.
    #[test]
    fn intersections_reach_every_common_document(a in long_postings(), b in long_postings(), jumps in proptest::collection::vec((0u32..40, 1u32..3000), 1..20), kind in 0usize..4) {
        let max_doc = a.docs.last().max(b.docs.last()).copied().unwrap() + 1;
        let norms = vec![10u8; max_doc as usize];
        let (layout, codec) = KINDS[kind];
        let (_dir, files, infos) = write_terms(&[a.clone(), b.clone()], &norms, layout, codec, Tier::Mmap);
        let (pa, pb) = (per_doc(&a), per_doc(&b));
        let mut x = files.cursor(&infos[0]).unwrap();
        let mut y = files.cursor(&infos[1]).unwrap();
        let mut jumps = jumps.into_iter().cycle();
        let mut target = 0u32;
        let mut pos = Vec::new();
        let mut seen = 0;
        loop {
            let (every, gap) = jumps.next().unwrap();
            // Both seek to the target, now and then one of them further.
            let ahead = |k: u32| if every % 3 == k { target.saturating_add(gap / 2) } else { target };
            x.seek(ahead(0));
            y.seek(ahead(1));
            let from = x.doc().max(y.doc());
            let got = x.intersect(&mut y);
            let want = pa.iter().find(|p| p.0 >= from && pb.binary_search_by_key(&p.0, |q| q.0).is_ok());
            let Some(w) = want else {
                prop_assert_eq!(got, TERMINATED);
                break;
            };
            prop_assert_eq!(got, w.0);
            prop_assert_eq!(y.doc(), w.0);
            let v = &pb[pb.binary_search_by_key(&w.0, |q| q.0).unwrap()];
            if every % 2 == 0 {
                prop_assert_eq!(x.freq(), w.1);
                x.positions(&mut pos);
                prop_assert_eq!(&pos, &w.2);
                y.positions(&mut pos);
                prop_assert_eq!(&pos, &v.2);
            }
            seen += 1;
            target = got + if every < 30 { 1 } else { gap };
            if seen > 3000 {
                break;
            }
        }
        prop_assert!(x.take_error().is_none() && y.take_error().is_none());
    }
}

#[test]
fn long_postings_have_a_second_skip_level() {
    // 200 blocks: six second-level records, so seeks can jump.
    let docs: Vec<u32> = (0..200 * 128).map(|d| d * 3).collect();
    let freqs = vec![1; docs.len()];
    let t = with_payload(docs, freqs, 3);
    let norms = vec![10u8; 200 * 128 * 3];
    let (_dir, files, infos) = write_terms(std::slice::from_ref(&t), &norms, Layout::Grouped, Codec::Compressed, Tier::Ram);
    let mut c = files.cursor(&infos[0]).unwrap();
    let target = 190 * 128 * 3 + 1;
    assert_eq!(c.seek(target), target + 2);
    // Landed past the last span boundary before the target, not parsed
    // entry by entry from the start.
    assert_eq!(c.skip_entries_from(), 160 - 1);
    assert_eq!(c.freq(), 1);
    assert_eq!(c.advance(), target + 5);
    assert!(c.take_error().is_none());
}

#[test]
fn damaged_blocks_stop_the_cursor_with_an_error() {
    let mut t = TermPostings::default();
    for d in 0..1000u32 {
        t.docs.push(d * 3);
        t.freqs.push(1);
        t.positions.push(d % 7);
        t.starts.push(0);
        t.ends.push(4);
    }
    let norms = vec![5u8; 3000];
    for (layout, codec) in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let format = Format::plain(layout, codec);
        let mut w = PostingsWriter::create(dir.path(), "s", format).unwrap();
        w.add(b"t", &t, &norms).unwrap();
        w.finish().unwrap();
        // Corrupt a doc block but rewrite the file so its checksums are
        // valid: the cursor's own structural checks must notice.
        let ext = if layout == Layout::Grouped { "pst" } else { "doc" };
        let path = dir.path().join(format!("s.{ext}"));
        let f = IndexFile::open(&path, Tier::Ram).unwrap();
        let mut bytes = f.all().unwrap().to_vec();
        drop(f);
        let files = PostingsFiles::open(format, |e| {
            IndexFile::open(dir.path().join(format!("s.{e}")), Tier::Ram)
        })
        .unwrap();
        let info = files.term_info(b"t").unwrap().unwrap();
        drop(files);
        let zone_end = info.doc_offset as usize + info.region.zone_len as usize;
        // Direct blocks end with raw frequencies (any value is valid there;
        // only checksums catch it): damage the last block's doc ids instead.
        let at = match codec {
            Codec::Compressed => zone_end - 100,
            Codec::Direct => zone_end - 8 * (1000 % 128) + 10,
        };
        bytes[at] ^= 0xff;
        let mut w = FileWriter::create(&path).unwrap();
        w.write_all(&bytes).unwrap();
        w.finish().unwrap();
        let files = PostingsFiles::open(format, |e| {
            IndexFile::open(dir.path().join(format!("s.{e}")), Tier::Mmap)
        })
        .unwrap();
        let mut c = files.cursor(&info).unwrap();
        let mut n = 0;
        while c.doc() != TERMINATED && n < 2000 {
            c.freq();
            c.advance();
            n += 1;
        }
        assert!(n < 1000, "{layout:?}/{codec:?}: damage went unnoticed");
        assert!(c.take_error().unwrap().to_string().contains("corrupt"));
    }
}

#[test]
fn grouped_regions_follow_the_term_then_the_field() {
    let t = TermPostings {
        docs: vec![0, 5],
        freqs: vec![1, 1],
        positions: vec![0, 2],
        starts: vec![0, 3],
        ends: vec![1, 4],
        ..Default::default()
    };
    let norms = vec![1u8; 8];
    let mut keys: Vec<&[u8]> = vec![b"\x00b", b"\x01a", b"\x00a", b"\x01b"];
    for layout in [Layout::Grouped, Layout::Split] {
        keys.sort_by(|a, b| layout.term_order(a, b));
        let dir = tempfile::tempdir().unwrap();
        let format = Format::plain(layout, Codec::Compressed);
        let mut w = PostingsWriter::create(dir.path(), "s", format).unwrap();
        for k in &keys {
            w.add(k, &t, &norms).unwrap();
        }
        w.finish().unwrap();
        let storage = Storage::new(TierOptions::on(Tier::Ram)).unwrap();
        let files = PostingsFiles::open(format, |e| storage.open(dir.path().join(format!("s.{e}")))).unwrap();
        let offsets: Vec<u64> = keys
            .iter()
            .map(|k| files.term_info(k).unwrap().unwrap().doc_offset)
            .collect();
        assert!(offsets.windows(2).all(|w| w[0] < w[1]), "{layout:?}: {offsets:?}");
        let want: Vec<&[u8]> = match layout {
            Layout::Grouped => vec![b"\x00a", b"\x01a", b"\x00b", b"\x01b"],
            Layout::Split => vec![b"\x00a", b"\x00b", b"\x01a", b"\x01b"],
        };
        assert_eq!(keys, want);
        assert_eq!(files.doc_freq(b"\x01b").unwrap(), 2);
    }
}
