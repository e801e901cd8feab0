//! layout (stub).
