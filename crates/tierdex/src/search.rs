//! The public search entry point (stub).
