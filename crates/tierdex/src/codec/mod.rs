//! codec (stub).
