//! Validation of the absolute paths that travel on the wire.
//!
//! Every path in `outpost.v1` is an absolute UTF-8 string of at most [`MAX_PATH_BYTES`] bytes without NUL.
//! The server checks this once at the boundary, and a client may check it before sending. The caller
//! prefixes the problem with the field name (`path: must be absolute`).

use thiserror::Error;

/// The longest path accepted on the wire, in bytes (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// Why a wire path was rejected. The message completes `"<field>: "`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PathProblem {
    /// The path is the empty string.
    #[error("must not be empty")]
    Empty,
    /// The path does not start with `/`.
    #[error("must be absolute")]
    NotAbsolute,
    /// The path is longer than [`MAX_PATH_BYTES`].
    #[error("must be at most {MAX_PATH_BYTES} bytes, got {0}")]
    TooLong(usize),
    /// The path contains a NUL byte.
    #[error("must not contain NUL")]
    ContainsNul,
    /// The path contains a `..` component where only a lexical walk is meaningful.
    #[error("must not contain '..' components")]
    ParentComponent,
}

/// Checks that `path` is a non-empty absolute path of at most [`MAX_PATH_BYTES`] bytes without NUL.
///
/// # Errors
///
/// Returns the first [`PathProblem`] found.
pub fn check_absolute(path: &str) -> Result<(), PathProblem> {
    if path.is_empty() {
        return Err(PathProblem::Empty);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(PathProblem::TooLong(path.len()));
    }
    if path.contains('\0') {
        return Err(PathProblem::ContainsNul);
    }
    if !path.starts_with('/') {
        return Err(PathProblem::NotAbsolute);
    }
    Ok(())
}

/// Checks `path` like [`check_absolute`] and returns its lexical normal form: repeated separators, `.`
/// components and a trailing separator removed (`//a/./b/` becomes `/a/b`). No filesystem access, so
/// symlinks keep their spelling.
///
/// # Errors
///
/// Returns a [`PathProblem`] when the path is invalid or contains a `..` component: resolving `..`
/// lexically is wrong when the component before it is a symlink, and resolving it on the filesystem would
/// not be lexical, so such paths are refused.
pub fn normalize_lexically(path: &str) -> Result<String, PathProblem> {
    check_absolute(path)?;
    let mut out = String::with_capacity(path.len());
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => return Err(PathProblem::ParentComponent),
            name => {
                out.push('/');
                out.push_str(name);
            }
        }
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_absolute_rejects_bad_paths() {
        assert_eq!(check_absolute(""), Err(PathProblem::Empty));
        assert_eq!(check_absolute("a/b"), Err(PathProblem::NotAbsolute));
        assert_eq!(check_absolute("/a\0b"), Err(PathProblem::ContainsNul));
        let long = format!("/{}", "a".repeat(MAX_PATH_BYTES));
        assert_eq!(check_absolute(&long), Err(PathProblem::TooLong(long.len())));
        assert_eq!(check_absolute("/"), Ok(()));
        let max = format!("/{}", "a".repeat(MAX_PATH_BYTES - 1));
        assert_eq!(check_absolute(&max), Ok(()));
    }

    #[test]
    fn normalize_removes_redundant_parts_only() {
        assert_eq!(normalize_lexically("/").unwrap(), "/");
        assert_eq!(normalize_lexically("//").unwrap(), "/");
        assert_eq!(normalize_lexically("/./.").unwrap(), "/");
        assert_eq!(normalize_lexically("//a//./b/").unwrap(), "/a/b");
        assert_eq!(normalize_lexically("/a/.b/..c").unwrap(), "/a/.b/..c");
        assert_eq!(
            normalize_lexically("/a/../b"),
            Err(PathProblem::ParentComponent)
        );
        assert_eq!(normalize_lexically("a"), Err(PathProblem::NotAbsolute));
    }

    #[test]
    fn messages_complete_a_field_prefix() {
        assert_eq!(PathProblem::NotAbsolute.to_string(), "must be absolute");
        assert_eq!(
            PathProblem::TooLong(5000).to_string(),
            "must be at most 4096 bytes, got 5000"
        );
    }
}
