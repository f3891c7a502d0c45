//! Compiles `proto/` with protox (pure Rust, no system `protoc`) and generates tonic/prost code plus
//! a file descriptor set for gRPC reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "proto/outpost/v1/executor.proto",
        "proto/outpost/v1/filesystem.proto",
        "proto/outpost/v1/http.proto",
        "proto/outpost/v1/process.proto",
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out_dir.join("outpost_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Process output is cloned per reader from the executor's ring: `Bytes` makes that a refcount.
        .bytes(".outpost.v1.Output.data")
        // HTTP bodies pass through without copies between reqwest/hyper chunks and gRPC frames.
        .bytes(".outpost.v1.FetchRequest.body")
        .bytes(".outpost.v1.FetchResponse.body")
        .compile_fds(descriptors)?;
    Ok(())
}
