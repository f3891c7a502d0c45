//! Lazy generation of probes: ancestors of the normalized cwd (prefixes of it, so no allocation but the
//! probe path), nearest first, markers in configured order within each directory.

use super::spec::FindUpSpec;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    pub(super) seq: u32,
    pub(super) dir_end: usize,
    pub(super) marker_index: usize,
    pub(super) path: String,
    pub(super) last: bool,
}

impl Probe {
    /// Position of this probe in probe order, from 0.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// The absolute path to stat (`dir/marker`), following symlinks.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Index of the probed marker in [`FindUpSpec::markers`].
    pub fn marker_index(&self) -> usize {
        self.marker_index
    }

    /// Whether this is the last probe of the walk.
    pub fn is_last(&self) -> bool {
        self.last
    }
}

/// Position in the probe sequence: the current ancestor (a prefix of the normalized cwd) and marker.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Cursor {
    seq: u32,
    /// Length of the current ancestor prefix of `cwd`; `None` before the first probe.
    dir_end: Option<usize>,
    marker_index: usize,
    done: bool,
}

impl Cursor {
    pub(super) fn next(&mut self, spec: &FindUpSpec) -> Option<Probe> {
        if self.done {
            return None;
        }
        let dir_end = *self.dir_end.get_or_insert(spec.cwd.len());
        let dir = &spec.cwd[..dir_end];
        let marker = &spec.markers[self.marker_index];
        let path = if dir == "/" {
            format!("/{marker}")
        } else {
            format!("{dir}/{marker}")
        };
        let last_marker = self.marker_index + 1 == spec.markers.len();
        let last = last_marker && spec.is_last_dir(dir);
        let probe = Probe {
            seq: self.seq,
            dir_end,
            marker_index: self.marker_index,
            path,
            last,
        };
        self.seq = self.seq.saturating_add(1);
        if last {
            self.done = true;
        } else if last_marker {
            self.marker_index = 0;
            // The parent of "/a" is "/" (prefix length 1); of "/a/b" it is "/a".
            self.dir_end = Some(dir.rfind('/').map_or(1, |slash| slash.max(1)));
        } else {
            self.marker_index += 1;
        }
        Some(probe)
    }
}

/// Lazy iterator over the probes of a [`FindUpSpec`], in probe order.
#[derive(Debug, Clone)]
pub struct Probes<'a> {
    pub(super) spec: &'a FindUpSpec,
    pub(super) cursor: Cursor,
}

impl Iterator for Probes<'_> {
    type Item = Probe;

    fn next(&mut self) -> Option<Probe> {
        self.cursor.next(self.spec)
    }
}
