//! The few fields of `/proc/PID/stat` the tests and the bench look at.

/// A process as `/proc/PID/stat` describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// State letter (`R`, `S`, `Z`, ...).
    pub state: char,
    /// Parent pid.
    pub ppid: u32,
    /// Process group id.
    pub pgrp: u32,
}

impl ProcStat {
    /// Whether the process has exited but not been reaped.
    pub fn is_zombie(&self) -> bool {
        self.state == 'Z'
    }
}

/// Reads `pid`'s stat; `None` when the process is gone or the file is unreadable.
pub fn stat(pid: u32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`; comm may hold spaces and parentheses.
    let mut fields = text[text.rfind(')')? + 1..].split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some(ProcStat { state, ppid, pgrp })
}

/// Every process currently listed in `/proc`, with its stat.
pub fn processes() -> impl Iterator<Item = (u32, ProcStat)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = stat(std::process::id()).expect("own stat");
        assert_eq!(me.ppid, std::os::unix::process::parent_id());
        assert!(!me.is_zombie());
        assert!(processes().any(|(pid, _)| pid == std::process::id()));
    }
}
