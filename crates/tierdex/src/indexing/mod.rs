//! indexing (stub).
