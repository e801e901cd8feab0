//! index (stub).
