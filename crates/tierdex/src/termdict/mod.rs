//! termdict (stub).
