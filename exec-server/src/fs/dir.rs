//! ReadDirectory: entries sorted by name (byte order), kinds without following symlinks, paged.
//!
//! The page token is the last name of the previous page, hex-encoded so that any byte string (names need
//! not be UTF-8) travels safely in the proto `string`. A page holds the names strictly greater than the
//! token, so every entry that exists throughout the listing is returned exactly once even when other
//! entries are created or removed between pages.

use std::ffi::OsString;
use std::fs;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::Path;

use outpost_proto::pb;

use super::error::FsError;
use super::ops::file_kind;

/// The longest valid token: a 255-byte name (`NAME_MAX`) in hex.
const MAX_TOKEN_CHARS: usize = 2 * 255;

/// Decodes a page token; the empty token starts at the first entry.
pub(crate) fn decode_page_token(token: &str) -> Result<Option<Vec<u8>>, FsError> {
    if token.is_empty() {
        return Ok(None);
    }
    let malformed = FsError::InvalidArgument {
        field: "page_token",
        reason: "malformed; pass back the next_page_token of the previous page",
    };
    if token.len() > MAX_TOKEN_CHARS || !token.len().is_multiple_of(2) {
        return Err(malformed);
    }
    let digits: Option<Vec<u8>> = token
        .as_bytes()
        .chunks_exact(2)
        .map(|pair| {
            let high = char::from(pair[0]).to_digit(16)?;
            let low = char::from(pair[1]).to_digit(16)?;
            u8::try_from(high * 16 + low).ok()
        })
        .collect();
    digits.map(Some).ok_or(malformed)
}

/// Encodes the last name of a page as the next page token.
pub(crate) fn encode_page_token(name: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut token = String::with_capacity(2 * name.len());
    for byte in name {
        token.push(char::from(HEX[usize::from(byte >> 4)]));
        token.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    token
}

/// Lists the entries of `path` after `after` (exclusive), at most `page_size` of them.
pub(crate) fn read_directory(
    path: &Path,
    after: Option<&[u8]>,
    page_size: usize,
) -> Result<pb::ReadDirectoryResponse, FsError> {
    let reader = fs::read_dir(path).map_err(|e| FsError::io("read directory", path, e))?;
    let mut entries = Vec::new();
    for entry in reader {
        let entry = entry.map_err(|e| FsError::io("read directory", path, e))?;
        let name = entry.file_name();
        if after.is_some_and(|after| name.as_bytes() <= after) {
            continue;
        }
        match entry.file_type() {
            Ok(file_type) => entries.push((name, file_kind(file_type))),
            // Removed since readdir returned it: it is simply not part of this listing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FsError::io("stat", entry.path(), e)),
        }
    }
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let more = entries.len() > page_size;
    entries.truncate(page_size);
    let next_page_token = match (more, entries.last()) {
        (true, Some((name, _))) => encode_page_token(name.as_bytes()),
        _ => String::new(),
    };
    Ok(pb::ReadDirectoryResponse {
        entries: entries.into_iter().map(to_entry).collect(),
        next_page_token,
    })
}

fn to_entry((name, kind): (OsString, pb::FileKind)) -> pb::DirectoryEntry {
    let (name, raw_name) = match name.into_string() {
        Ok(name) => (name, Vec::new()),
        Err(raw) => {
            let raw = raw.into_vec();
            (String::from_utf8_lossy(&raw).into_owned(), raw)
        }
    };
    pb::DirectoryEntry {
        name,
        kind: kind.into(),
        raw_name,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::ffi::OsStr;
    use std::os::unix::fs::symlink;

    use super::*;

    fn read_all(path: &Path, page_size: usize) -> (Vec<pb::DirectoryEntry>, usize) {
        let mut all = Vec::new();
        let mut token = String::new();
        let mut pages = 0;
        loop {
            let after = decode_page_token(&token).unwrap();
            let page = read_directory(path, after.as_deref(), page_size).unwrap();
            pages += 1;
            assert!(page.entries.len() <= page_size);
            all.extend(page.entries);
            if page.next_page_token.is_empty() {
                return (all, pages);
            }
            token = page.next_page_token;
        }
    }

    #[test]
    fn pages_return_each_entry_exactly_once_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..2500 {
            fs::write(dir.path().join(format!("entry-{i:05}")), b"").unwrap();
        }
        let (all, pages) = read_all(dir.path(), 1000);
        assert_eq!(pages, 3);
        assert_eq!(all.len(), 2500);
        let names: HashSet<&str> = all.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names.len(), 2500);
        assert!(all.windows(2).all(|w| w[0].name < w[1].name));
        // An exact multiple of the page size ends without an empty trailing page.
        let (all, pages) = read_all(dir.path(), 500);
        assert_eq!((all.len(), pages), (2500, 5));
    }

    #[test]
    fn kinds_do_not_follow_symlinks_and_raw_names_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("d")).unwrap();
        fs::write(dir.path().join("f"), b"").unwrap();
        symlink(dir.path().join("d"), dir.path().join("l")).unwrap();
        let raw = b"bad-\xff-name".to_vec();
        fs::write(dir.path().join(OsStr::from_bytes(&raw)), b"").unwrap();

        let (all, _) = read_all(dir.path(), 2);
        let summary: Vec<(&str, pb::FileKind, bool)> = all
            .iter()
            .map(|e| (e.name.as_str(), e.kind(), e.raw_name.is_empty()))
            .collect();
        assert_eq!(
            summary,
            [
                ("bad-\u{fffd}-name", pb::FileKind::File, false),
                ("d", pb::FileKind::Directory, true),
                ("f", pb::FileKind::File, true),
                ("l", pb::FileKind::Symlink, true),
            ]
        );
        assert_eq!(all[0].raw_name, raw);
    }

    #[test]
    fn tokens_round_trip_and_reject_garbage() {
        let name = b"\x00\xffa/b".to_vec();
        let token = encode_page_token(&name);
        assert_eq!(decode_page_token(&token).unwrap(), Some(name));
        assert_eq!(decode_page_token("").unwrap(), None);
        for bad in ["zz", "abc", "+1", &"00".repeat(256)] {
            let error = decode_page_token(bad).unwrap_err();
            assert!(
                error.to_string().starts_with("page_token: malformed"),
                "{error}"
            );
        }
    }

    #[test]
    fn missing_or_non_directory_fails() {
        let dir = tempfile::tempdir().unwrap();
        let code = |p: &Path| tonic::Status::from(read_directory(p, None, 10).unwrap_err()).code();
        assert_eq!(code(&dir.path().join("nope")), tonic::Code::NotFound);
        fs::write(dir.path().join("f"), b"").unwrap();
        assert_eq!(code(&dir.path().join("f")), tonic::Code::FailedPrecondition);
    }
}
