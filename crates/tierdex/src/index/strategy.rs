//! The maintenance strategy an index was created with (DESIGN §5): which
//! one it is, as the manifest records it. What each strategy does after a
//! flush is the update layer's ([`crate::update`]).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// How flushed updates are merged; chosen when the index is created and
/// remembered in its manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// Merge everything into one segment at every flush.
    ImmediateMerge,
    /// Geometric partitioning with r = 3.
    Geometric,
    /// Logarithmic (binary) merging: geometric partitioning with r = 2.
    #[default]
    Logarithmic,
    /// Never merge (compaction still reclaims deleted documents).
    NoMerge,
    /// Append each flush's postings to every term's chain of 8 KiB blocks
    /// in one chain file (non-contiguous pieces; see [`crate::update::inplace`]).
    InPlace,
    /// The same, each term's data kept in one run with 25% spare room and
    /// moved when it outgrows it.
    InPlaceContiguous,
}

impl Strategy {
    /// Every strategy, for tests and benchmarks.
    pub const ALL: [Strategy; 6] = [
        Strategy::ImmediateMerge,
        Strategy::Geometric,
        Strategy::Logarithmic,
        Strategy::NoMerge,
        Strategy::InPlace,
        Strategy::InPlaceContiguous,
    ];

    /// The name used on the command line and in the manifest.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::ImmediateMerge => "immediate-merge",
            Strategy::Geometric => "geometric",
            Strategy::Logarithmic => "logarithmic",
            Strategy::NoMerge => "no-merge",
            Strategy::InPlace => "in-place",
            Strategy::InPlaceContiguous => "in-place-contiguous",
        }
    }

    /// True for the strategies that update postings in place (one chained
    /// segment instead of segments to merge).
    pub fn in_place(self) -> bool {
        matches!(self, Strategy::InPlace | Strategy::InPlaceContiguous)
    }

    /// True for the default (kept out of manifests that use it).
    pub fn is_default(&self) -> bool {
        *self == Strategy::default()
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Strategy {
    type Err = Error;

    fn from_str(s: &str) -> Result<Strategy> {
        Strategy::ALL.into_iter().find(|st| st.name() == s).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "unknown strategy `{s}` (expected one of: {})",
                Strategy::ALL.map(|s| s.name()).join(", ")
            ))
        })
    }
}
