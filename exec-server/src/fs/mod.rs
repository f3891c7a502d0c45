//! The `outpost.v1.FileSystem` service: absolute-path filesystem operations and the server-side FindUp.
//!
//! Requests are validated once at the boundary (paths: absolute, non-empty, at most 4096 bytes, no NUL;
//! INVALID_ARGUMENT naming the field). Every operation is a plain synchronous function returning
//! `Result<_, FsError>`, run off the async runtime through the [`OpRunner`], which is where a call's
//! permission profile will be enforced. Errors map to gRPC codes in one place
//! (`impl From<FsError> for Status`).
//!
//! # Layout
//! - [`service`]: [`FileSystemService`], the thin tonic service, and [`FsConfig`].
//! - [`runner`]: [`OpRunner`], which runs blocking operations under a profile.
//! - [`error`]: [`FsError`] and its status mapping.
//! - `ops`: metadata, create directory, remove, rename, canonicalize.
//! - `read`, `write`: the streaming ReadFile and WriteFile.
//! - `dir`: paged ReadDirectory. `copy`: Copy. `find_up`: the server-side FindUp walk.

mod copy;
mod dir;
pub mod error;
mod find_up;
mod ops;
mod read;
pub mod runner;
pub mod service;
mod write;

pub use error::FsError;
pub use runner::OpRunner;
pub use service::{FileSystemService, FsConfig};
