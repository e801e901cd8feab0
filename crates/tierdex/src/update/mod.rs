//! Online updates (DESIGN §5): the write-ahead log ([`wal`]) that makes
//! batches durable before they are acknowledged, the maintenance strategies
//! ([`strategy`]) and the writer that ties them to a searchable buffer
//! ([`writer`]).

internal!(inplace);
internal!(priority);
internal!(strategy);
pub mod wal;
pub mod writer;

pub use crate::index::Strategy;
pub use writer::{Applied, FlushReport, IndexWriter, Maintainer, WriterOptions, WriterStats};
