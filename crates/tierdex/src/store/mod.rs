//! store (stub).
