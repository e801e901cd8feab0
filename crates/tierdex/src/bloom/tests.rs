//! Filter arithmetic and the group format.

use std::path::Path;

use proptest::prelude::*;

use super::*;

fn shape() -> FilterShape {
    BloomParams::default().shape().unwrap()
}

#[test]
fn default_parameters_give_nine_bytes_and_ten_hashes() {
    let s = shape();
    assert_eq!((s.bytes, s.hashes), (9, 10));
    let fpr = BloomParams::expected_fpr(s, 5);
    assert!((0.0005..0.0015).contains(&fpr), "{fpr}");
}

#[test]
fn bad_parameters_are_refused() {
    for p in [
        BloomParams { expected: 0, fpr: 0.01 },
        BloomParams { expected: 5, fpr: 0.0 },
        BloomParams { expected: 5, fpr: 0.7 },
        BloomParams {
            expected: 5,
            fpr: f64::NAN,
        },
        BloomParams {
            expected: 1024,
            fpr: 1e-300,
        },
    ] {
        assert!(p.shape().is_err(), "{p:?}");
    }
}

#[test]
fn measured_false_positive_rate_matches_the_target() {
    let s = shape();
    let mut f = vec![0u8; s.bytes as usize];
    // Many filters of 5 members each, probed with non-members.
    let (mut positives, mut probes) = (0u64, 0u64);
    for filter in 0..4000u32 {
        f.fill(0);
        for j in 0..5u32 {
            insert(&mut f, &Probe::new(s, format!("m{filter}-{j}").as_bytes()));
        }
        for j in 0..50u32 {
            probes += 1;
            positives += u64::from(may_contain(&f, &Probe::new(s, format!("x{filter}-{j}").as_bytes())));
        }
    }
    let rate = positives as f64 / probes as f64;
    // Theory for 72 bits, 10 probes, 5 members: 0.00098.
    assert!(rate < 0.0016, "false-positive rate {rate} over {probes} probes");
}

proptest! {
    #[test]
    fn members_always_test_positive_and_groups_round_trip(
        members in proptest::collection::vec(proptest::collection::vec(any::<u16>(), 0..8), 1..=128),
        expected in 1u32..12,
        fpr in 0.0001f64..0.2,
    ) {
        let s = BloomParams { expected, fpr }.shape().unwrap();
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
