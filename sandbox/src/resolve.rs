//! Resolution: a [`Profile`] plus a [`FsContext`] plus optional [`ManagedRequirements`] give a
//! [`ResolvedPolicy`] of concrete paths. Resolution is pure (it only stats paths to find protected
//! subpaths), so an executor resolves `project_roots` against its own workspace.

use std::path::{Component, Path, PathBuf};

use crate::env_policy::EnvPolicy;
use crate::managed::{ManagedRefusal, ManagedRequirements};
use crate::profile::{Access, FsPath, FsPolicy, NetworkPolicy, Profile, Rlimits, SpecialPath};

/// Directories a dynamically linked program needs (special path `minimal`).
pub const MINIMAL_READ: [&str; 9] = [
    "/bin",
    "/sbin",
    "/usr",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc",
    "/proc",
    "/dev/urandom",
];

/// Device files every sandboxed process may open for writing (and ioctl): terminals and sinks.
pub const DEVICE_WRITE: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Device files every sandboxed process may read: the random sources. With [`DEVICE_WRITE`], the only
/// device nodes below `/dev` a sandboxed process can open.
pub const DEVICE_READ: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// The filesystem a profile is resolved against: the executor's (or launcher's) own paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsContext {
    /// Working directory of the command.
    pub cwd: PathBuf,
    /// Home directory.
    pub home: PathBuf,
    /// Temporary directory (`tmpdir` special path).
    pub tmp: PathBuf,
    /// Workspace roots (`project_roots` special path).
    pub workspace_roots: Vec<PathBuf>,
}

impl FsContext {
    /// A context for a launcher run in `cwd`: workspace root = `cwd`, home and tmp from the
    /// environment (`$HOME`, `$TMPDIR`, falling back to `/tmp`).
    pub fn for_cwd(cwd: PathBuf) -> Self {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from);
        let tmp = std::env::var_os("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
        Self {
            workspace_roots: vec![cwd.clone()],
            cwd,
            home,
            tmp,
        }
    }
}

/// A profile turned into concrete paths and settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPolicy {
    /// The active named profile (`CODEX_PERMISSION_PROFILE`), `None` for anonymous profiles.
    pub profile_name: Option<String>,
    /// `false` for `:danger-full-access` and JSON `disabled`: nothing is enforced.
    pub sandboxed: bool,
    /// Readable (and executable) trees.
    pub readable: Vec<PathBuf>,
    /// Writable trees (the workspace roots, tmp).
    pub writable: Vec<PathBuf>,
    /// Paths hidden entirely (mount layer).
    pub denied: Vec<PathBuf>,
    /// Existing protected subpaths inside writable roots, kept read-only (mount layer).
    pub protected: Vec<PathBuf>,
    /// Network policy after managed requirements.
    pub network: NetworkPolicy,
    /// Environment policy.
    pub env: EnvPolicy,
    /// Resource limits.
    pub rlimits: Rlimits,
    /// Working directory of the command.
    pub cwd: PathBuf,
    /// Things worth telling the user (unknown special path kinds, missing paths).
    pub warnings: Vec<String>,
}

impl ResolvedPolicy {
    /// Whether the network is restricted.
    pub fn network_restricted(&self) -> bool {
        self.network == NetworkPolicy::Restricted
    }

    /// Whether enforcement needs a mount namespace (protected subpaths or denied paths).
    pub fn needs_mounts(&self) -> bool {
        self.sandboxed && (!self.protected.is_empty() || !self.denied.is_empty())
    }
}

/// Failure to resolve a profile.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Managed requirements forbid the profile.
    #[error(transparent)]
    Refused(#[from] ManagedRefusal),
    /// A `project_roots` subpath is absolute or climbs out with `..`.
    #[error("project_roots subpath {0:?} must be relative and stay below the root")]
    Subpath(PathBuf),
    /// A context path is relative.
    #[error("filesystem context path {0:?} must be absolute")]
    RelativeContext(PathBuf),
}

/// Resolves `profile` against `ctx`, applying `managed` when given.
///
/// # Errors
/// [`ResolveError::Refused`] naming the managed rule, [`ResolveError::Subpath`],
/// [`ResolveError::RelativeContext`].
pub fn resolve(
    profile: &Profile,
    ctx: &FsContext,
    managed: Option<&ManagedRequirements>,
) -> Result<ResolvedPolicy, ResolveError> {
    let context_paths = [&ctx.cwd, &ctx.home, &ctx.tmp];
    if let Some(p) = context_paths
        .into_iter()
        .chain(&ctx.workspace_roots)
        .find(|p| !p.is_absolute())
    {
        return Err(ResolveError::RelativeContext(p.clone()));
    }
    if let Some(m) = managed {
        m.check(profile.name.as_deref(), profile.is_unsandboxed())?;
    }
    let mut policy = ResolvedPolicy {
        profile_name: profile.name.clone(),
        sandboxed: !profile.is_unsandboxed(),
        readable: Vec::new(),
        writable: Vec::new(),
        denied: Vec::new(),
        protected: Vec::new(),
        network: profile.network,
        env: profile.env.clone(),
        rlimits: profile.rlimits,
        cwd: ctx.cwd.clone(),
        warnings: Vec::new(),
    };
    if managed.is_some_and(|m| m.force_network_restricted) {
        policy.network = NetworkPolicy::Restricted;
    }
    let FsPolicy::Restricted(entries) = &profile.fs else {
        return Ok(policy);
    };
    for entry in entries {
        let paths = expand(&entry.path, ctx, &mut policy.warnings)?;
        let list = match entry.access {
            Access::Read => &mut policy.readable,
            Access::Write => &mut policy.writable,
            Access::Deny => &mut policy.denied,
        };
        list.extend(paths);
    }
    if let Some(m) = managed {
        policy.denied.extend(m.deny_paths.iter().cloned());
    }
    dedup(&mut policy.readable);
    dedup(&mut policy.writable);
    dedup(&mut policy.denied);
    // A denied root is not granted at all; a deny below a grant is the mount layer's job.
    let denied = policy.denied.clone();
    policy.readable.retain(|p| !denied.contains(p));
    policy.writable.retain(|p| !denied.contains(p));
    policy.protected = protected_subpaths(&policy.writable, &profile.protected_subpaths);
    Ok(policy)
}

fn expand(
    path: &FsPath,
    ctx: &FsContext,
    warnings: &mut Vec<String>,
) -> Result<Vec<PathBuf>, ResolveError> {
    let special = match path {
        FsPath::Plain(p) => return Ok(vec![p.clone()]),
        FsPath::Special(s) => s,
    };
    Ok(match special {
        SpecialPath::Root => vec![PathBuf::from("/")],
        SpecialPath::Minimal => MINIMAL_READ.iter().map(PathBuf::from).collect(),
        SpecialPath::Tmpdir => vec![ctx.tmp.clone()],
        SpecialPath::SlashTmp => vec![PathBuf::from("/tmp")],
        SpecialPath::ProjectRoots { subpath } => {
            if let Some(sub) = subpath
                && !sub.components().all(|c| matches!(c, Component::Normal(_)))
            {
                return Err(ResolveError::Subpath(sub.clone()));
            }
            ctx.workspace_roots
                .iter()
                .map(|r| subpath.as_ref().map_or_else(|| r.clone(), |s| r.join(s)))
                .collect()
        }
        SpecialPath::Unknown(kind) => {
            tracing::warn!(kind = %kind, "ignoring unknown special path kind");
            warnings.push(format!("ignored unknown special path kind {kind:?}"));
            Vec::new()
        }
    })
}

fn dedup(paths: &mut Vec<PathBuf>) {
    let mut seen = Vec::with_capacity(paths.len());
    paths.retain(|p| {
        let fresh = !seen.contains(p);
        if fresh {
            seen.push(p.clone());
        }
        fresh
    });
}

/// Existing `root/name` entries for every writable root and protected name.
fn protected_subpaths(writable: &[PathBuf], names: &[String]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for root in writable {
        for name in names {
            let p = root.join(name);
            if Path::new(&p).symlink_metadata().is_ok() && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{READ_ONLY, WORKSPACE};

    fn ctx(root: &Path) -> FsContext {
        FsContext {
            cwd: root.to_owned(),
            home: "/home/u".into(),
            tmp: "/var/tmp".into(),
            workspace_roots: vec![root.to_owned()],
        }
    }

    #[test]
    fn workspace_resolves_against_context() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let p = resolve(
            &Profile::builtin(WORKSPACE).unwrap(),
            &ctx(dir.path()),
            None,
        )
        .unwrap();
        assert_eq!(p.readable, vec![PathBuf::from("/")]);
        assert_eq!(
            p.writable,
            vec![dir.path().to_owned(), "/var/tmp".into(), "/tmp".into()]
        );
        assert_eq!(p.protected, vec![dir.path().join(".git")]);
        assert_eq!(p.profile_name.as_deref(), Some(WORKSPACE));
        assert!(p.network_restricted() && p.needs_mounts());
    }

    #[test]
    fn managed_forces_network_and_denies() {
        let mut profile = Profile::builtin(READ_ONLY).unwrap();
        profile.network = NetworkPolicy::Enabled;
        let m = ManagedRequirements::parse(
            "force_network_restricted = true\ndeny_paths = [\"/etc/shadow\"]",
            Path::new("req.toml"),
        )
        .unwrap();
        let p = resolve(&profile, &ctx(Path::new("/w")), Some(&m)).unwrap();
        assert!(p.network_restricted());
        assert_eq!(p.denied, vec![PathBuf::from("/etc/shadow")]);
    }

    #[test]
    fn refusal_and_bad_subpath() {
        let m = ManagedRequirements::parse("allowed_profiles = []", Path::new("r.toml")).unwrap();
        let err = resolve(
            &Profile::builtin(READ_ONLY).unwrap(),
            &ctx(Path::new("/w")),
            Some(&m),
        )
        .unwrap_err();
        assert!(err.to_string().contains("allowed_profiles"), "{err}");
        let mut profile = Profile::builtin(READ_ONLY).unwrap();
        profile.fs = FsPolicy::Restricted(vec![crate::profile::FsEntry {
            path: FsPath::Special(SpecialPath::ProjectRoots {
                subpath: Some("../up".into()),
            }),
            access: Access::Write,
        }]);
        assert!(matches!(
            resolve(&profile, &ctx(Path::new("/w")), None),
            Err(ResolveError::Subpath(_))
        ));
    }

    #[test]
    fn unknown_kind_warns() {
        let mut profile = Profile::builtin(READ_ONLY).unwrap();
        profile.fs = FsPolicy::Restricted(vec![crate::profile::FsEntry {
            path: FsPath::Special(SpecialPath::Unknown("later".into())),
            access: Access::Read,
        }]);
        let p = resolve(&profile, &ctx(Path::new("/w")), None).unwrap();
        assert!(p.warnings[0].contains("later"));
        assert!(p.readable.is_empty());
    }
}
