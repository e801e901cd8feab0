//! Benchmarks of tierdex side by side with its peers (DESIGN §8).
//!
//! * [`workload`]: query workloads generated from an index's own terms.
//! * [`commands`]: query sets (the search-benchmark-game command file,
//!   generated workloads) with a category per query.
//! * [`engines`]: the engines behind one protocol (`bench/PROTOCOL.md`):
//!   building, indexing (time, peak RSS, size) and query streams.
//! * [`stats`]: per-query minimum/median over passes, per-category
//!   aggregates, ratios, count agreement and top-10 overlap.
//! * [`quality`]: nDCG@10 and MAP on test collections with judgments.
//! * [`report`]: the JSON results, the markdown summary and SVG charts.
//! * [`limits`]: cgroup v1 memory groups that clean up after themselves,
//!   dropping the page cache, `/proc/<pid>/io` counters.
//! * [`cache`]: the result-cache benchmark (Zipf stream, replays, live runs).
//! * [`load`]: open-loop Poisson load against a search server, rate sweeps.
//! * [`limited`]: memory-limited runs (DESIGN §3): one cold pass per engine
//!   and limit, device bytes per query, QPS, latency, report and charts.

pub mod cache;
pub mod commands;
pub mod engines;
pub mod limited;
pub mod limits;
pub mod load;
pub mod maintenance;
pub mod quality;
pub mod report;
pub mod stats;
pub use tierdex_workload as workload;
