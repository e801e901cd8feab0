//! The brute-force query oracle.
//!
//! An independent reference evaluator: it shares no code with the engine's
//! index, postings or scorers. Documents are analysed once (with the crate's
//! public [`Analyzer`], an input transformation) into per-field token lists;
//! every query is then answered by scanning those lists document by document.
//!
//! Semantics are those of the module doc of `tierdex::query::ast` (Lucene's
//! classic query parser with `MultiFieldQueryParser` over `title` and `body`),
//! scored with Lucene 10's `BM25Similarity` (k1 = 1.2, b = 0.75) per field,
//! including Lucene's lossy one-byte length norms. Decisions where the spec is
//! silent are listed in [`SEMANTICS`]. Everything is computed in `f64`.

use std::collections::HashMap;

use tierdex::analysis::Analyzer;
use tierdex::query::ast::{MinimumShouldMatch, Occur, Query};
use tierdex::search::Mode;
use tierdex::{Document, Field};

/// BM25 term-frequency saturation.
pub const K1: f64 = 1.2;
/// BM25 length-normalisation strength.
pub const B: f64 = 0.75;

/// The decisions this oracle takes where `ast.rs` and DESIGN §2 are silent
/// (kept here so that a failing comparison can point at them).
pub const SEMANTICS: &str = "\
1. Dropping is recursive: a Term/Phrase analysing to no token is dropped; a Boolean whose \
clauses are all dropped (or that has no clauses) is itself dropped from its parent; a dropped \
top-level query matches nothing. A Boolean that keeps only MUST_NOT clauses is NOT dropped: \
it matches nothing (so as a MUST clause it makes its parent match nothing).
2. A Term analysing to several tokens is a SHOULD disjunction with one clause per token, \
duplicates included (`x.x` analysing to [x, x] scores twice the single term).
3. An unqualified Term/Phrase is the SHOULD disjunction of its title and body forms; the \
score is the sum over fields (a phrase matches within one field).
4. A Phrase analysing to one token is that term query; its relative positions are token \
positions minus the first token's position (stop-word gaps kept); its idf is the sum of \
the per-field idfs of its tokens, duplicates included; its frequency is the number of \
distinct start positions where every token sits at its relative position.
5. docCount(f) counts documents with at least one token in f; dl is the number of tokens \
in f (stop words removed are not counted), quantised with Lucene's SmallFloat.intToByte4 \
(exact up to 39); avgdl = (f32)(sumTTF / docCount).
6. Results rank by score descending, then document number ascending; document numbers are \
input order. Count mode returns no hits.
7. FILTER clauses are required and add nothing to the score.
8. MinShouldMatch over a Boolean: m is Elasticsearch's calculateMinShouldMatch (Java int and \
float arithmetic, floored at 0) of the number of SHOULD clauses as written (dropped ones \
included). m = 0 leaves the Boolean as it is; otherwise a document must match at least m of \
the SHOULD clauses kept (none when m exceeds them), besides the MUST and FILTER ones. Over a \
Term of two or more tokens, the tokens (each over the term's fields) are the SHOULD clauses; \
over anything else the minimum is ignored.";

// ---------------------------------------------------------------------------
// Lucene's one-byte length norm (SmallFloat.intToByte4 / byte4ToInt)
// ---------------------------------------------------------------------------

/// Float-like encoding of a non-negative integer keeping 4 significant bits:
/// values below 8 are stored as is ("subnormal"), larger ones as a 3-bit
/// mantissa (the leading 1 is implicit) and the shift plus one.
fn long_to_int4(i: u64) -> u32 {
    let num_bits = 64 - i.leading_zeros();
    if num_bits < 4 {
        i as u32
    } else {
        let shift = num_bits - 4;
        let mantissa = ((i >> shift) & 0x07) as u32;
        mantissa | ((shift + 1) << 3)
    }
}

/// Inverse of [`long_to_int4`] (rounds down to the representable value).
fn int4_to_long(i: u32) -> u64 {
    let mantissa = u64::from(i & 0x07);
    match (i >> 3).checked_sub(1) {
        None => mantissa,
        Some(shift) => (mantissa | 0x08) << shift,
    }
}

/// Byte values below this encode themselves: `255 - long_to_int4(i32::MAX)`,
/// i.e. 24.
fn num_free_values() -> u32 {
    255 - long_to_int4(i32::MAX as u64)
}

/// Lucene's `SmallFloat.intToByte4`: the norm byte stored for a field length.
pub fn int_to_byte4(len: u32) -> u8 {
    assert!(len <= i32::MAX as u32, "Lucene lengths are Java ints");
    let free = num_free_values();
    if len < free {
        len as u8
    } else {
        (free + long_to_int4(u64::from(len - free))) as u8
    }
}

/// Lucene's `SmallFloat.byte4ToInt`: the field length a norm byte stands for.
pub fn byte4_to_int(byte: u8) -> u32 {
    let free = num_free_values();
    let b = u32::from(byte);
    if b < free {
        b
    } else {
        (u64::from(free) + int4_to_long(b - free)) as u32
    }
}

/// The field length BM25 sees for a field of `len` tokens.
pub fn quantised_length(len: u32) -> u32 {
    byte4_to_int(int_to_byte4(len))
}

/// BM25 idf of a term found in `df` of the `doc_count` documents with the field.
pub fn idf(df: u64, doc_count: u64) -> f64 {
    let (df, n) = (df as f64, doc_count as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25 score of one clause: weight `idf`, frequency `freq`, field length
/// `len` (raw token count; quantised here) and average length `avgdl`.
pub fn bm25(idf: f64, freq: u32, len: u32, avgdl: f64) -> f64 {
    let f = f64::from(freq);
    let dl = f64::from(quantised_length(len));
    idf * f / (f + K1 * (1.0 - B + B * dl / avgdl))
}

// ---------------------------------------------------------------------------
// Analysed corpus
// ---------------------------------------------------------------------------

/// One token of an analysed field: interned term and position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tok {
    term: u32,
    position: u32,
}

/// One field over the whole corpus.
#[derive(Debug, Default)]
struct FieldData {
    /// Per document, its tokens in position order.
    docs: Vec<Vec<Tok>>,
    /// Documents with at least one token.
    doc_count: u64,
    /// Total tokens over all documents.
    sum_ttf: u64,
    /// `(f32)(sum_ttf / doc_count)`, as Lucene computes it.
    avgdl: f64,
    /// Document frequency per interned term.
    df: HashMap<u32, u64>,
}

/// The analysed corpus the oracle scans.
#[derive(Debug)]
pub struct OracleIndex {
    analyzer: Analyzer,
    num_docs: usize,
    terms: HashMap<String, u32>,
    /// Per field id.
    fields: Vec<FieldData>,
    /// The fields an unqualified clause searches.
    default_fields: Vec<Field>,
}

/// The oracle's answer to one query.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleResult {
    /// The mode asked for.
    pub mode: Mode,
    /// The k asked for.
    pub k: usize,
    /// Number of matching documents, for the modes that report it.
    pub count: Option<u64>,
    /// The best `k` hits `(doc number, score)`, best first (none in Count mode).
    pub hits: Vec<(u32, f64)>,
    /// Every matching document, ranked (score descending, doc ascending).
    pub ranked: Vec<(u32, f64)>,
}

impl OracleResult {
    /// Builds the answer for `mode` and `k` from the full list of matches in
    /// any order.
    pub fn from_matches(mode: Mode, k: usize, mut ranked: Vec<(u32, f64)>) -> Self {
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let total = ranked.len() as u64;
        let (count, hits) = match mode {
            Mode::TopK => (None, ranked.iter().take(k).copied().collect()),
            Mode::TopKAndCount => (Some(total), ranked.iter().take(k).copied().collect()),
            Mode::Count => (Some(total), Vec::new()),
        };
        OracleResult {
            mode,
            k,
            count,
            hits,
            ranked,
        }
    }

    /// Number of matching documents (whatever the mode).
    pub fn total(&self) -> u64 {
        self.ranked.len() as u64
    }

    /// The score of `doc`, or `None` when it does not match.
    pub fn score_of(&self, doc: u32) -> Option<f64> {
        self.ranked.iter().find(|h| h.0 == doc).map(|h| h.1)
    }
}

/// A query after analysis, resolved against the corpus vocabulary.
#[derive(Debug, Clone)]
enum Node {
    /// A term (one token) or a phrase (several) in one field: `terms[i]` must
    /// sit at `start + offsets[i]`. `None` terms never occur in the corpus.
    Leaf {
        field: Field,
        terms: Vec<Option<u32>>,
        offsets: Vec<u32>,
        idf: f64,
    },
    /// A boolean query; at least one of the lists is non-empty. With `min`
    /// above 0, at least that many of `should` must match.
    Bool {
        must: Vec<Node>,
        filter: Vec<Node>,
        should: Vec<Node>,
        must_not: Vec<Node>,
        min: usize,
    },
}

impl OracleIndex {
    /// Analyses every document of `docs` with `analyzer`, as documents of
    /// the default fields `title` (id 0) and `body` (id 1), both searched
    /// by unqualified clauses. Document numbers are indexes into `docs`.
    pub fn new(docs: &[Document], analyzer: &Analyzer) -> Self {
        Self::with_fields(docs, analyzer, &["title", "body"], &[Field::TITLE, Field::BODY])
    }

    /// Analyses every document of `docs` with `analyzer`, field id `i`
    /// being the text of `names[i]`; unqualified clauses search
    /// `default_fields`.
    pub fn with_fields(docs: &[Document], analyzer: &Analyzer, names: &[&str], default_fields: &[Field]) -> Self {
        let mut terms: HashMap<String, u32> = HashMap::new();
        let mut fields: Vec<FieldData> = names.iter().map(|_| FieldData::default()).collect();
        for (data, name) in fields.iter_mut().zip(names) {
            for doc in docs {
                let mut toks = Vec::new();
                analyzer.analyze(doc.text(name), |t| {
                    let next = terms.len() as u32;
                    let term = *terms.entry(t.term.to_owned()).or_insert(next);
                    toks.push(Tok {
                        term,
                        position: t.position,
                    });
                });
                // Analyzers emit in position order; stay correct if one does not.
                toks.sort_by_key(|t| t.position);
                if !toks.is_empty() {
                    data.doc_count += 1;
                    data.sum_ttf += toks.len() as u64;
                    let mut distinct: Vec<u32> = toks.iter().map(|t| t.term).collect();
                    distinct.sort_unstable();
                    distinct.dedup();
                    for t in distinct {
                        *data.df.entry(t).or_insert(0) += 1;
                    }
                }
                data.docs.push(toks);
            }
            data.avgdl = if data.doc_count == 0 {
                0.0
            } else {
                (data.sum_ttf as f64 / data.doc_count as f64) as f32 as f64
            };
        }
        OracleIndex {
            analyzer: analyzer.clone(),
            num_docs: docs.len(),
            terms,
            fields,
            default_fields: default_fields.to_vec(),
        }
    }

    /// Number of documents.
    pub fn num_docs(&self) -> usize {
        self.num_docs
    }

    /// Documents with at least one token in `field`.
    pub fn doc_count(&self, field: Field) -> u64 {
        self.fields[field.index()].doc_count
    }

    /// Average field length as BM25 uses it.
    pub fn avgdl(&self, field: Field) -> f64 {
        self.fields[field.index()].avgdl
    }

    /// Documents whose `field` contains the (already analysed) `term`.
    pub fn df(&self, field: Field, term: &str) -> u64 {
        self.terms
            .get(term)
            .and_then(|t| self.fields[field.index()].df.get(t).copied())
            .unwrap_or(0)
    }

    /// Number of tokens of `field` in document `doc`.
    pub fn field_len(&self, field: Field, doc: u32) -> u32 {
        self.fields[field.index()].docs[doc as usize].len() as u32
    }

    /// Whether `query` analyses to nothing at all (see [`SEMANTICS`] 1).
    pub fn is_dropped(&self, query: &Query) -> bool {
        self.compile(query).is_none()
    }

    /// Evaluates `query` over every document.
    pub fn search(&self, query: &Query, mode: Mode, k: usize) -> OracleResult {
        let matches = match self.compile(query) {
            None => Vec::new(),
            Some(node) => (0..self.num_docs as u32)
                .filter_map(|d| self.score(&node, d).map(|s| (d, s)))
                .collect(),
        };
        OracleResult::from_matches(mode, k, matches)
    }

    /// The score of document `doc` for `query`, `None` when it does not match.
    pub fn score_of(&self, query: &Query, doc: u32) -> Option<f64> {
        assert!((doc as usize) < self.num_docs, "no document {doc}");
        self.compile(query).and_then(|node| self.score(&node, doc))
    }

    /// Analysed tokens of query text: `(term, position)`.
    fn analyse(&self, text: &str) -> Vec<(String, u32)> {
        let mut out = Vec::new();
        self.analyzer
            .analyze(text, |t| out.push((t.term.to_owned(), t.position)));
        out
    }

    fn fields_of(&self, field: Option<Field>) -> Vec<Field> {
        match field {
            Some(f) => vec![f],
            None => self.default_fields.clone(),
        }
    }

    /// A term or phrase leaf in `field`.
    fn leaf(&self, field: Field, tokens: &[(String, u32)]) -> Node {
        let data = &self.fields[field.index()];
        let first = tokens[0].1;
        let terms: Vec<Option<u32>> = tokens.iter().map(|(t, _)| self.terms.get(t).copied()).collect();
        let offsets = tokens.iter().map(|&(_, p)| p - first).collect();
        let idf_sum = terms
            .iter()
            .map(|t| {
                let df = t.and_then(|t| data.df.get(&t).copied()).unwrap_or(0);
                idf(df, data.doc_count)
            })
            .sum();
        Node::Leaf {
            field,
            terms,
            offsets,
            idf: idf_sum,
        }
    }

    /// A disjunction, or its only member.
    fn any_of(mut nodes: Vec<Node>) -> Node {
        if nodes.len() == 1 {
            nodes.pop().unwrap()
        } else {
            Node::Bool {
                must: Vec::new(),
                filter: Vec::new(),
                should: nodes,
                must_not: Vec::new(),
                min: 0,
            }
        }
    }

    /// Analyses and resolves `query`; `None` when it is dropped (see
    /// [`SEMANTICS`] 1).
    fn compile(&self, query: &Query) -> Option<Node> {
        match query {
            Query::Term { field, text } => {
                let tokens = self.analyse(text);
                if tokens.is_empty() {
                    return None;
                }
                let mut leaves = Vec::new();
                for tok in &tokens {
                    for f in self.fields_of(*field) {
                        leaves.push(self.leaf(f, std::slice::from_ref(tok)));
                    }
                }
                Some(Self::any_of(leaves))
            }
            Query::MinShouldMatch { query, min } => match &**query {
                Query::Boolean(clauses) => {
                    let n = clauses.iter().filter(|c| c.occur == Occur::Should).count();
                    let mut node = self.compile(query)?;
                    if let Node::Bool { min: m, .. } = &mut node {
                        *m = min_should_match(*min, n);
                    }
                    Some(node)
                }
                Query::Term { field, text } => {
                    let tokens = self.analyse(text);
                    let m = min_should_match(*min, tokens.len());
                    if tokens.len() < 2 || m == 0 {
                        return self.compile(query);
                    }
                    let should = tokens
                        .iter()
                        .map(|tok| {
                            let leaves = self
                                .fields_of(*field)
                                .into_iter()
                                .map(|f| self.leaf(f, std::slice::from_ref(tok)))
                                .collect();
                            Self::any_of(leaves)
                        })
                        .collect();
                    Some(Node::Bool {
                        must: Vec::new(),
                        filter: Vec::new(),
                        should,
                        must_not: Vec::new(),
                        min: m,
                    })
                }
                other => self.compile(other),
            },
            Query::Phrase { field, text } => {
                let tokens = self.analyse(text);
                if tokens.is_empty() {
                    return None;
                }
                let leaves = self
                    .fields_of(*field)
                    .into_iter()
                    .map(|f| self.leaf(f, &tokens))
                    .collect();
                Some(Self::any_of(leaves))
            }
            Query::Boolean(clauses) => {
                let (mut must, mut filter, mut should, mut must_not) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                for clause in clauses {
                    let Some(node) = self.compile(&clause.query) else {
                        continue;
                    };
                    match clause.occur {
                        Occur::Must => must.push(node),
                        Occur::Filter => filter.push(node),
                        Occur::Should => should.push(node),
                        Occur::MustNot => must_not.push(node),
                    }
                }
                if must.is_empty() && filter.is_empty() && should.is_empty() && must_not.is_empty() {
                    None
                } else {
                    Some(Node::Bool {
                        must,
                        filter,
                        should,
                        must_not,
                        min: 0,
                    })
                }
            }
            other => unimplemented!("the text oracle does not evaluate {other:?} (see typed_oracle.rs)"),
        }
    }

    /// Score of `doc` for a compiled query, `None` when it does not match.
    fn score(&self, node: &Node, doc: u32) -> Option<f64> {
        match node {
            Node::Leaf {
                field,
                terms,
                offsets,
                idf,
            } => {
                let data = &self.fields[field.index()];
                let toks = &data.docs[doc as usize];
                let freq = phrase_freq(toks, terms, offsets);
                (freq > 0).then(|| bm25(*idf, freq, toks.len() as u32, data.avgdl))
            }
            Node::Bool {
                must,
                filter,
                should,
                must_not,
                min,
            } => {
                if must.is_empty() && filter.is_empty() && should.is_empty() {
                    return None;
                }
                if must_not.iter().any(|n| self.score(n, doc).is_some()) {
                    return None;
                }
                let mut total = 0.0;
                for n in must {
                    total += self.score(n, doc)?;
                }
                for n in filter {
                    self.score(n, doc)?;
                }
                let mut matched = 0;
                for n in should {
                    if let Some(s) = self.score(n, doc) {
                        total += s;
                        matched += 1;
                    }
                }
                let enough = match min {
                    0 => !must.is_empty() || !filter.is_empty() || matched > 0,
                    &m => matched >= m,
                };
                enough.then_some(total)
            }
        }
    }
}

/// Elasticsearch's `Queries.calculateMinShouldMatch` for `n` optional
/// clauses, in Java's arithmetic (32-bit ints, a float percentage).
pub fn min_should_match(min: MinimumShouldMatch, n: usize) -> usize {
    let n = n as i32;
    let result = match min {
        MinimumShouldMatch::Count(c) => {
            if c < 0 {
                n.wrapping_add(c)
            } else {
                c
            }
        }
        MinimumShouldMatch::Percent(p) => {
            let calc = n.wrapping_mul(p) as f32 * (1.0f32 / 100.0);
            if calc < 0.0 {
                n.wrapping_add(calc as i32)
            } else {
                calc as i32
            }
        }
    };
    result.max(0) as usize
}

/// Number of distinct start positions `p` such that `terms[i]` occurs at
/// `p + offsets[i]` for every `i` (for one term: its frequency).
fn phrase_freq(toks: &[Tok], terms: &[Option<u32>], offsets: &[u32]) -> u32 {
    let Some(terms) = terms.iter().copied().collect::<Option<Vec<u32>>>() else {
        return 0;
    };
    let occurs_at = |term: u32, position: u32| {
        let from = toks.partition_point(|t| t.position < position);
        toks[from..]
            .iter()
            .take_while(|t| t.position == position)
            .any(|t| t.term == term)
    };
    let mut freq = 0;
    let mut last_start = None;
    for t in toks {
        if t.term != terms[0] || last_start == Some(t.position) {
            continue;
        }
        let start = t.position;
        if terms
            .iter()
            .zip(offsets)
            .skip(1)
            .all(|(&term, &off)| occurs_at(term, start + off))
        {
            freq += 1;
            last_start = Some(start);
        }
    }
    freq
}

/// One-shot evaluation: analyses `docs` and answers `query`.
pub fn evaluate(docs: &[Document], analyzer: &Analyzer, query: &Query, mode: Mode, k: usize) -> OracleResult {
    OracleIndex::new(docs, analyzer).search(query, mode, k)
}
