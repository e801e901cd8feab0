//! Text analysis (stub).
