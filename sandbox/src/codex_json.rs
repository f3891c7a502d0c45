//! The JSON forms Codex uses: a `PermissionProfile` and a sandbox state
//! (`{"permissionProfile":…,"sandboxCwd":"file:///abs","codexLinuxSandboxExe":…,"useLegacyLandlock":…}`).
//!
//! Parsing reads the fields outpost understands; the original JSON value (and the original text, when
//! parsed from text) is kept verbatim for forwarding and is never rebuilt from parsed fields.

use std::path::PathBuf;

use serde_json::Value;

use crate::env_policy::EnvPolicy;
use crate::profile::{
    Access, FsEntry, FsPath, FsPolicy, NetworkPolicy, Profile, Rlimits, SpecialPath,
    default_protected,
};

/// Failure to understand a Codex JSON value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonError {
    /// The text is not JSON.
    #[error("not valid JSON")]
    Syntax(#[source] serde_json::Error),
    /// A required field is missing or has the wrong type; the field is named.
    #[error("field `{0}` is missing or has the wrong type")]
    Field(&'static str),
    /// A field has a value outpost does not accept.
    #[error("field `{field}` has unsupported value {value:?}")]
    Value {
        /// The field.
        field: &'static str,
        /// Its value, rendered.
        value: String,
    },
    /// `sandboxCwd` is not an absolute path or a `file://` URL of one.
    #[error("sandboxCwd {0:?} must be an absolute path or a file:// URL of one")]
    Cwd(String),
}

/// How a JSON profile maps onto sandboxing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonProfileKind {
    /// `managed`: explicit filesystem entries.
    Managed,
    /// `disabled`: no sandbox (allowed only when managed requirements allow unsandboxed runs).
    Disabled,
    /// `external`: the caller sandboxes elsewhere; outpost treats it as read-only.
    External,
}

/// A parsed Codex `PermissionProfile`, with its original value.
#[derive(Debug, Clone, PartialEq)]
pub struct PermissionProfileJson {
    /// The value exactly as received.
    pub original: Value,
    /// The `type` field.
    pub kind: JsonProfileKind,
    /// The profile outpost enforces for it (anonymous: no name).
    pub profile: Profile,
    /// Special path kinds this version does not know (kept in the profile, warned about on resolve).
    pub unknown_kinds: Vec<String>,
}

fn str_field<'a>(v: &'a Value, field: &'static str) -> Result<&'a str, JsonError> {
    v.get(field)
        .and_then(Value::as_str)
        .ok_or(JsonError::Field(field))
}

fn network(v: &Value) -> Result<NetworkPolicy, JsonError> {
    match v.get("network").and_then(Value::as_str) {
        None | Some("restricted") => Ok(NetworkPolicy::Restricted),
        Some("enabled") => Ok(NetworkPolicy::Enabled),
        Some(other) => Err(JsonError::Value {
            field: "network",
            value: other.to_owned(),
        }),
    }
}

fn entry(e: &Value) -> Result<FsEntry, JsonError> {
    let access = match str_field(e, "access")? {
        "read" => Access::Read,
        "write" => Access::Write,
        "deny" | "none" => Access::Deny,
        other => {
            return Err(JsonError::Value {
                field: "access",
                value: other.to_owned(),
            });
        }
    };
    let path = e.get("path").ok_or(JsonError::Field("path"))?;
    let path = match str_field(path, "type")? {
        "special" => {
            let value = path.get("value").ok_or(JsonError::Field("path.value"))?;
            let kind = str_field(value, "kind")?;
            let subpath = value
                .get("subpath")
                .and_then(Value::as_str)
                .map(PathBuf::from);
            FsPath::Special(SpecialPath::from_kind(kind, subpath))
        }
        "path" | "absolute" => {
            let p = path
                .get("value")
                .or_else(|| path.get("path"))
                .and_then(Value::as_str)
                .ok_or(JsonError::Field("path.value"))?;
            if !p.starts_with('/') {
                return Err(JsonError::Value {
                    field: "path.value",
                    value: p.to_owned(),
                });
            }
            FsPath::Plain(PathBuf::from(p))
        }
        other => {
            return Err(JsonError::Value {
                field: "path.type",
                value: other.to_owned(),
            });
        }
    };
    Ok(FsEntry { path, access })
}

fn anonymous(fs: FsPolicy, network: NetworkPolicy) -> Profile {
    Profile {
        name: None,
        fs,
        network,
        protected_subpaths: default_protected(),
        env: EnvPolicy::default(),
        rlimits: Rlimits::default(),
    }
}

impl PermissionProfileJson {
    /// Interprets a `PermissionProfile` value, keeping it as the original.
    ///
    /// # Errors
    /// [`JsonError::Field`] / [`JsonError::Value`] naming the field that is missing or unsupported.
    pub fn from_value(original: Value) -> Result<Self, JsonError> {
        let kind_name = str_field(&original, "type")?;
        let (kind, fs) = match kind_name {
            "disabled" => (JsonProfileKind::Disabled, FsPolicy::Unrestricted),
            "external" => (
                JsonProfileKind::External,
                FsPolicy::Restricted(vec![FsEntry {
                    path: FsPath::Special(SpecialPath::Root),
                    access: Access::Read,
                }]),
            ),
            "managed" => (JsonProfileKind::Managed, managed_fs(&original)?),
            other => {
                return Err(JsonError::Value {
                    field: "type",
                    value: other.to_owned(),
                });
            }
        };
        let net = if kind == JsonProfileKind::Disabled {
            NetworkPolicy::Enabled
        } else {
            network(&original)?
        };
        let profile = anonymous(fs, net);
        let unknown_kinds = match &profile.fs {
            FsPolicy::Restricted(entries) => entries
                .iter()
                .filter_map(|e| match &e.path {
                    FsPath::Special(SpecialPath::Unknown(k)) => Some(k.clone()),
                    _ => None,
                })
                .collect(),
            FsPolicy::Unrestricted => Vec::new(),
        };
        Ok(Self {
            original,
            kind,
            profile,
            unknown_kinds,
        })
    }
}

fn managed_fs(v: &Value) -> Result<FsPolicy, JsonError> {
    let fs = v
        .get("file_system")
        .ok_or(JsonError::Field("file_system"))?;
    match str_field(fs, "type")? {
        "unrestricted" => Ok(FsPolicy::Unrestricted),
        "restricted" => {
            let entries = fs
                .get("entries")
                .and_then(Value::as_array)
                .ok_or(JsonError::Field("file_system.entries"))?;
            Ok(FsPolicy::Restricted(
                entries.iter().map(entry).collect::<Result<_, _>>()?,
            ))
        }
        other => Err(JsonError::Value {
            field: "file_system.type",
            value: other.to_owned(),
        }),
    }
}

/// A parsed Codex sandbox state, with its original value and text.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxState {
    /// The value exactly as received.
    pub original: Value,
    /// The text it was parsed from, when parsed from text (forward this, byte for byte).
    pub original_text: Option<String>,
    /// `permissionProfile`.
    pub permission_profile: PermissionProfileJson,
    /// `sandboxCwd`, as a native absolute path.
    pub sandbox_cwd: PathBuf,
    /// `codexLinuxSandboxExe`, when present and not null (informational).
    pub codex_linux_sandbox_exe: Option<String>,
    /// `useLegacyLandlock` (informational; outpost always uses its own Landlock layer).
    pub use_legacy_landlock: bool,
}

impl SandboxState {
    /// Parses sandbox-state JSON text.
    ///
    /// # Errors
    /// [`JsonError::Syntax`] for invalid JSON, else as [`SandboxState::from_value`].
    pub fn parse(text: &str) -> Result<Self, JsonError> {
        let value: Value = serde_json::from_str(text).map_err(JsonError::Syntax)?;
        let mut state = Self::from_value(value)?;
        state.original_text = Some(text.to_owned());
        Ok(state)
    }

    /// Interprets a sandbox-state value, keeping it as the original.
    ///
    /// # Errors
    /// [`JsonError::Field`] when `permissionProfile` or `sandboxCwd` is missing, [`JsonError::Cwd`] when
    /// `sandboxCwd` is not absolute or not a local `file://` URL.
    pub fn from_value(original: Value) -> Result<Self, JsonError> {
        let profile = original
            .get("permissionProfile")
            .ok_or(JsonError::Field("permissionProfile"))?;
        let permission_profile = PermissionProfileJson::from_value(profile.clone())?;
        let sandbox_cwd = native_cwd(str_field(&original, "sandboxCwd")?)?;
        let codex_linux_sandbox_exe = original
            .get("codexLinuxSandboxExe")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let use_legacy_landlock = original
            .get("useLegacyLandlock")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        Ok(Self {
            original,
            original_text: None,
            permission_profile,
            sandbox_cwd,
            codex_linux_sandbox_exe,
            use_legacy_landlock,
        })
    }

    /// The state as one string for forwarding: the original text when known, else the original value
    /// serialized (which preserves every field, known or not).
    pub fn forwardable(&self) -> String {
        self.original_text
            .clone()
            .unwrap_or_else(|| self.original.to_string())
    }
}

/// Turns `file:///abs/dir` (percent-decoded, host empty or `localhost`) or `/abs/dir` into a path.
fn native_cwd(raw: &str) -> Result<PathBuf, JsonError> {
    let bad = || JsonError::Cwd(raw.to_owned());
    let path = if let Some(rest) = raw.strip_prefix("file://") {
        let rest = rest.strip_prefix("localhost").unwrap_or(rest);
        if !rest.starts_with('/') {
            return Err(bad());
        }
        percent_decode(rest).ok_or_else(bad)?
    } else if raw.starts_with('/') {
        raw.to_owned()
    } else {
        return Err(bad());
    };
    if path.split('/').any(|c| c == "..") {
        return Err(bad());
    }
    Ok(PathBuf::from(path))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|s| !s.contains('\0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANAGED: &str = r#"{"type":"managed","file_system":{"type":"restricted","entries":[{"path":{"type":"special","value":{"kind":"project_roots"}},"access":"write"},{"path":{"type":"special","value":{"kind":"root"}},"access":"read"},{"path":{"type":"special","value":{"kind":"quantum"}},"access":"read"}]},"network":"restricted"}"#;

    #[test]
    fn managed_profile() {
        let v: Value = serde_json::from_str(MANAGED).unwrap();
        let p = PermissionProfileJson::from_value(v.clone()).unwrap();
        assert_eq!(p.kind, JsonProfileKind::Managed);
        assert_eq!(p.original, v);
        assert_eq!(p.unknown_kinds, vec!["quantum".to_owned()]);
        assert_eq!(p.profile.network, NetworkPolicy::Restricted);
        assert!(p.profile.name.is_none());
    }

    #[test]
    fn disabled_and_external() {
        let d = PermissionProfileJson::from_value(serde_json::json!({"type":"disabled"})).unwrap();
        assert!(d.profile.is_unsandboxed());
        let e = PermissionProfileJson::from_value(
            serde_json::json!({"type":"external","network":"enabled"}),
        )
        .unwrap();
        assert_eq!(e.kind, JsonProfileKind::External);
        assert_eq!(e.profile.network, NetworkPolicy::Enabled);
        assert!(!e.profile.is_unsandboxed());
        assert!(PermissionProfileJson::from_value(serde_json::json!({"type":"weird"})).is_err());
    }

    #[test]
    fn state_keeps_original_text() {
        let text = format!(
            r#"{{"permissionProfile":{MANAGED},"sandboxCwd":"file:///work/my%20dir","codexLinuxSandboxExe":null,"useLegacyLandlock":false,"futureField":[1,2]}}"#
        );
        let s = SandboxState::parse(&text).unwrap();
        assert_eq!(s.sandbox_cwd, PathBuf::from("/work/my dir"));
        assert_eq!(s.forwardable(), text);
        assert_eq!(s.original["futureField"], serde_json::json!([1, 2]));
    }

    #[test]
    fn state_errors() {
        assert!(matches!(
            SandboxState::parse("{"),
            Err(JsonError::Syntax(_))
        ));
        let p = r#"{"type":"disabled"}"#;
        for cwd in [
            "relative/dir",
            "http://x/y",
            "file://host/dir",
            "file:///a/../b",
        ] {
            let text = format!(r#"{{"permissionProfile":{p},"sandboxCwd":"{cwd}"}}"#);
            assert!(
                matches!(SandboxState::parse(&text), Err(JsonError::Cwd(_))),
                "{cwd}"
            );
        }
        let text = r#"{"sandboxCwd":"/x"}"#;
        assert!(matches!(
            SandboxState::parse(text),
            Err(JsonError::Field("permissionProfile"))
        ));
    }
}
