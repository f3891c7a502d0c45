//! Validation of Start requests at the boundary: every field is hostile input until checked here.

use std::path::PathBuf;
use std::time::Duration;

use outpost_proto::pb;

use super::error::ProcessError;

/// Longest accepted path, as for filesystem calls.
const MAX_PATH_BYTES: usize = 4096;
/// Upper bound on argv + env bytes (the kernel's own limit is about 2 MiB).
const MAX_ARG_ENV_BYTES: usize = 1024 * 1024;
/// Longest caller-chosen process id.
const MAX_PROCESS_ID: usize = 128;
/// Largest terminal dimension accepted.
const MAX_TTY_DIM: u32 = 10_000;

/// A validated Start request (the sandbox fields are checked when the launch is prepared).
#[derive(Debug, Clone)]
pub(crate) struct StartSpec {
    pub(crate) process_id: String,
    pub(crate) argv: Vec<String>,
    pub(crate) cwd: PathBuf,
    pub(crate) tty: Option<(u16, u16)>,
    pub(crate) pipe_stdin: bool,
    pub(crate) arg0: Option<String>,
    pub(crate) timeout: Option<Duration>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> ProcessError {
    ProcessError::Invalid {
        field,
        reason: reason.into(),
    }
}

/// Checks a process id (caller-chosen ids must be printable and short).
pub(crate) fn process_id(id: &str) -> Result<(), ProcessError> {
    if id.len() > MAX_PROCESS_ID
        || !id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:".contains(&b))
    {
        return Err(invalid(
            "process_id",
            "must be at most 128 characters of [A-Za-z0-9._:-]",
        ));
    }
    Ok(())
}

impl StartSpec {
    /// Validates `req`; `generated_id` is used when the caller chose none.
    pub(crate) fn from_request(
        req: &pb::StartRequest,
        generated_id: impl FnOnce() -> String,
    ) -> Result<Self, ProcessError> {
        process_id(&req.process_id)?;
        if req.argv.is_empty() || req.argv[0].is_empty() {
            return Err(invalid("argv", "must name a program (argv[0] is empty)"));
        }
        if req.argv.iter().any(|a| a.contains('\0')) {
            return Err(invalid("argv", "must not contain NUL bytes"));
        }
        if !req.cwd.starts_with('/') || req.cwd.len() > MAX_PATH_BYTES || req.cwd.contains('\0') {
            return Err(invalid(
                "cwd",
                "must be an absolute path of at most 4096 bytes without NUL",
            ));
        }
        for (k, v) in &req.env {
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(invalid(
                    "env",
                    format!(
                        "invalid variable {k:?}: names must be non-empty without '=' or NUL, values without NUL"
                    ),
                ));
            }
        }
        let size: usize = req.argv.iter().map(|a| a.len() + 1).sum::<usize>()
            + req
                .env
                .iter()
                .map(|(k, v)| k.len() + v.len() + 2)
                .sum::<usize>();
        if size > MAX_ARG_ENV_BYTES {
            return Err(invalid(
                "env",
                format!("argv and env take {size} bytes; the limit is {MAX_ARG_ENV_BYTES}"),
            ));
        }
        if req.arg0.as_deref().is_some_and(|a| a.contains('\0')) {
            return Err(invalid("arg0", "must not contain NUL bytes"));
        }
        let tty = match &req.tty {
            None => None,
            Some(size)
                if (1..=MAX_TTY_DIM).contains(&size.rows)
                    && (1..=MAX_TTY_DIM).contains(&size.cols) =>
            {
                Some((
                    u16::try_from(size.rows).unwrap_or(24),
                    u16::try_from(size.cols).unwrap_or(80),
                ))
            }
            Some(_) => return Err(invalid("tty", "rows and cols must be between 1 and 10000")),
        };
        let timeout = match req.timeout_ms {
            Some(0) => return Err(invalid("timeout_ms", "must be positive when set")),
            other => other.map(Duration::from_millis),
        };
        Ok(Self {
            process_id: if req.process_id.is_empty() {
                generated_id()
            } else {
                req.process_id.clone()
            },
            argv: req.argv.clone(),
            cwd: PathBuf::from(&req.cwd),
            tty,
            pipe_stdin: req.pipe_stdin || req.tty.is_some(),
            arg0: req.arg0.clone(),
            timeout,
        })
    }
}

/// Terminal size from a Resize request.
pub(crate) fn tty_size(size: Option<&pb::TtySize>) -> Result<(u16, u16), ProcessError> {
    match size {
        Some(s) if (1..=MAX_TTY_DIM).contains(&s.rows) && (1..=MAX_TTY_DIM).contains(&s.cols) => {
            Ok((
                u16::try_from(s.rows).unwrap_or(24),
                u16::try_from(s.cols).unwrap_or(80),
            ))
        }
        _ => Err(invalid("size", "rows and cols must be between 1 and 10000")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> pb::StartRequest {
        pb::StartRequest {
            argv: vec!["true".into()],
            cwd: "/".into(),
            ..Default::default()
        }
    }

    fn field_of(r: pb::StartRequest) -> &'static str {
        match StartSpec::from_request(&r, || "p".into()) {
            Err(ProcessError::Invalid { field, .. }) => field,
            other => panic!("expected invalid, got {other:?}"),
        }
    }

    #[test]
    fn hostile_fields_are_named() {
        assert_eq!(
            field_of(pb::StartRequest {
                argv: vec![],
                ..req()
            }),
            "argv"
        );
        assert_eq!(
            field_of(pb::StartRequest {
                argv: vec!["a\0b".into()],
                ..req()
            }),
            "argv"
        );
        assert_eq!(
            field_of(pb::StartRequest {
                cwd: "rel".into(),
                ..req()
            }),
            "cwd"
        );
        let mut r = req();
        r.env.insert("A=B".into(), "x".into());
        assert_eq!(field_of(r), "env");
        let mut r = req();
        r.env.insert("BIG".into(), "x".repeat(2 * 1024 * 1024));
        assert_eq!(field_of(r), "env");
        assert_eq!(
            field_of(pb::StartRequest {
                process_id: "../x y".into(),
                ..req()
            }),
            "process_id"
        );
        assert_eq!(
            field_of(pb::StartRequest {
                tty: Some(pb::TtySize { rows: 0, cols: 80 }),
                ..req()
            }),
            "tty"
        );
        assert_eq!(
            field_of(pb::StartRequest {
                timeout_ms: Some(0),
                ..req()
            }),
            "timeout_ms"
        );
    }

    #[test]
    fn tty_implies_stdin() {
        let spec = StartSpec::from_request(
            &pb::StartRequest {
                tty: Some(pb::TtySize { rows: 24, cols: 80 }),
                ..req()
            },
            || "p".into(),
        )
        .unwrap();
        assert!(spec.pipe_stdin);
        assert_eq!(spec.process_id, "p");
    }
}
