//! The outpost gRPC protocol (package `outpost.v1`), generated at build time from `proto/` by protox and
//! tonic-prost-build, so building needs no system `protoc`.
//!
//! # Layout
//! - [`pb`]: generated messages, clients (`*_client`) and servers (`*_server`).
//! - [`FILE_DESCRIPTOR_SET`]: the encoded descriptors, for gRPC server reflection.
//! - [`path`]: validation and lexical normalization of wire paths.
//! - [`find_up`]: find-up semantics (probe order, in-order decision, counters) shared by server and client.
//! - [`error_chain`]: the one-line message of an error and its causes.

pub mod find_up;
mod message;
pub mod path;

pub use message::error_chain;

mod generated {
    #![allow(missing_docs, unreachable_pub, clippy::all, clippy::pedantic)]
    tonic::include_proto!("outpost.v1");
}

/// Generated protobuf messages and tonic services of `outpost.v1`.
pub mod pb {
    pub use super::generated::*;
}

/// Encoded `FileDescriptorSet` of every outpost proto file, for `tonic-reflection`.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/outpost_descriptor.bin"));
