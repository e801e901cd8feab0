//! Online updates (DESIGN §5). So far: the write-ahead log ([`wal`]) that
//! makes batches durable before they are acknowledged; the in-memory buffer,
//! refresh and the flush strategies (issue #6) are still to come.

pub mod wal;
