//! Executor.
//!
//! # Layout
//! - [`fs`]: the `outpost.v1.FileSystem` service.

pub mod fs;
