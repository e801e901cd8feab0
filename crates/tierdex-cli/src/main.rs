//! The `tierdex` command (stub).

fn main() {}
