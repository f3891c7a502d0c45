//! `outpost info`: what an executor is and what it can enforce.

use std::process::ExitCode;

use clap::Args;

use crate::target_args::TargetArgs;

/// Arguments of `outpost info`.
#[derive(Debug, Args)]
pub(crate) struct InfoArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn run(args: InfoArgs) -> anyhow::Result<ExitCode> {
    let executor = args.target.connect().await?;
    let info = executor.info().await?;
    let ctx = info.fs_context.unwrap_or_default();
    let sandbox = info.sandbox.unwrap_or_default();
    let limits = info.limits.unwrap_or_default();
    if args.json {
        let value = serde_json::json!({
            "version": info.version, "os": info.os, "arch": info.arch, "executor_id": info.executor_id,
            "fs_context": {"cwd": ctx.cwd, "home": ctx.home, "tmp": ctx.tmp, "workspace_roots": ctx.workspace_roots},
            "sandbox": {"landlock_abi": sandbox.landlock_abi, "seccomp": sandbox.seccomp, "user_namespaces": sandbox.user_namespaces},
            "limits": {"max_message_bytes": limits.max_message_bytes, "max_concurrent_streams": limits.max_concurrent_streams,
                       "read_chunk_bytes": limits.read_chunk_bytes, "keepalive_interval_ms": limits.keepalive_interval_ms},
            "permission_profiles": info.permission_profiles, "default_profile": info.default_profile,
        });
        println!("{value}");
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "executor        {} ({})",
        info.executor_id,
        executor.target()
    );
    println!("version         {}", info.version);
    println!("platform        {}/{}", info.os, info.arch);
    println!("cwd             {}", ctx.cwd);
    println!("home            {}", ctx.home);
    println!("tmp             {}", ctx.tmp);
    println!("workspace roots {}", ctx.workspace_roots.join(", "));
    let landlock = match sandbox.landlock_abi {
        0 => "unavailable".to_owned(),
        abi => format!("ABI {abi}"),
    };
    println!("landlock        {landlock}");
    println!("seccomp         {}", yes_no(sandbox.seccomp));
    println!("user namespaces {}", yes_no(sandbox.user_namespaces));
    println!("profiles        {}", info.permission_profiles.join(", "));
    println!("default profile {}", info.default_profile);
    println!(
        "limits          max message {} B, {} concurrent calls, read chunk {} B",
        limits.max_message_bytes, limits.max_concurrent_streams, limits.read_chunk_bytes
    );
    Ok(ExitCode::SUCCESS)
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
