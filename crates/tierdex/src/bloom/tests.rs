//! Filter arithmetic and the group format.

use std::path::Path;

use proptest::prelude::*;

use super::*;

fn shape() -> FilterShape {
    BloomParams::default().shape().unwrap()
}

#[test]
fn default_parameters_give_three_bytes_and_eight_hashes() {
    let s = shape();
    assert_eq!((s.bytes, s.hashes), (3, 8));
    let fpr = BloomParams::expected_fpr(s, 2);
    assert!((0.002..0.004).contains(&fpr), "{fpr}");
}

#[test]
fn bad_parameters_are_refused() {
    let p = |expected, fpr| BloomParams {
        expected,
        fpr,
        ..BloomParams::default()
    };
    for p in [
        p(0, 0.01),
        p(5, 0.0),
        p(5, 0.7),
        p(5, f64::NAN),
        p(1024, 1e-300),
        BloomParams {
            max_doc_share: 0.0,
            ..BloomParams::default()
        },
        BloomParams {
            max_doc_share: 1.5,
            ..BloomParams::default()
        },
        BloomParams {
            max_doc_share: f64::NAN,
            ..BloomParams::default()
        },
    ] {
        assert!(p.shape().is_err(), "{p:?}");
    }
}

#[test]
fn the_document_ceiling_is_a_share_with_a_floor() {
    let b = BloomParams::default();
    assert_eq!(b.doc_ceiling(0), 128);
    assert_eq!(b.doc_ceiling(6400), 128);
    assert_eq!(b.doc_ceiling(180_131), 2815);
    let every = BloomParams {
        max_doc_share: 1.0,
        ..b
    };
    assert_eq!(every.doc_ceiling(10), u64::MAX);
    // Manifests written before the setting existed give every term filters.
    let old: BloomParams = serde_json::from_str(r#"{"expected": 5, "fpr": 0.0009}"#).unwrap();
    assert_eq!(old.max_doc_share, 1.0);
    assert_eq!(old.doc_ceiling(1 << 30), u64::MAX);
    assert_eq!(serde_json::to_string(&old).unwrap(), r#"{"expected":5,"fpr":0.0009}"#);
    for p in [b, every, BloomParams { min_doc_ceiling: 7, ..b }] {
        let back: BloomParams = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
    }
}

#[test]
fn measured_false_positive_rate_matches_the_target() {
    let s = shape();
    let mut f = vec![0u8; s.bytes as usize];
    // Many filters of 2 members each, probed with non-members.
    let (mut positives, mut probes) = (0u64, 0u64);
    for filter in 0..4000u32 {
        f.fill(0);
        for j in 0..2u32 {
            insert(&mut f, &Probe::new(s, format!("m{filter}-{j}").as_bytes()));
        }
        for j in 0..50u32 {
            probes += 1;
            positives += u64::from(may_contain(&f, &Probe::new(s, format!("x{filter}-{j}").as_bytes())));
        }
    }
    let rate = positives as f64 / probes as f64;
    // Theory for 24 bits, 8 probes, 2 members: 0.0032; a filter this small
    // runs above it (a probe's 8 positions among 24 often repeat): 0.0045.
    assert!((0.002..0.006).contains(&rate), "false-positive rate {rate} over {probes} probes");
}

/// The group encoding as the format defines it, in two plain passes.
fn encode_group_reference(fb: usize, filters: &[u8]) -> Vec<u8> {
    let mut bitmap = 0u128;
    let mut packed = Vec::new();
    for (slot, f) in filters.chunks_exact(fb).enumerate() {
        if f.iter().any(|&b| b != 0) {
            bitmap |= 1 << slot;
            packed.extend_from_slice(f);
        }
    }
    let mut out = bitmap.to_le_bytes().to_vec();
    out.extend_from_slice(&packed);
    out
}

proptest! {
    #[test]
    fn groups_encode_byte_for_byte_as_the_format_defines(
        fb in 1u16..=12,
        slots in 0usize..=128,
        seed in any::<u64>(),
        empty_share in 0u32..=4,
    ) {
        // splitmix64: the filters' bytes from the seed.
        let mut state = seed;
        let mut next = move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let mut filters = vec![0u8; slots * fb as usize];
        for f in filters.chunks_exact_mut(fb as usize) {
            if (next() % 4) as u32 >= empty_share {
                // Not empty: one set byte anywhere, or random bytes.
                let i = (next() % f.len() as u64) as usize;
                f[i] = 1 + (next() % 255) as u8;
                if next() % 2 == 0 {
                    for b in f.iter_mut() {
                        *b = next() as u8;
                    }
                }
            }
        }
        let s = FilterShape { bytes: fb, hashes: 1 };
        let mut out = vec![7, 7];
        let n = encode_group(s, &filters, &mut out);
        prop_assert_eq!(&out[..2], &[7, 7]);
        prop_assert_eq!(n, out.len() - 2);
        prop_assert_eq!(&out[2..], &encode_group_reference(fb as usize, &filters)[..]);
    }
}

proptest! {
    #[test]
    fn members_always_test_positive_and_groups_round_trip(
        members in proptest::collection::vec(proptest::collection::vec(any::<u16>(), 0..8), 1..=128),
        expected in 1u32..12,
        fpr in 0.0001f64..0.2,
    ) {
        let s = BloomParams { expected, fpr, ..BloomParams::default() }.shape().unwrap();
        let fb = s.bytes as usize;
        let mut filters = vec![0u8; members.len() * fb];
        for (slot, m) in members.iter().enumerate() {
            for t in m {
                insert(&mut filters[slot * fb..(slot + 1) * fb], &Probe::new(s, &t.to_le_bytes()));
            }
        }
        let mut out = vec![0xAB];
        let n = encode_group(s, &filters, &mut out);
        out.extend_from_slice(&[1, 2, 3]);
        let non_empty = members.iter().filter(|m| !m.is_empty()).count();
        prop_assert_eq!(n, BITMAP_BYTES + non_empty * fb);
        let (g, len) = Group::parse(s, &out[1..], Path::new("x")).unwrap();
        prop_assert_eq!(len, n);
        for (slot, m) in members.iter().enumerate() {
            prop_assert_eq!(g.is_empty(slot), m.is_empty());
            for t in m {
                prop_assert!(g.may_contain(slot, &Probe::new(s, &t.to_le_bytes())));
            }
            if m.is_empty() {
                prop_assert!(!g.may_contain(slot, &Probe::new(s, b"anything")));
            }
        }
        // Every truncation is reported, never a panic.
        for cut in 0..n {
            prop_assert!(Group::parse(s, &out[1..1 + cut], Path::new("x")).is_err());
        }
    }
}

#[test]
fn a_probe_is_its_seed() {
    let s = shape();
    assert_eq!(Probe::new(s, b"\x01york"), Probe::from_seed(s, seed(b"\x01york")));
}

#[test]
fn only_body_terms_that_are_not_stop_words_are_filtered() {
    let body = crate::schema::Field::BODY.id();
    let title = crate::schema::Field::TITLE.id();
    let fields = crate::common::FieldSet::of([body]);
    assert!(filtered_term(&fields, &[&[body][..], b"york"].concat()));
    assert!(!filtered_term(&fields, &[&[body][..], b"the"].concat()));
    assert!(!filtered_term(&fields, &[&[title][..], b"york"].concat()));
    assert!(!filtered_term(&fields, b""));
}

#[test]
fn visits_cost_at_least_a_page_and_at_most_the_section() {
    assert_eq!(visit_cost(0, 10, 5), 0.0);
    // A small section: one visit reads no more than its page.
    assert_eq!(visit_cost(1_000, 10, 1), 4096.0);
    // A 1 MB section of 1,000 documents: one visit reads its 1 KB and a page.
    assert_eq!(visit_cost(1 << 20, 1_000, 1), 1048.576 + 4096.0);
    // Visiting more never costs less, and never more than the whole section.
    let mut last = 0.0;
    for k in [1, 10, 100, 1_000, 10_000] {
        let c = visit_cost(1 << 20, 1_000, k);
        assert!(c >= last && c <= (1 << 20) as f64, "{k}: {c}");
        last = c;
    }
}

fn cost(df: u32, pos_len: u64, filters: bool) -> TermCost {
    TermCost {
        doc_freq: df,
        zone_len: df as u64 * 2,
        pos_len,
        after_len: if filters { df as u64 * 10 } else { 0 },
        before_len: if filters { df as u64 * 10 } else { 0 },
    }
}

#[test]
fn a_rare_term_next_to_a_popular_one_tests_the_rare_terms_filter() {
    let rare = cost(100, 300, true);
    let popular = cost(50_000, 40 << 20, true);
    assert_eq!(choose(&rare, &popular, 100, None), Some((0, Direction::After)));
    assert_eq!(choose(&popular, &rare, 100, Some(1)), Some((1, Direction::Before)));
}

#[test]
fn filters_dearer_than_a_tenth_of_the_positions_are_not_used() {
    // Both terms rare and in one page of positions each: reading a filter
    // page would cost half of what it could save.
    let a = cost(20, 200, true);
    let b = cost(30, 300, true);
    assert_eq!(choose(&a, &b, 20, Some(0)), None);
    // Unless asked to use the cheaper filter whatever it costs.
    assert_eq!(
        choose_with(&a, &b, 20, Some(0), f64::INFINITY),
        Some((0, Direction::After))
    );
    // Terms without filters never get a test.
    let (c, d) = (cost(100, 300, false), cost(50_000, 40 << 20, false));
    assert_eq!(choose_with(&c, &d, 100, Some(0), f64::INFINITY), None);
}

#[test]
fn a_lead_filter_also_saves_the_other_terms_seeks() {
    // Positions alone (one page each) do not pay for a filter page...
    let rare = cost(100, 300, true);
    let mut popular = cost(50_000, 4_000, true);
    assert_eq!(choose(&rare, &popular, 100, None), None);
    // ...but the popular term's doc blocks the rare lead's filter spares do.
    popular.zone_len = 20 << 20;
    assert_eq!(choose(&rare, &popular, 100, Some(0)), Some((0, Direction::After)));
}

#[test]
fn group_filters_are_found_by_slot() {
    let s = shape();
    let fb = s.bytes as usize;
    let mut filters = vec![0u8; 3 * fb];
    filters[fb..2 * fb].fill(7);
    let mut out = Vec::new();
    encode_group(s, &filters, &mut out);
    let (g, len) = Group::parse(s, &out, Path::new("x")).unwrap();
    assert_eq!(len, out.len());
    assert_eq!(g.filter(0), None);
    assert_eq!(g.filter(1), Some(&filters[fb..2 * fb]));
    assert_eq!(g.filter(2), None);
}
