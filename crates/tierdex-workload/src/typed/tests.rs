use serde_json::Value;
use tierdex::corpus::gen::{GenOptions, Generator};

use super::*;

/// A typed corpus of `n` short documents as JSON lines.
fn corpus(n: u64) -> Vec<String> {
    let g = Generator::new(GenOptions {
        docs: n,
        seed: 5,
        vocab_size: 2000,
        median_body_tokens: 3.0,
        typed: true,
        ..GenOptions::default()
    });
    g.docs().map(|d| serde_json::to_string(&d).unwrap()).collect()
}

fn sample(lines: &[String]) -> TypedSample {
    let mut s = TypedSample::new();
    for l in lines {
        assert!(s.push_json(l).unwrap());
    }
    s
}

/// The protocol's meaning of a `term`, `terms` or `range` filter on a
/// record, evaluated from the JSON alone (independently of `Filter`).
fn json_matches(filter: &Value, doc: &Value) -> bool {
    let (kind, body) = filter.as_object().unwrap().iter().next().unwrap();
    let (field, arg) = body.as_object().unwrap().iter().next().unwrap();
    let values: Vec<&Value> = match &doc[field] {
        Value::Null => vec![],
        Value::Array(a) => a.iter().collect(),
        v => vec![v],
    };
    let num = |v: &Value| -> f64 {
        match v {
            Value::String(s) => parse_date(s).unwrap() as f64,
            v => v.as_f64().unwrap(),
        }
    };
    match kind.as_str() {
        "term" => values.contains(&arg),
        "terms" => values.iter().any(|v| arg.as_array().unwrap().contains(v)),
        "range" => values.iter().any(|v| {
            let x = num(v);
            arg.get("gte").is_none_or(|b| x >= num(b)) && arg.get("lt").is_none_or(|b| x < num(b))
        }),
        other => panic!("{other}"),
    }
}

#[test]
fn filters_have_the_selectivity_they_claim() {
    let lines = corpus(20_000);
    let docs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    let s = sample(&lines);
    let mut rng = Pcg64::seed_from_u64(1);
    let mut made = 0;
    for (target, level) in FILTER_LEVELS {
        let candidates = [
            ("price", s.range_filter(NumField::Price, target, &mut rng)),
            ("date", s.range_filter(NumField::Date, target, &mut rng)),
            ("popularity", s.range_filter(NumField::Popularity, target, &mut rng)),
            ("category", s.keyword_filter(KwField::Category, target, &mut rng)),
            ("tags", s.keyword_filter(KwField::Tags, target, &mut rng)),
        ];
        for (name, f) in candidates {
            let Some(f) = f else {
                eprintln!("{level} {name}: none");
                continue;
            };
            made += 1;
            let claimed = s.selectivity(&f);
            let k = (target * 20_000.0).round() as usize;
            let got = (claimed * 20_000.0).round() as usize;
            assert!(within(got.abs_diff(k), k), "{level} {name}: {claimed} for {target}");
            // The JSON the engines get means the same.
            let json = f.to_json(&s);
            let by_json = docs.iter().filter(|d| json_matches(&json, d)).count();
            assert_eq!(by_json, got, "{level} {name}: {json}");
            eprintln!("{level} {name}: {claimed:.4} {json}");
        }
    }
    // Price and date ranges reach every level; keywords most.
    assert!(made >= 16, "{made} filters");
    for (target, _) in FILTER_LEVELS {
        for kind in 0..5 {
            assert!(s.filter(target, kind, &mut rng).is_some());
        }
    }
}

#[test]
fn ties_and_missing_values_are_measured_not_assumed() {
    // Half the documents have no price; the others share 3 values.
    let mut s = TypedSample::new();
    for i in 0..1000 {
        let price = if i % 2 == 0 {
            Value::Null
        } else {
            json!([1.0, 2.0, 3.0][i % 3])
        };
        s.push_json(&json!({"id": i.to_string(), "price": price}).to_string())
            .unwrap();
    }
    let mut rng = Pcg64::seed_from_u64(2);
    // 1/6 of the documents have each price: 10% or 1% cannot be reached.
    assert_eq!(s.range_filter(NumField::Price, 0.01, &mut rng), None);
    assert_eq!(s.range_filter(NumField::Price, 0.1, &mut rng), None);
    let f = s.range_filter(NumField::Price, 1.0 / 6.0, &mut rng).unwrap();
    assert!((s.selectivity(&f) - 1.0 / 6.0).abs() < 0.01);
    // More than the documents with a price: impossible.
    assert_eq!(s.range_filter(NumField::Price, 0.6, &mut rng), None);
    assert_eq!(s.keyword_filter(KwField::Tags, 0.1, &mut rng), None);
}

#[test]
fn workload_covers_every_category() {
    let lines = corpus(5_000);
    let s = sample(&lines);
    let texts = TextPools {
        term: vec!["alpha".into(), "beta".into()],
        and: vec!["+alpha +beta".into()],
        or: vec!["alpha beta".into()],
        words: Vec::new(),
    };
    let qs = generate(&s, &texts, 6, 9);
    let again = generate(&s, &texts, 6, 9);
    assert_eq!(
        qs.iter().map(|q| &q.json).collect::<Vec<_>>(),
        again.iter().map(|q| &q.json).collect::<Vec<_>>()
    );
    for c in categories() {
        if c.ends_with("-text") && c.starts_with("agg-") {
            // No watched words in this sample: see `aggregation_categories`.
            assert!(qs.iter().all(|q| q.category != c), "{c}");
            continue;
        }
        let of: Vec<&TypedQuery> = qs.iter().filter(|q| q.category == c).collect();
        assert!(of.len() >= 5, "{c}: {} queries", of.len());
        for q in of {
            let v: Value = serde_json::from_str(&q.json).unwrap();
            assert!(v["query"].is_object(), "{}", q.json);
            if let Some((target, _)) = FILTER_LEVELS
                .iter()
                .find(|(_, l)| c.starts_with(&format!("filter-{l}-")))
            {
                let sel = q.selectivity.unwrap();
                assert!(
                    within(
                        ((sel - target) * 5000.0).abs().round() as usize,
                        (target * 5000.0) as usize
                    ),
                    "{c}: {sel}"
                );
                assert_eq!(q.modes, FILTER_MODES);
                assert!(v["query"]["bool"]["must"][0]["query_string"]["query"].is_string());
            } else if c.contains("sort") {
                assert_eq!(q.modes, SORT_MODES);
                assert!(v["sort"].is_array(), "{}", q.json);
                assert_eq!(
                    c.starts_with("text-"),
                    v["query"]["query_string"].is_object(),
                    "{}",
                    q.json
                );
            } else if c.starts_with("agg-") {
                assert_eq!(q.modes, AGG_MODES);
                assert_eq!(v["query"], json!({"match_all": {}}));
                assert_eq!(q.selectivity, Some(1.0));
                assert_eq!(v["aggs"], agg_body(&c).unwrap());
            } else {
                assert_eq!(q.modes, RANGE_MODES);
                assert!(v["query"]["range"].is_object());
            }
        }
    }
    // Nothing without typed values, or without text for the text categories.
    let plain = TypedSample::read(std::io::Cursor::new("{\"id\":\"a\",\"title\":\"x\"}\n"), 1).unwrap();
    assert!(!plain.has_typed() && generate(&plain, &texts, 3, 1).is_empty());
    let no_text = generate(&s, &TextPools::default(), 3, 1);
    assert!(no_text.iter().all(|q| q.category.starts_with("sort-")
        || q.category.starts_with("range-")
        || (q.category.starts_with("agg-") && q.category.ends_with("-all"))));
    assert!(!no_text.is_empty());
}

#[test]
fn samples_every_nth_record() {
    let lines = corpus(100);
    let text = lines.join("\n") + "\n\n";
    let s = TypedSample::read(std::io::Cursor::new(text), 10).unwrap();
    assert_eq!(s.docs.len(), 10);
    // The second sampled record is record 10 (keywords compared as text:
    // the dictionaries differ).
    let one = sample(&lines[10..11]);
    let (a, b) = (&s.docs[1], &one.docs[0]);
    assert_eq!((a.date, a.price, a.popularity), (b.date, b.price, b.popularity));
    let words = |s: &TypedSample, ids: &[u32]| ids.iter().map(|&i| s.keyword(i).to_string()).collect::<Vec<_>>();
    assert_eq!(words(&s, &a.tags), words(&one, &b.tags));
    assert_eq!(words(&s, &a.category), words(&one, &b.category));
}

#[test]
fn dates() {
    for (s, ms) in [
        ("1970-01-01", 0),
        ("2011-03-14T15:09:26Z", 1_300_115_366_000),
        ("2011-03-14T17:39:26.25+02:30", 1_300_115_366_250),
        ("2000-02-29T00:00:00", 951_782_400_000),
        ("1969-12-31T23:59:59.999Z", -1),
    ] {
        assert_eq!(parse_date(s), Some(ms), "{s}");
    }
    for bad in ["2001-02-29", "2011-03-14T15:09", "2011-03-14T15:09:26+0230", "x"] {
        assert_eq!(parse_date(bad), None, "{bad}");
    }
    for ms in [0, -1, 1_300_115_366_000, 1_300_115_366_250, 1_735_689_599_999] {
        assert_eq!(parse_date(&format_date(ms)), Some(ms));
    }
    assert_eq!(format_date(1_300_115_366_000), "2011-03-14T15:09:26Z");
}

/// Whether `text` (an OR of words) matches record `doc`, from the JSON alone.
fn text_matches(text: &str, doc: &Value) -> bool {
    let words: Vec<String> = ["title", "body"]
        .iter()
        .filter_map(|f| doc[*f].as_str())
        .flat_map(|t| t.split(|c: char| !c.is_alphanumeric()).map(str::to_lowercase))
        .collect();
    text.split(' ').any(|w| words.iter().any(|x| x == w))
}

#[test]
fn aggregation_categories() {
    let lines = corpus(4_000);
    let docs: Vec<Value> = lines.iter().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Candidate words: every word of the first documents.
    let mut words: Vec<String> = docs[..50]
        .iter()
        .flat_map(|d| {
            d["body"]
                .as_str()
                .unwrap_or("")
                .split(' ')
                .map(str::to_lowercase)
                .collect::<Vec<_>>()
        })
        .filter(|w| !w.is_empty() && w.chars().all(char::is_alphanumeric))
        .collect();
    words.sort_unstable();
    words.dedup();
    let s = TypedSample::read_watching(std::io::Cursor::new(lines.join("\n")), 1, &words).unwrap();
    assert_eq!(s.docs.len(), docs.len());
    let texts = TextPools {
        words,
        ..TextPools::default()
    };
    let qs = generate(&s, &texts, 4, 3);
    for c in AGG_CATEGORIES {
        let of: Vec<&TypedQuery> = qs.iter().filter(|q| q.category == c).collect();
        assert_eq!(of.len(), 4, "{c}");
        for q in of {
            let v: Value = serde_json::from_str(&q.json).unwrap();
            assert_eq!(v["aggs"], agg_body(c).unwrap());
            assert_eq!(q.modes, AGG_MODES);
            if c.ends_with("-all") {
                assert_eq!(v["query"], json!({"match_all": {}}));
                continue;
            }
            let text = v["query"]["query_string"]["query"].as_str().unwrap();
            let matched = docs.iter().filter(|d| text_matches(text, d)).count();
            let claimed = q.selectivity.unwrap();
            assert_eq!(matched as f64 / docs.len() as f64, claimed, "{text}");
            assert!(
                within(matched.abs_diff(400), 400),
                "{c}: `{text}` matches {matched} of 4000"
            );
        }
    }
    assert_eq!(
        agg_body("agg-stats-text").unwrap()["price_stats"]["stats"]["field"],
        "price"
    );
    assert!(agg_body("range-price").is_none());
}
