//! The local terminal for `outpost exec --tty`: raw mode for the duration of the command (restored on
//! drop, also on error paths) and the window size.

use std::os::fd::{AsFd, BorrowedFd};

use anyhow::Context;
use nix::sys::termios::{self, SetArg, Termios};

/// Raw mode on stdin until dropped.
pub(crate) struct RawTerminal {
    saved: Termios,
}

impl std::fmt::Debug for RawTerminal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RawTerminal")
    }
}

fn stdin_fd() -> BorrowedFd<'static> {
    // SAFETY: fd 0 stays open for the life of the process; we never close it.
    unsafe { BorrowedFd::borrow_raw(0) }
}

impl RawTerminal {
    /// Switches stdin to raw mode.
    pub(crate) fn enter() -> anyhow::Result<Self> {
        let fd = stdin_fd();
        let saved = termios::tcgetattr(fd.as_fd()).context("--tty needs a terminal on stdin")?;
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        termios::tcsetattr(fd, SetArg::TCSANOW, &raw)
            .context("cannot switch the terminal to raw mode")?;
        Ok(Self { saved })
    }

    /// The terminal size (rows, cols), 24x80 when unknown.
    pub(crate) fn size(&self) -> (u16, u16) {
        current_size().unwrap_or((24, 80))
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        let _ = termios::tcsetattr(stdin_fd(), SetArg::TCSANOW, &self.saved);
    }
}

/// The size of the terminal on stdin.
pub(crate) fn current_size() -> Option<(u16, u16)> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the valid pointer we pass.
    let ret = unsafe { libc::ioctl(0, libc::TIOCGWINSZ, &mut ws) };
    (ret == 0 && ws.ws_row > 0).then_some((ws.ws_row, ws.ws_col))
}
