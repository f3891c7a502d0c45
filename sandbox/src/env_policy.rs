//! Environment policy for sandboxed commands: which inherited variables survive, which are set, and the
//! two variables outpost always controls (`CODEX_PERMISSION_PROFILE`, `CODEX_SANDBOX_NETWORK_DISABLED`).
//!
//! Order: inherit (all | core | none), default excludes (`*KEY*`, `*SECRET*`, `*TOKEN*`), `exclude`,
//! `set`, `include_only`; then the outpost-controlled variables. Globs are case-insensitive and support
//! `*` and `?`.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};

use serde::Deserialize;

/// Variable that carries the active named profile to the sandboxed command.
pub const PROFILE_ENV: &str = "CODEX_PERMISSION_PROFILE";
/// Variable set to `1` when the network is restricted.
pub const NETWORK_DISABLED_ENV: &str = "CODEX_SANDBOX_NETWORK_DISABLED";

/// Patterns excluded unless `ignore_default_excludes` is set.
pub const DEFAULT_EXCLUDES: [&str; 3] = ["*KEY*", "*SECRET*", "*TOKEN*"];

/// Variables kept by `inherit = "core"`.
pub const CORE_VARS: [&str; 12] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LC_ALL", "TERM",
];

/// Which inherited variables start out in the child's environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Inherit {
    /// Every inherited variable.
    #[default]
    All,
    /// Only [`CORE_VARS`].
    Core,
    /// None.
    None,
}

/// How the child's environment is derived from the inherited one.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvPolicy {
    /// Starting set.
    #[serde(default)]
    pub inherit: Inherit,
    /// Keep variables matching [`DEFAULT_EXCLUDES`].
    #[serde(default)]
    pub ignore_default_excludes: bool,
    /// Extra patterns to drop.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Variables to set (after excludes, so they always survive them).
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// When non-empty, only variables matching one of these patterns survive.
    #[serde(default)]
    pub include_only: Vec<String>,
}

impl EnvPolicy {
    /// Applies the policy to `inherited`, then sets or removes the outpost-controlled variables:
    /// `CODEX_PERMISSION_PROFILE` is `profile` (overriding anything inherited or configured) or absent,
    /// `CODEX_SANDBOX_NETWORK_DISABLED=1` is present exactly when `network_restricted`.
    pub fn apply<I>(
        &self,
        inherited: I,
        profile: Option<&str>,
        network_restricted: bool,
    ) -> Vec<(OsString, OsString)>
    where
        I: IntoIterator<Item = (OsString, OsString)>,
    {
        let mut env: BTreeMap<OsString, OsString> = inherited
            .into_iter()
            .filter(|(k, _)| match self.inherit {
                Inherit::All => true,
                Inherit::Core => CORE_VARS.iter().any(|c| OsStr::new(c) == k),
                Inherit::None => false,
            })
            .collect();
        let drop = |env: &mut BTreeMap<OsString, OsString>, pats: &[&str]| {
            env.retain(|k, _| !pats.iter().any(|p| glob_matches(p, &k.to_string_lossy())));
        };
        if !self.ignore_default_excludes {
            drop(&mut env, &DEFAULT_EXCLUDES);
        }
        let excludes: Vec<&str> = self.exclude.iter().map(String::as_str).collect();
        drop(&mut env, &excludes);
        for (k, v) in &self.set {
            env.insert(k.into(), v.into());
        }
        if !self.include_only.is_empty() {
            env.retain(|k, _| {
                let k = k.to_string_lossy();
                self.include_only.iter().any(|p| glob_matches(p, &k))
            });
        }
        env.remove(OsStr::new(PROFILE_ENV));
        env.remove(OsStr::new(NETWORK_DISABLED_ENV));
        if let Some(p) = profile {
            env.insert(PROFILE_ENV.into(), p.into());
        }
        if network_restricted {
            env.insert(NETWORK_DISABLED_ENV.into(), "1".into());
        }
        env.into_iter().collect()
    }
}

/// Case-insensitive glob match supporting `*` (any run) and `?` (one character).
pub fn glob_matches(pattern: &str, text: &str) -> bool {
    // Variable names and patterns are ASCII in practice: compare bytes without allocating (this runs
    // for every inherited variable and pattern on every launch).
    if pattern.is_ascii() && text.is_ascii() {
        return wildcard_match(pattern.as_bytes(), text.as_bytes(), b'*', b'?', |p, t| {
            p.eq_ignore_ascii_case(&t)
        });
    }
    let p: Vec<char> = pattern.to_uppercase().chars().collect();
    let t: Vec<char> = text.to_uppercase().chars().collect();
    wildcard_match(&p, &t, '*', '?', |p, t| p == t)
}

/// Matches `text` against `pattern`, where `star` stands for any run and `any` for one element.
/// Iterative with single-star backtracking: linear in practice, no recursion.
fn wildcard_match<T: Copy + PartialEq>(
    pattern: &[T],
    text: &[T],
    star: T,
    any: T,
    eq: impl Fn(T, T) -> bool,
) -> bool {
    let (mut pi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < text.len() {
        if pi < pattern.len() && (pattern[pi] == any || eq(pattern[pi], text[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < pattern.len() && pattern[pi] == star {
            backtrack = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = backtrack {
            pi = sp + 1;
            ti = st + 1;
            backtrack = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[pi..].iter().all(|c| *c == star)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    fn get<'a>(env: &'a [(OsString, OsString)], k: &str) -> Option<&'a OsString> {
        env.iter().find(|(key, _)| key == k).map(|(_, v)| v)
    }

    #[test]
    fn globs() {
        assert!(glob_matches("*KEY*", "aws_access_key_id"));
        assert!(glob_matches("a?c", "ABC"));
        assert!(!glob_matches("*TOKEN*", "PATH"));
        assert!(glob_matches("*", ""));
        assert!(glob_matches("LC_*", "LC_ALL"));
        assert!(glob_matches("*t*n", "MY_TOKEN"));
        assert!(!glob_matches("*KEY", "KEYS"));
        // Outside ASCII, case folding follows Unicode upper-casing (ß becomes SS).
        assert!(glob_matches("*SS*", "straße"));
        assert!(glob_matches("ÉT?", "été"));
        assert!(!glob_matches("*SS*", "strase"));
    }

    #[test]
    fn default_excludes_drop_secrets() {
        let env = EnvPolicy::default().apply(
            vars(&[
                ("PATH", "/bin"),
                ("GITHUB_TOKEN", "x"),
                ("api_key", "y"),
                ("MY_SECRET", "z"),
            ]),
            None,
            false,
        );
        assert_eq!(env, vars(&[("PATH", "/bin")]));
    }

    #[test]
    fn order_inherit_exclude_set_include_only() {
        let policy = EnvPolicy {
            inherit: Inherit::Core,
            ignore_default_excludes: true,
            exclude: vec!["user*".into()],
            set: [
                ("A_TOKEN".to_owned(), "set".to_owned()),
                ("B".to_owned(), "b".to_owned()),
            ]
            .into_iter()
            .collect(),
            include_only: vec!["*TOKEN*".into(), "PATH".into()],
        };
        let env = policy.apply(
            vars(&[
                ("PATH", "/bin"),
                ("USER", "me"),
                ("OTHER", "o"),
                ("HOME", "/h"),
            ]),
            None,
            false,
        );
        assert_eq!(env, vars(&[("A_TOKEN", "set"), ("PATH", "/bin")]));
    }

    #[test]
    fn profile_variable_overrides_and_is_removed() {
        let policy = EnvPolicy {
            set: [(PROFILE_ENV.to_owned(), "configured".to_owned())]
                .into_iter()
                .collect(),
            ..EnvPolicy::default()
        };
        let inherited = vars(&[(PROFILE_ENV, "inherited"), (NETWORK_DISABLED_ENV, "0")]);
        let env = policy.apply(inherited.clone(), Some(":workspace"), true);
        assert_eq!(get(&env, PROFILE_ENV).unwrap(), ":workspace");
        assert_eq!(get(&env, NETWORK_DISABLED_ENV).unwrap(), "1");
        let env = policy.apply(inherited, None, false);
        assert!(get(&env, PROFILE_ENV).is_none());
        assert!(get(&env, NETWORK_DISABLED_ENV).is_none());
    }

    #[test]
    fn inherit_none() {
        let policy = EnvPolicy {
            inherit: Inherit::None,
            ..EnvPolicy::default()
        };
        assert!(
            policy
                .apply(vars(&[("PATH", "/bin")]), None, false)
                .is_empty()
        );
    }
}
