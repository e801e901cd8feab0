//! The subcommands of `tierdex-bench`: one module each, with its own
//! arguments and `run`; [`shared`] holds what they share.

pub mod cache;
pub mod cluster;
pub mod cluster_scale;
pub mod compare;
pub mod index_scale;
pub mod isolation;
pub mod limited;
pub mod load;
pub mod maintenance;
pub mod shared;
pub mod workload;

pub(crate) use shared::*;
