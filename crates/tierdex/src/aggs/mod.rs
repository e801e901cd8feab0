//! Aggregations over a query's matches, in Elasticsearch's request and
//! response shape (issue #22): `terms`, `histogram`, `date_histogram`,
//! `range`, `date_range`, `stats`, `min`, `max`, `avg`, `sum`,
//! `value_count`, `cardinality`, `filter`, `filters` and `top_hits`, with
//! sub-aggregations to any depth.
//!
//! * [`request`]: the `aggs` JSON read into [`Aggregations`] (anything not
//!   understood is an error naming it);
//! * `collect`: the per-segment pass, run in the same loop
//!   as the hits and the count, reading the columns as needed;
//! * [`result`]: the per-segment [`AggsPartial`], serialisable and merged
//!   associatively (across segments now, across shards later), and
//!   [`finalize`] into the response JSON;
//! * [`calendar`]: date histogram intervals and time zones;
//! * [`cardinality`]: exact sets and HyperLogLog sketches.
//!
//! [`Searcher::search_request`](crate::search::Searcher::search_request)
//! with [`SearchRequest::aggs`](crate::search::SearchRequest::aggs) answers
//! them; [`Searcher::aggregate_parts`](crate::search::Searcher::aggregate_parts)
//! gives the partials.

pub mod calendar;
pub mod cardinality;
pub(crate) mod collect;
pub mod request;
pub mod result;

#[cfg(test)]
mod tests;

pub use request::{AggKind, Aggregation, Aggregations};
pub use result::{finalize, AggsPartial, BucketPartial, Partial};
