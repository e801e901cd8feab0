//! Test support shared by the integration tests: the brute-force oracle that
//! every query path of the engine is checked against, the comparison of an
//! engine answer with the oracle's, and seeded random corpora and queries.
//!
//! Each integration test crate uses a different subset of these helpers.
#![allow(dead_code)]

pub mod compare;
pub mod gen;
pub mod merge;
pub mod oracle;
pub mod shrink;
