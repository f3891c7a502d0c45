//! The executor's sandbox settings and how a Start request's profile or sandbox state becomes a
//! prepared launch. Managed requirements always apply here (unlike `outpost sandbox -P`, where they
//! are opt-in), and profiles resolve against the executor's own filesystem context.

use std::path::{Path, PathBuf};

use outpost_proto::pb;
use outpost_sandbox::launch::LaunchOptions;
use outpost_sandbox::profile::ProfileConfig;
use outpost_sandbox::resolve::ResolveError;
use outpost_sandbox::{
    Capabilities, FsContext, ManagedRequirements, PreparedLaunch, Profile, SandboxState, resolve,
};

use super::error::ProcessError;

/// How the executor sandboxes processes.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// Named profiles from the operator's profiles file.
    pub profiles: ProfileConfig,
    /// Profile used when a request names none.
    pub default_profile: String,
    /// Operator requirements, applied to every launch.
    pub managed: ManagedRequirements,
    /// Operator opt-out: run with missing layers (each listed as degraded). Never the default.
    pub allow_degraded: bool,
    /// Kernel features of this host.
    pub caps: Capabilities,
    /// Workspace roots of this executor (`project_roots`).
    pub workspace_roots: Vec<PathBuf>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            profiles: ProfileConfig::default(),
            default_profile: ":workspace".to_owned(),
            managed: ManagedRequirements::default(),
            allow_degraded: false,
            caps: Capabilities::detect(),
            workspace_roots: Vec::new(),
        }
    }
}

/// A launch decision for one Start request.
#[derive(Debug)]
pub(crate) enum Launch {
    /// Ready to spawn.
    Ready(Box<PreparedLaunch>),
    /// The sandbox refused (managed rule, missing kernel layer); nothing may run.
    Denied(String),
}

/// The sandbox part of a Start request.
#[derive(Debug)]
pub(crate) struct LaunchRequest<'a> {
    pub(crate) sandbox: Option<&'a pb::start_request::Sandbox>,
    pub(crate) cwd: &'a Path,
    pub(crate) env_policy: Option<&'a pb::EnvPolicy>,
    pub(crate) env: &'a std::collections::HashMap<String, String>,
    pub(crate) rlimits: &'a [pb::Rlimit],
}

impl SandboxSettings {
    /// Names of every profile a request may name.
    pub fn profile_names(&self) -> Vec<String> {
        [":read-only", ":workspace", ":danger-full-access"]
            .into_iter()
            .map(str::to_owned)
            .chain(self.profiles.profile_names().map(str::to_owned))
            .collect()
    }

    /// The executor's filesystem context for a profile resolved at `cwd`. Without configured
    /// workspace roots, `cwd` itself is the project (`project_roots`).
    pub fn fs_context(&self, cwd: PathBuf) -> FsContext {
        let mut ctx = FsContext::for_cwd(cwd);
        if !self.workspace_roots.is_empty() {
            ctx.workspace_roots.clone_from(&self.workspace_roots);
        }
        ctx
    }

    /// Resolves and prepares the launch of one request.
    pub(crate) fn prepare(&self, req: &LaunchRequest<'_>) -> Result<Launch, ProcessError> {
        let (profile, policy_cwd) = match req.sandbox {
            Some(pb::start_request::Sandbox::SandboxStateJson(json)) => {
                let state = SandboxState::parse(json).map_err(|e| ProcessError::Invalid {
                    field: "sandbox_state_json",
                    reason: format!("{e:#}"),
                })?;
                (state.permission_profile.profile, state.sandbox_cwd)
            }
            Some(pb::start_request::Sandbox::Profile(name)) if !name.is_empty() => {
                (self.named(name)?, req.cwd.to_owned())
            }
            _ => (self.named(&self.default_profile)?, req.cwd.to_owned()),
        };
        let ctx = self.fs_context(policy_cwd);
        let mut policy = match resolve(&profile, &ctx, Some(&self.managed)) {
            Ok(policy) => policy,
            Err(ResolveError::Refused(refusal)) => return Ok(Launch::Denied(refusal.to_string())),
            Err(other) => {
                return Err(ProcessError::Invalid {
                    field: "profile",
                    reason: other.to_string(),
                });
            }
        };
        if let Some(env_policy) = req.env_policy {
            policy.env = env_policy_from_pb(env_policy)?;
        }
        policy
            .env
            .set
            .extend(req.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        tighten_rlimits(&mut policy.rlimits, req.rlimits)?;
        let options = LaunchOptions {
            allow_degraded: self.allow_degraded,
            parent_death_signal: true,
        };
        match PreparedLaunch::prepare(&policy, &self.caps, &options, std::env::vars_os()) {
            Ok(launch) => Ok(Launch::Ready(Box::new(launch))),
            Err(err) => Ok(Launch::Denied(format!("{err}"))),
        }
    }

    fn named(&self, name: &str) -> Result<Profile, ProcessError> {
        self.profiles
            .profile(name)
            .map_err(|_| ProcessError::UnknownProfile(name.to_owned()))
    }
}

fn env_policy_from_pb(p: &pb::EnvPolicy) -> Result<outpost_sandbox::EnvPolicy, ProcessError> {
    use outpost_sandbox::env_policy::Inherit;
    let inherit = match pb::EnvInherit::try_from(p.inherit) {
        Ok(pb::EnvInherit::All) => Inherit::All,
        Ok(pb::EnvInherit::Core) => Inherit::Core,
        Ok(pb::EnvInherit::None) => Inherit::None,
        Err(_) => {
            return Err(ProcessError::Invalid {
                field: "env_policy.inherit",
                reason: format!("unknown value {}", p.inherit),
            });
        }
    };
    Ok(outpost_sandbox::EnvPolicy {
        inherit,
        ignore_default_excludes: p.ignore_default_excludes,
        exclude: p.exclude.clone(),
        set: p.set.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        include_only: p.include_only.clone(),
    })
}

/// Request limits can only lower the profile's.
fn tighten_rlimits(
    limits: &mut outpost_sandbox::profile::Rlimits,
    requested: &[pb::Rlimit],
) -> Result<(), ProcessError> {
    for r in requested {
        let slot = match r.resource.as_str() {
            "nofile" => &mut limits.nofile,
            "nproc" => &mut limits.nproc,
            "as" => &mut limits.address_space,
            "fsize" => &mut limits.fsize,
            "cpu" => &mut limits.cpu,
            "core" => &mut limits.core,
            other => {
                return Err(ProcessError::Invalid {
                    field: "rlimits",
                    reason: format!(
                        "unknown resource {other:?} (nofile, nproc, as, fsize, cpu, core)"
                    ),
                });
            }
        };
        // A single value is enforced as both soft and hard limit; the soft value wins when given.
        let value = if r.soft > 0 { r.soft } else { r.hard };
        *slot = Some(slot.map_or(value, |current| current.min(value)));
    }
    Ok(())
}
