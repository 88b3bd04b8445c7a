//! Passing a file descriptor to another process of the same user: how one
//! process per GPU shares cuMem allocations (exported as POSIX file
//! descriptors, which only travel over a unix-domain socket as SCM_RIGHTS),
//! and how a group's processes share one call ledger (a memfd, at join).
//!
//! The exporting rank serves its descriptor from a socket in a fresh private
//! directory (mode 0700, so other users cannot even reach the socket) for
//! the length of one rendezvous or join; each importing rank connects, both sides
//! check that the other runs as the same user (SO_PEERCRED), and the
//! descriptor crosses as ancillary data. Dropping the [`FdServer`] stops
//! it and removes the socket and its directory.

use std::io::{self, IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::sys::socket::{
    getsockopt, recvmsg, sendmsg, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
};

/// Serves one descriptor to every same-user process that connects, until
/// dropped.
pub(crate) struct FdServer {
    path: PathBuf,
    /// The listening socket, shut down on drop to wake the blocked accept.
    listener: UnixListener,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Removed (with the socket) when the server drops, after the thread.
    _dir: tempfile::TempDir,
}

/// Longest socket path used: `sun_path` holds 108 bytes.
const MAX_SOCKET_PATH: usize = 100;

impl FdServer {
    /// Starts serving `fd` (kept open until the server drops).
    pub(crate) fn serve(fd: OwnedFd) -> io::Result<FdServer> {
        let mut base = std::env::temp_dir();
        // A long TMPDIR (common for HPC jobs) would not fit in sun_path.
        if base.as_os_str().len() + "/symm-XXXXXX/fd.sock".len() > MAX_SOCKET_PATH {
            base = PathBuf::from("/tmp");
        }
        // A fresh, exclusively created directory that only this user can
        // enter (explicitly 0700: not left to the umask).
        let dir = tempfile::Builder::new()
            .prefix("symm-")
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(&base)?;
        let path = dir.path().join("fd.sock");
        let listener = UnixListener::bind(&path)?;
        let serving = listener.try_clone()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("symm-fd-server".into())
            .spawn(move || loop {
                let conn = serving.accept();
                if stop2.load(Ordering::Acquire) {
                    break;
                }
                match conn {
                    Ok((conn, _)) => {
                        if let Err(e) = send_fd(&conn, fd.as_raw_fd()) {
                            tracing::warn!("symm: refused or failed to pass a descriptor: {e}");
                        }
                    }
                    // Out of descriptors, say: back off rather than spin.
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            })?;
        Ok(FdServer {
            _dir: dir,
            path,
            listener,
            stop,
            thread: Some(thread),
        })
    }

    /// The socket to connect to.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for FdServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the blocking accept (Linux fails it once the listening
        // socket is shut down), which then sees the flag; the connect is a
        // second wake-up where shutdown does not do that.
        let _ =
            nix::sys::socket::shutdown(self.listener.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        let _ = UnixStream::connect(&self.path);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Fails unless the process at the other end of `s` runs as this user.
fn check_same_user(s: &UnixStream) -> io::Result<()> {
    let cred = getsockopt(s, sockopt::PeerCredentials).map_err(io::Error::from)?;
    let me = nix::unistd::getuid().as_raw();
    if cred.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "process {} runs as uid {}, not this process's uid {me}",
                cred.pid(),
                cred.uid()
            ),
        ));
    }
    Ok(())
}

fn send_fd(conn: &UnixStream, fd: RawFd) -> io::Result<()> {
    check_same_user(conn)?;
    let fds = [fd];
    let iov = [IoSlice::new(b"F")];
    sendmsg::<()>(
        conn.as_raw_fd(),
        &iov,
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .map_err(io::Error::from)?;
    Ok(())
}

/// Fetches the descriptor served at `path`, waiting at most `timeout` for
/// the server's answer.
pub(crate) fn fetch_fd(path: &Path, timeout: Duration) -> io::Result<OwnedFd> {
    let s = UnixStream::connect(path)?;
    check_same_user(&s)?;
    s.set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
    let mut byte = [0u8; 1];
    let mut iov = [IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!(RawFd);
    let msg = loop {
        match recvmsg::<()>(
            s.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            // A signal handled meanwhile (a profiler's, say) is no failure.
            Err(nix::errno::Errno::EINTR) => continue,
            r => break r.map_err(io::Error::from)?,
        }
    };
    let mut got: Vec<OwnedFd> = Vec::new();
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            // SAFETY: the kernel just installed these descriptors in this
            // process for us; nothing else owns them.
            got.extend(fds.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
        }
    }
    match (got.pop(), got.is_empty()) {
        (Some(fd), true) => Ok(fd),
        (Some(_), false) => Err(io::Error::other(
            "the server passed more than one descriptor",
        )),
        (None, _) => Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the server closed the connection without passing a descriptor",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom, Write};

    const SOCKET_VAR: &str = "SYMM_FD_TEST_SOCKET";
    const WANT_VAR: &str = "SYMM_FD_TEST_WANT";

    fn memfd_with(bytes: &[u8]) -> std::fs::File {
        let fd = nix::sys::memfd::memfd_create(c"symm-fd-test", nix::sys::memfd::MFdFlags::empty())
            .expect("memfd_create");
        let mut f = std::fs::File::from(fd);
        f.write_all(bytes).expect("write memfd");
        f
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// A memfd with fresh random contents crosses to another process, which
    /// checks the contents and writes its own reply into the same file: the
    /// parent reads the reply, so both hold one file, not a copy.
    #[test]
    fn a_memfd_crosses_to_another_process() {
        let want: Vec<u8> = (0..64).map(|_| rand::random::<u8>()).collect();
        let mut f = memfd_with(&want);
        let dup = f.try_clone().expect("dup");
        let server = FdServer::serve(OwnedFd::from(dup)).expect("serve");
        let dir = server.path().parent().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
            0o700
        );
        // The child's test name from this module's path (without the
        // crate's name), so that moving the module cannot run no test.
        let (_, here) = module_path!().split_once("::").unwrap();
        let child = format!("{here}::child_side_of_the_memfd_test");
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", &child, "--nocapture"])
            .env(SOCKET_VAR, server.path())
            .env(WANT_VAR, hex(&want))
            .output()
            .expect("spawn the child test");
        assert!(
            out.status.success(),
            "child failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("1 passed"),
            "the child test did not run: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let mut back = vec![0u8; want.len()];
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_exact(&mut back).unwrap();
        let reply: Vec<u8> = want.iter().map(|b| !b).collect();
        assert_eq!(back, reply, "the child's write is not visible here");
        drop(server);
        assert!(!dir.exists(), "the socket directory outlived the server");
    }

    /// The other process of `a_memfd_crosses_to_another_process` (ignored
    /// when run on its own).
    #[test]
    #[ignore = "run by a_memfd_crosses_to_another_process in a child process"]
    fn child_side_of_the_memfd_test() {
        let path = std::env::var(SOCKET_VAR).expect("run by the parent test");
        let want = std::env::var(WANT_VAR).unwrap();
        let fd = fetch_fd(Path::new(&path), Duration::from_secs(10)).expect("fetch");
        let mut f = std::fs::File::from(fd);
        let mut got = Vec::new();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut got).unwrap();
        assert_eq!(hex(&got), want);
        let reply: Vec<u8> = got.iter().map(|b| !b).collect();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(&reply).unwrap();
    }

    #[test]
    fn a_closed_server_is_an_error_not_a_hang() {
        let server = FdServer::serve(OwnedFd::from(memfd_with(b"x"))).unwrap();
        let path = server.path().to_path_buf();
        drop(server);
        let t = std::time::Instant::now();
        assert!(fetch_fd(&path, Duration::from_secs(5)).is_err());
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}
