//! Links the GCC unwinder statically on glibc Linux (what `gcc -static-libgcc` does). Rust's standard
//! library otherwise loads `libgcc_s.so.1` for its unwinding symbols, and loading that library
//! (open, map, relocate, run its CPU-feature constructor) cost about 0.09 ms on every start of
//! `outpost`, which sits on the hot path of every sandboxed command (measured side by side with a
//! minimal binary that only execs). Panics still unwind: the same unwinder is linked in, not dropped.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        // A native library of this (binary-only) package comes before the standard library's
        // `-lgcc_s` on the link line, so the unwinding symbols resolve here and `--as-needed` drops
        // the shared library.
        println!("cargo:rustc-link-lib=static=gcc_eh");
    }
}
