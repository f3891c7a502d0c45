//! The mount-namespace layer, run in the child before Landlock: a private mount namespace (inside a new
//! user namespace when not root) where
//! 1. the whole tree is made read-only (Landlock does not cover chmod, chown, xattrs or utimes, which
//!    a process may apply to files it owns; as root that is every system file) and `nodev` except for
//!    `/dev` (where Landlock admits only the allowed device nodes),
//! 2. each writable root is bind-mounted onto itself and made writable again,
//! 3. protected subpaths (`.git`, `.codex`, `.agents`) are bind-mounted read-only (renaming them away then
//!    fails with `EBUSY`),
//! 4. denied directories get an empty read-only tmpfs with mode 000, denied files a read-only, `nodev`
//!    bind of `/dev/null` (so opening them fails with `EACCES`),
//! 5. the working directory (whatever the spawner set) is re-entered so it refers to the new mounts.
//!
//! Everything is prepared as C strings before fork (`MountPlan::new`); applying the plan in the child
//! only makes syscalls.

use std::ffi::{CString, NulError};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::child::{Step, check};
use crate::resolve::ResolvedPolicy;

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NODEV: u64 = 0x4;

/// Control sockets of host daemons that would give uid 0 the host (containers, the system bus,
/// systemd). Hidden in root launches whose network is enabled (restricted ones cannot connect).
pub const ROOT_HIDDEN_SOCKETS: [&str; 9] = [
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/crio/crio.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
    "/run/systemd/private",
    "/run/systemd/io.systemd.ManagedOOM",
];

/// `struct mount_attr` from `<linux/mount.h>` (not in the libc crate).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// Failure to prepare the mount plan.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MountError {
    /// A path contains a NUL byte.
    #[error("path {path} contains a NUL byte")]
    Nul {
        /// The path.
        path: PathBuf,
        /// The conversion error.
        #[source]
        source: NulError,
    },
}

/// User namespace set-up for unprivileged launches: identity maps for the caller's uid and gid.
#[derive(Debug)]
struct UserNs {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

/// Everything the child needs for the mount layer, allocated before fork.
#[derive(Debug)]
pub(crate) struct MountPlan {
    userns: Option<UserNs>,
    read_only_system: bool,
    writable: Vec<CString>,
    protected: Vec<CString>,
    denied_dirs: Vec<CString>,
    denied_files: Vec<CString>,
    cwd: CString,
    denied: Vec<PathBuf>,
}

fn cstr(p: &Path) -> Result<CString, MountError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|source| MountError::Nul {
        path: p.to_owned(),
        source,
    })
}

fn cstrs<'a>(paths: impl Iterator<Item = &'a PathBuf>) -> Result<Vec<CString>, MountError> {
    paths.map(|p| cstr(p)).collect()
}

impl MountPlan {
    /// Prepares the plan. With `userns` the namespace is created inside a new user namespace that
    /// maps the caller's ids onto themselves (no `CAP_SYS_ADMIN` needed). `read_only_system` adds the
    /// read-only remount of everything but the writable roots (for uid 0).
    pub(crate) fn new(
        policy: &ResolvedPolicy,
        userns: bool,
        read_only_system: bool,
    ) -> Result<Self, MountError> {
        let userns = userns.then(|| {
            // SAFETY: getuid/getgid cannot fail and touch no memory.
            let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
            UserNs {
                uid_map: format!("{uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            }
        });
        let existing = |p: &&PathBuf| p.exists();
        let mut denied: Vec<PathBuf> = policy.denied.iter().filter(existing).cloned().collect();
        if read_only_system && !policy.network_restricted() {
            // With the network enabled connect() is allowed, and uid 0 passes these sockets'
            // permission checks: hide the host daemons' control sockets.
            for socket in ROOT_HIDDEN_SOCKETS.iter().map(PathBuf::from) {
                if socket.exists() && !denied.contains(&socket) {
                    denied.push(socket);
                }
            }
        }
        let (dirs, files): (Vec<&PathBuf>, Vec<&PathBuf>) = denied.iter().partition(|p| p.is_dir());
        Ok(Self {
            denied: denied.clone(),
            userns,
            // A writable `/` would be shadowed: the process root stays on the read-only original.
            read_only_system: read_only_system
                && !policy.writable.iter().any(|p| p == Path::new("/")),
            writable: cstrs(policy.writable.iter().filter(existing))?,
            protected: cstrs(policy.protected.iter())?,
            denied_dirs: cstrs(dirs.into_iter())?,
            denied_files: cstrs(files.into_iter())?,
            cwd: cstr(&policy.cwd)?,
        })
    }

    /// Every path the plan hides (policy denies plus, for root, host daemon sockets).
    pub(crate) fn denied(&self) -> &[PathBuf] {
        &self.denied
    }

    /// Whether everything outside the writable roots is remounted read-only.
    pub(crate) fn read_only_system(&self) -> bool {
        self.read_only_system
    }

    /// Whether the plan uses a user namespace.
    pub(crate) fn uses_userns(&self) -> bool {
        self.userns.is_some()
    }

    /// Runs the plan in the child. Async-signal-safe: syscalls on prepared data only.
    pub(crate) fn apply(&self) -> std::io::Result<()> {
        // The directory the spawner chose (`Command::current_dir` runs before pre_exec hooks).
        let cwd_buf = CwdBuf::current();
        let mut flags = libc::CLONE_NEWNS;
        if self.userns.is_some() {
            flags |= libc::CLONE_NEWUSER;
        }
        // SAFETY: unshare takes a flags word only.
        check(Step::Unshare, unsafe { libc::unshare(flags) })?;
        if let Some(ns) = &self.userns {
            write_file(c"/proc/self/setgroups", b"deny", Step::UidMap)?;
            write_file(c"/proc/self/uid_map", &ns.uid_map, Step::UidMap)?;
            write_file(c"/proc/self/gid_map", &ns.gid_map, Step::UidMap)?;
        }
        // Keep our mounts from propagating back to the host namespace.
        mount(
            None,
            c"/",
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            Step::MakePrivate,
        )?;
        if self.read_only_system {
            let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV;
            set_attr(c"/", true, attrs, 0, Step::ReadOnlySystem)?;
            // Devices stay usable under /dev only, where Landlock admits just the allowed nodes.
            let rec_bind = libc::MS_BIND | libc::MS_REC;
            mount(Some(c"/dev"), c"/dev", None, rec_bind, Step::Devices)?;
            set_attr(c"/dev", true, 0, MOUNT_ATTR_NODEV, Step::Devices)?;
            for w in &self.writable {
                mount(
                    Some(w),
                    w,
                    None,
                    libc::MS_BIND | libc::MS_REC,
                    Step::BindWritable,
                )?;
                set_attr(w, false, 0, MOUNT_ATTR_RDONLY, Step::BindWritable)?;
            }
        }
        for p in &self.protected {
            mount(
                Some(p),
                p,
                None,
                libc::MS_BIND | libc::MS_REC,
                Step::Protect,
            )?;
            set_attr(p, true, MOUNT_ATTR_RDONLY, 0, Step::Protect)?;
        }
        let hidden = libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
        for d in &self.denied_dirs {
            mount(Some(c"tmpfs"), d, Some(c"tmpfs"), hidden, Step::DenyDir)?;
        }
        for f in &self.denied_files {
            // A nodev bind of /dev/null: opening the path for reading or writing fails with EACCES.
            mount(Some(c"/dev/null"), f, None, libc::MS_BIND, Step::DenyFile)?;
            let attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV;
            set_attr(f, false, attrs, 0, Step::DenyFile)?;
        }
        // The working directory still points into the old mounts: re-enter it by path.
        let cwd = cwd_buf
            .as_ref()
            .map_or(self.cwd.as_c_str(), |b| b.as_c_str());
        // SAFETY: `cwd` is a valid NUL-terminated path (the plan's, or the stack buffer above).
        check(Step::Chdir, unsafe { libc::chdir(cwd.as_ptr()) })
    }
}

/// The current directory in a stack buffer (no allocation, usable between fork and exec).
struct CwdBuf {
    buf: [u8; libc::PATH_MAX as usize],
}

impl CwdBuf {
    fn current() -> Option<Self> {
        let mut me = Self {
            buf: [0; libc::PATH_MAX as usize],
        };
        // SAFETY: getcwd writes at most `len` bytes, NUL-terminated, into our buffer.
        let ret = unsafe { libc::getcwd(me.buf.as_mut_ptr().cast(), me.buf.len()) };
        (!ret.is_null()).then_some(me)
    }

    fn as_c_str(&self) -> &std::ffi::CStr {
        std::ffi::CStr::from_bytes_until_nul(&self.buf).unwrap_or(c"/")
    }
}

fn mount(
    source: Option<&std::ffi::CStr>,
    target: &std::ffi::CStr,
    fstype: Option<&std::ffi::CStr>,
    flags: libc::c_ulong,
    step: Step,
) -> std::io::Result<()> {
    let ptr = |s: Option<&std::ffi::CStr>| s.map_or(std::ptr::null(), std::ffi::CStr::as_ptr);
    let data = if fstype.is_some() {
        c"mode=000,size=4k".as_ptr().cast()
    } else {
        std::ptr::null()
    };
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    let ret = unsafe { libc::mount(ptr(source), target.as_ptr(), ptr(fstype), flags, data) };
    check(step, ret)
}

fn set_attr(
    path: &std::ffi::CStr,
    recursive: bool,
    set: u64,
    clear: u64,
    step: Step,
) -> std::io::Result<()> {
    let attr = MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = if recursive { libc::AT_RECURSIVE } else { 0 };
    // SAFETY: `path` is NUL-terminated and `attr` is a correctly sized `struct mount_attr` on our
    // stack; the kernel only reads both during the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &raw const attr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(step, if ret == 0 { 0 } else { -1 })
}

fn write_file(path: &std::ffi::CStr, data: &[u8], step: Step) -> std::io::Result<()> {
    // SAFETY: `path` is NUL-terminated; open returns a new fd or -1.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    check(step, fd)?;
    // SAFETY: `data` is a valid buffer of `data.len()` bytes; `fd` is the fd opened above.
    let written = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
    let ok = usize::try_from(written).is_ok_and(|n| n == data.len());
    // SAFETY: closing the fd we opened; errors on close are irrelevant for procfs writes.
    unsafe { libc::close(fd) };
    check(step, if ok { 0 } else { -1 })
}
