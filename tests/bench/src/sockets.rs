//! Reading a socket option on another process's socket: TCP_NODELAY is per socket, so the only true answer to
//! "does the function's Runtime API connection have it" is the function's own socket, duplicated into this
//! process with `pidfd_getfd` (Linux 5.6; needs ptrace permission over the process, which a parent has over its
//! child unless the system forbids ptrace altogether).

use std::io;
use std::net::SocketAddr;
use std::os::fd::{FromRawFd, OwnedFd};

fn owned_fd(result: libc::c_long) -> io::Result<OwnedFd> {
    if result < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to this process; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(result as libc::c_int) })
}

/// Whether the TCP socket of process `pid` whose local address is `local` has TCP_NODELAY; `None` when the
/// process has no such socket.
pub fn tcp_nodelay_of(pid: u32, local: SocketAddr) -> io::Result<Option<bool>> {
    // SAFETY: plain system calls on integers; the results are checked before use.
    let pidfd = owned_fd(unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) })?;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd"))?.flatten() {
        let Some(target) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<libc::c_int>().ok())
        else {
            continue;
        };
        // Only sockets are worth duplicating.
        let is_socket = std::fs::read_link(entry.path())
            .map(|link| link.to_string_lossy().starts_with("socket:"))
            .unwrap_or(false);
        if !is_socket {
            continue;
        }
        use std::os::fd::AsRawFd;
        // SAFETY: as above.
        let copy = match owned_fd(unsafe {
            libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0)
        }) {
            Ok(fd) => fd,
            // Closed since it was listed.
            Err(e) if e.raw_os_error() == Some(libc::EBADF) => continue,
            Err(e) => return Err(e),
        };
        let socket = socket2::Socket::from(copy);
        if socket.local_addr().ok().and_then(|a| a.as_socket()) == Some(local) {
            return socket.tcp_nodelay().map(Some);
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_option_on_a_socket_of_a_process() {
        // This process is allowed to look at itself, and its sockets stand in for another's.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let local = stream.local_addr().unwrap();
        assert_eq!(
            tcp_nodelay_of(std::process::id(), local).unwrap(),
            Some(false)
        );
        stream.set_nodelay(true).unwrap();
        assert_eq!(
            tcp_nodelay_of(std::process::id(), local).unwrap(),
            Some(true)
        );
        drop(stream);
        assert_eq!(tcp_nodelay_of(std::process::id(), local).unwrap(), None);
    }
}
