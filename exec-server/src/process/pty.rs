//! Pseudo-terminals for `tty` processes: the master side as an async byte stream, resize by ioctl.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;

/// The parent's side of a pseudo-terminal.
#[derive(Debug)]
pub(crate) struct PtyMaster {
    fd: AsyncFd<OwnedFd>,
}

/// A fresh terminal pair: the master for us, the slave for the child's stdio.
pub(crate) fn open(rows: u16, cols: u16) -> io::Result<(PtyMaster, OwnedFd)> {
    let size = nix::pty::Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pair = nix::pty::openpty(Some(&size), None).map_err(io::Error::from)?;
    set_nonblocking(&pair.master)?;
    set_cloexec(&pair.master)?;
    // SAFETY: the OwnedFd is moved into the AsyncFd, which owns it until drop; nothing else closes or
    // replaces that descriptor while it is registered.
    let fd = unsafe { AsyncFd::register(pair.master)? };
    Ok((PtyMaster { fd }, pair.slave))
}

fn set_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).map_err(io::Error::from)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK)).map_err(io::Error::from)?;
    Ok(())
}

fn set_cloexec(fd: &OwnedFd) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).map_err(io::Error::from)?;
    Ok(())
}

impl PtyMaster {
    /// Reads what the child wrote; `Ok(0)` once the terminal is gone (EIO after the child exits).
    pub(crate) async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.fd.readable().await?;
            match guard.try_io(|fd| nix::unistd::read(fd.get_ref(), buf).map_err(io::Error::from)) {
                Ok(Ok(n)) => return Ok(n),
                Ok(Err(e)) if e.raw_os_error() == Some(libc::EIO) => return Ok(0),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    /// Writes all of `data` as terminal input.
    pub(crate) async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.fd.writable().await?;
            match guard.try_io(|fd| nix::unistd::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }

    /// Sets the terminal size; the child gets SIGWINCH.
    pub(crate) fn resize(&self, rows: u16, cols: u16) -> io::Result<()> {
        let size = libc::winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        // SAFETY: TIOCSWINSZ reads one winsize struct from a valid pointer; the fd is our open master.
        let ret = unsafe { libc::ioctl(self.fd.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &size) };
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    /// Sends end-of-file (the terminal's EOF character) to the child.
    pub(crate) async fn send_eof(&self) -> io::Result<()> {
        self.write_all(&[0x04]).await
    }
}
