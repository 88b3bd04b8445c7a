//! A [`Store`] over TCP, hosted by one rank.
//!
//! # Wire protocol
//!
//! Every frame is a `u32` little-endian length followed by that many bytes;
//! both sides refuse a length above [`TcpStore::MAX_FRAME_LEN`] before
//! allocating. Integers are little-endian; a "string" is a `u32` length and
//! its bytes; keys are UTF-8 strings of at most [`MAX_KEY_LEN`] bytes.
//!
//! * Hello (client, first frame): `b"SYMMSTOR"`, `u16` version, token string
//!   (empty for none). Reply: one status byte (`0` accepted, else refused:
//!   `1` wrong token, `2` token required, `3` token unexpected, `4` bad
//!   version, `5` store full) and the server's `u16` version; then, when
//!   accepted, the `u64` idle timeout in ms (`u64::MAX` for none), and when
//!   full, the `u32` connection limit. A refused connection is then closed.
//!   A connection over the limit is refused before its hello is read.
//! * Requests, one op byte then fields: `1` set (key, value), `2` try_get
//!   (key), `3` wait (`u64` timeout in ms, `u64::MAX` for none; `u32` count;
//!   keys), `4` add (key, `i64` delta).
//! * Replies, one status byte then fields: `0` ok, `1` value (string), `2`
//!   none, `3` timeout (`u32` count, missing keys), `4` not a counter, `5`
//!   counter (`i64`), `6` error (UTF-8 message), `8` over a memory limit
//!   (`u8` which: `0` per connection, `1` total; `u64` limit; `u64` what the
//!   write would have made it).
//! * Last word: `5` (key, value, counter key) asks the host to write the
//!   value under the key, unless the key holds one already, and add 1 to
//!   the counter, when this connection ends without a `6` (release) first:
//!   its process died without leaving (killed, say). Both reply `0`. A
//!   connection holding a last word is never closed for being idle (its
//!   client keeps it silent), takes no other op but `6`, and ends only with
//!   its process or the host, so the client sees the host go as the
//!   connection's end: after one byte `0x47` (goodbye) when the host closed
//!   the store, with none when its process died.
//! * Idle notice, `7` (`u64` idle timeout in ms): the host sends it, unasked,
//!   when a connection has sent no request for the idle timeout since its
//!   last reply (or its hello), then closes the connection. The host decides
//!   only while no byte of a next request has arrived, and reads nothing
//!   after, so a client that gets the notice as the reply to a request knows
//!   the request was not served and may send it again elsewhere.
//!
//! A malformed frame closes that connection only. Frame bodies are read as
//! their bytes arrive, so a header alone costs its reader no memory.

use super::values::{Values, Writer};
use super::{check_key, time_left, HostEnd, LastWord, Store, StoreError, Word, MAX_KEY_LEN};
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"SYMMSTOR";
/// 2: the store-full refusal, the idle timeout and its notice, the memory
/// limits' reply. 3: the last word.
const VERSION: u16 = 3;
/// Longest token accepted, in bytes.
const MAX_TOKEN_LEN: usize = 1024;
/// Longest hello frame: magic, version, token length and token.
const MAX_HELLO_LEN: usize = MAGIC.len() + 2 + 4 + MAX_TOKEN_LEN;

const OP_SET: u8 = 1;
const OP_TRY_GET: u8 = 2;
const OP_WAIT: u8 = 3;
const OP_ADD: u8 = 4;
const OP_LAST_WORD: u8 = 5;
const OP_RELEASE: u8 = 6;
/// The one byte the host ever sends on a last word's connection, as it
/// closes the store: it left, it did not die.
const GOODBYE: u8 = 0x47;
/// Longest last word's value: a departure record is a few hundred bytes.
const MAX_LAST_WORD_LEN: usize = 4096;

const ST_OK: u8 = 0;
const ST_VALUE: u8 = 1;
const ST_NONE: u8 = 2;
const ST_TIMEOUT: u8 = 3;
const ST_NOT_A_COUNTER: u8 = 4;
const ST_COUNTER: u8 = 5;
const ST_ERROR: u8 = 6;
const ST_IDLE: u8 = 7;
const ST_OVER_LIMIT: u8 = 8;

const LIMIT_PER_CONNECTION: u8 = 0;
const LIMIT_TOTAL: u8 = 1;

const HELLO_OK: u8 = 0;
const HELLO_WRONG_TOKEN: u8 = 1;
const HELLO_TOKEN_REQUIRED: u8 = 2;
const HELLO_TOKEN_UNEXPECTED: u8 = 3;
const HELLO_BAD_VERSION: u8 = 4;
const HELLO_FULL: u8 = 5;

/// How often idle server threads look at the shutdown flag (and, while
/// serving a `wait`, whether their client is still there).
const POLL: Duration = Duration::from_millis(100);
/// How often the accept loop polls its nonblocking listener.
const ACCEPT_POLL: Duration = Duration::from_millis(20);
/// A frame, once begun, must arrive whole within this time, and a new
/// connection must send its hello within it.
const FRAME_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection that sends no request for this long after its last reply
/// is closed by the host; see [`TcpStoreLimits::idle_timeout`].
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a client that must replace its idle connection tries: the host
/// was listening moments ago, so a longer failure means it is gone.
const RECONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The server gives up writing a reply to a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client waits for the reply to a set, try_get or add (and, on
/// top of the wait's own timeout, for the reply to a wait).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The handshake gets at least this long, even at the end of `connect`'s
/// timeout (and at most `FRAME_TIMEOUT`, the server's limit).
const MIN_HANDSHAKE_TIME: Duration = Duration::from_secs(1);
/// One connection attempt gives up after this long (a dropped SYN), and
/// the next begins.
const MAX_CONNECT_ATTEMPT: Duration = Duration::from_secs(10);
const FIRST_BACKOFF: Duration = Duration::from_millis(10);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// After the host closes the connections left at the end of its linger,
/// how long it waits for their threads to notice before leaving them.
const FORCE_CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Most bytes one read of a frame body asks for.
const READ_CHUNK: usize = 16 << 10;
/// Least time between two warnings about connections refused for being
/// over the limit.
const REFUSAL_WARN_INTERVAL: Duration = Duration::from_secs(1);

/// A [`Store`] served over TCP by one process (rank 0) to the others.
///
/// [`TcpStore::host`] binds and serves in background threads; the host is
/// itself a store with direct in-memory access. [`TcpStore::connect`] gives a
/// client. Counters are stored as decimal text, as in [`InProcessStore`](super::InProcessStore), so
/// `add` and `try_get` agree across store kinds.
///
/// # Security
///
/// With a token, the host serves only clients that present the same token:
/// anyone else is refused at the hello, before they can read or write a
/// key. Without one, anyone who reaches the port can read and forge the
/// rendezvous records, so hosting or joining a store without a token logs a
/// warning (once per process). `symm-run` gives every job a random token
/// (`SYMM_STORE_TOKEN`); under other launchers, set one. The token and all
/// data still travel in **clear text**: whoever can watch the network can
/// read the token. Bind the store to a trusted interface only (the
/// bootstrap binds `MASTER_ADDR`).
///
/// # Concurrency
///
/// A client holds one connection, and calls from several threads of one
/// process are serialised on it: while one thread blocks in
/// [`Store::wait`], the others' calls queue behind it. Threads that must make
/// progress while another waits should each [`connect`](TcpStore::connect)
/// their own client. After an I/O error the connection is considered lost and
/// every later call fails with [`StoreError::Unavailable`]; there is no
/// reconnection then, since a lost request may or may not have been applied.
///
/// The host closes connections that sit idle (see
/// [`TcpStoreLimits::idle_timeout`]); a client replaces such a connection
/// by itself, transparently. It learns the host's idle timeout in the hello
/// and opens a fresh connection before a request once its connection has
/// been idle for half of it, so the host never closes a connection under a
/// request. Should it happen anyway (a process stopped for a while), the
/// host's idle notice tells the client that the request was not served, and
/// the client sends it again on a fresh connection. A blocking
/// [`wait`](Store::wait) is never idle, however long it lasts.
///
/// # Shutdown
///
/// Dropping the host (rank 0's store, which goes with rank 0's `Comm`) first
/// stops accepting connections, then **waits up to
/// [`DROP_LINGER`](Self::DROP_LINGER) (10 s) for the connected clients to
/// disconnect** on their own, serving them meanwhile, so that ranks still
/// finishing a rendezvous (reading keys after their last wait) are not cut
/// off. A client disconnects when it is dropped, so in a normal job rank 0's
/// drop returns as soon as the other ranks have dropped their stores or
/// exited. Connections still open after the linger are shut down in both
/// directions, which ends every read and write in progress (a reply being
/// written to a client that reads slowly included), and the drop returns
/// within a fraction of a second after that; those clients then get
/// [`StoreError::Unavailable`].
///
/// # Limits
///
/// [`TcpStoreLimits`] holds them, with these defaults:
///
/// * The host serves at most [`MAX_CONNECTIONS`](Self::MAX_CONNECTIONS)
///   (512) connections at once, with one thread each. At the limit, a new
///   connection takes the place of the oldest one still without an
///   accepted hello, so connections that never say hello (without the
///   token, say) cannot keep ranks out. When every connection has said
///   hello, a new one is refused as soon as it is accepted, with a "store
///   full" reply to its hello (and a warning on the host, logged at most
///   once a second): the client fails at once with [`StoreError::Full`],
///   whatever its timeout.
/// * A connection must complete its hello within 10 s of connecting, and a
///   frame, once begun, must arrive within 10 s. Frame bodies are read as
///   they arrive, so a header announcing a large frame makes neither side
///   allocate for bytes that never come.
/// * A connection that sends no request for 60 s after its hello or its last
///   reply is closed (clients reconnect by themselves; see
///   [Concurrency](TcpStore#concurrency)).
/// * The keys a connection wrote last may hold 256 MiB, and all keys 1 GiB,
///   counting each key's bytes, its value's and 64 bytes of bookkeeping. A
///   `set` or `add` past either fails with [`StoreError::OverLimit`] naming
///   the limit, writes nothing, and leaves the connection and every other
///   client as they were. The host's own writes count toward the total.
pub struct TcpStore {
    inner: Inner,
}

enum Inner {
    Host(Host),
    Client(Client),
}

struct Host {
    addr: SocketAddr,
    shared: Arc<Shared>,
    linger: Duration,
    /// The accept loop, which returns the handles of the connection threads
    /// it started.
    acceptor: Option<JoinHandle<Vec<JoinHandle<()>>>>,
}

/// What the host, its accept loop and its connection threads share.
struct Shared {
    /// Set when the host is dropped: the accept loop closes the listener.
    closing: AtomicBool,
    /// Set when the linger is over: connection threads stop.
    shutdown: AtomicBool,
    /// The live connections.
    conns: Mutex<Conns>,
    /// Notified whenever a connection ends.
    ended: Condvar,
    /// The keys and values, with what each connection's writes cost.
    values: Values,
}

/// A clone of every live connection's socket, by connection number (which
/// grows with time), so the host can shut them all down however their
/// threads are blocked.
struct Conns {
    next_id: u64,
    live: BTreeMap<u64, Live>,
}

/// One live connection.
struct Live {
    stream: TcpStream,
    /// Whether its hello was accepted: only connections still without one
    /// may be closed to make room for a new one.
    greeted: bool,
    /// Whether it holds a last word: the host says goodbye on it before it
    /// closes, so that its client tells the host's exit from its death.
    last_word: bool,
}

impl Shared {
    fn conns(&self) -> MutexGuard<'_, Conns> {
        // Nothing panics while holding the lock; a poisoned one is intact.
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits on `ended` until no connection is left or `deadline` passes.
    fn wait_idle<'a>(
        &'a self,
        mut conns: MutexGuard<'a, Conns>,
        deadline: Option<Instant>,
    ) -> MutexGuard<'a, Conns> {
        while !conns.live.is_empty() {
            let left = time_left(deadline);
            if left.is_zero() {
                break;
            }
            conns = self
                .ended
                .wait_timeout(conns, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        conns
    }
}

/// Removes a connection from [`Conns`] when its thread ends (or unwinds).
struct Registration {
    shared: Arc<Shared>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.shared.values.release(self.id);
        self.shared.conns().live.remove(&self.id);
        self.shared.ended.notify_all();
    }
}

/// The limits a [`TcpStore`] host enforces; [`TcpStore::host_with`] takes
/// them. Start from [`Default`] and change the fields that matter:
///
/// ```
/// # use symm_runtime::store::TcpStoreLimits;
/// let mut limits = TcpStoreLimits::default();
/// limits.max_connections = 2048;
/// limits.max_bytes = 4 << 30;
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TcpStoreLimits {
    /// Longest time dropping the host waits for connected clients to leave
    /// (default [`TcpStore::DROP_LINGER`], 10 s); see
    /// [Shutdown](TcpStore#shutdown).
    pub linger: Duration,
    /// Most connections served at once (default
    /// [`TcpStore::MAX_CONNECTIONS`], 512). One more replaces the oldest
    /// connection still without an accepted hello, or, when every one has
    /// said hello, is refused with [`StoreError::Full`].
    pub max_connections: usize,
    /// Time a new connection has to send its hello, and a frame, once
    /// begun, to arrive whole (default 10 s).
    pub frame_timeout: Duration,
    /// A connection that sends nothing for this long after its hello or its
    /// last reply is closed, so idle connections cannot hold the slots
    /// (default 60 s; [`Duration::MAX`] never closes). Never while the host
    /// serves a request, a blocking wait included; clients reconnect by
    /// themselves.
    pub idle_timeout: Duration,
    /// Most bytes the keys one connection wrote last may hold: each key's
    /// bytes, its value's, and 64 of bookkeeping (default 256 MiB).
    pub max_bytes_per_connection: usize,
    /// Most bytes all keys together may hold, counted the same way, the
    /// host's own writes included (default 1 GiB).
    pub max_bytes: usize,
}

impl Default for TcpStoreLimits {
    fn default() -> Self {
        TcpStoreLimits {
            linger: TcpStore::DROP_LINGER,
            max_connections: TcpStore::MAX_CONNECTIONS,
            frame_timeout: FRAME_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_bytes_per_connection: 256 << 20,
            max_bytes: 1 << 30,
        }
    }
}

/// A last word left with a TCP store's host (a [`LastWord`]'s word): its
/// own silent connection, which ends only with this process or the host.
#[derive(Debug)]
struct TcpLastWord {
    stream: TcpStream,
}

impl Word for TcpLastWord {
    fn host_end(&self) -> Option<HostEnd> {
        let mut b = [0u8; 1];
        match self.stream.peek(&mut b) {
            Ok(1) if b[0] == GOODBYE => Some(HostEnd::Left),
            // Nothing else is ever sent on this connection.
            Ok(_) => Some(HostEnd::Vanished),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                None
            }
            Err(_) => Some(HostEnd::Vanished),
        }
    }
}

impl Drop for TcpLastWord {
    /// Takes the word back (best effort: a host that is gone needs none).
    fn drop(&mut self) {
        let _ = self.stream.set_nonblocking(false);
        let _ = self.stream.set_read_timeout(Some(MIN_HANDSHAKE_TIME));
        let _ = self.stream.set_write_timeout(Some(MIN_HANDSHAKE_TIME));
        if (&self.stream)
            .write_all(&Frame::new(OP_RELEASE).into_bytes())
            .is_ok()
        {
            // The reply says the release was served before the close.
            let _ = read_frame_blocking(&self.stream, MAX_HELLO_LEN);
        }
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

struct Client {
    addr: SocketAddr,
    /// Kept to open a fresh connection in place of an idle one.
    token: Vec<u8>,
    conn: Mutex<Conn>,
}

struct Conn {
    stream: Option<TcpStream>,
    /// Why the connection was given up, once it has been.
    lost: Option<String>,
    /// The host's idle timeout, as its hello reply said (`None`: never).
    idle_timeout: Option<Duration>,
    /// When the last reply came (or the hello's).
    last_reply: Instant,
}

impl Conn {
    fn new((stream, idle_timeout): (TcpStream, Option<Duration>)) -> Conn {
        Conn {
            stream: Some(stream),
            lost: None,
            idle_timeout,
            last_reply: Instant::now(),
        }
    }
}

impl std::fmt::Debug for TcpStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token is deliberately not shown.
        match &self.inner {
            Inner::Host(h) => f.debug_struct("TcpStore").field("host", &h.addr).finish(),
            Inner::Client(c) => f
                .debug_struct("TcpStore")
                .field("client_of", &c.addr)
                .finish(),
        }
    }
}

impl TcpStore {
    /// Largest frame either side accepts, in bytes (16 MiB). Checked before
    /// allocating so garbage cannot make a peer allocate gigabytes.
    pub const MAX_FRAME_LEN: usize = 16 << 20;

    /// Largest value accepted, in bytes: whatever still fits in a set frame
    /// alongside the longest key, so every stored value can be sent back.
    pub const MAX_VALUE_LEN: usize = Self::MAX_FRAME_LEN - MAX_KEY_LEN - 16;

    /// Longest time dropping the host waits for connected clients to
    /// disconnect before closing their connections (10 s); see
    /// [Shutdown](TcpStore#shutdown).
    pub const DROP_LINGER: Duration = Duration::from_secs(10);

    /// Most connections the host serves at once by default (512); see
    /// [`TcpStoreLimits::max_connections`].
    pub const MAX_CONNECTIONS: usize = 512;

    /// Binds `addr` and serves the store from background threads (rank 0),
    /// with the default [`TcpStoreLimits`].
    ///
    /// With a `token` (an empty one counts as none), clients must present the
    /// same token; without, clients must present none, anyone who reaches
    /// the port can read and write every key, and a warning is logged (once
    /// per process). Port 0 binds any free port; see
    /// [`local_addr`](Self::local_addr).
    ///
    /// Dropping the host stops accepting connections at once, waits up to
    /// [`DROP_LINGER`](Self::DROP_LINGER) for the connected clients to
    /// disconnect, then closes the connections left and returns within a
    /// fraction of a second; see [Shutdown](TcpStore#shutdown).
    pub fn host(addr: SocketAddr, token: Option<&str>) -> Result<TcpStore, StoreError> {
        Self::host_with(addr, token, TcpStoreLimits::default())
    }

    /// [`host`](Self::host) with other [`TcpStoreLimits`].
    pub fn host_with(
        addr: SocketAddr,
        token: Option<&str>,
        limits: TcpStoreLimits,
    ) -> Result<TcpStore, StoreError> {
        let token = token
            .filter(|t| !t.is_empty())
            .map(|t| t.as_bytes().to_vec());
        if let Some(t) = &token {
            check_token(t)?;
        }
        let listener = TcpListener::bind(addr).map_err(|e| {
            StoreError::Unavailable(format!("could not bind the store to {addr}: {e}"))
        })?;
        let local = listener.local_addr().map_err(|e| {
            StoreError::Unavailable(format!("store bound to {addr} has no address: {e}"))
        })?;
        // Nonblocking, so the accept loop sees the shutdown flag promptly.
        listener.set_nonblocking(true).map_err(|e| {
            StoreError::Unavailable(format!("could not configure the store at {local}: {e}"))
        })?;
        if token.is_none() {
            warn_no_token(&format!("hosting the TCP store at {local}"));
        }
        let shared = Arc::new(Shared {
            closing: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            conns: Mutex::new(Conns {
                next_id: 0,
                live: BTreeMap::new(),
            }),
            ended: Condvar::new(),
            values: Values::new(limits.max_bytes_per_connection, limits.max_bytes),
        });
        let acceptor = {
            let server = Server {
                token: token.map(Arc::new),
                shared: shared.clone(),
                limits,
                local,
            };
            std::thread::Builder::new()
                .name(format!("symm-store-{}", local.port()))
                .spawn(move || server.accept_loop(listener))
                .map_err(|e| {
                    StoreError::Unavailable(format!(
                        "could not start the store thread at {local}: {e}"
                    ))
                })?
        };
        Ok(TcpStore {
            inner: Inner::Host(Host {
                addr: local,
                shared,
                linger: limits.linger,
                acceptor: Some(acceptor),
            }),
        })
    }

    /// Connects to the store hosted at `addr`, retrying with exponential
    /// backoff (10 ms doubling to 1 s) until `timeout`, since rank 0 may not
    /// be listening yet.
    ///
    /// A refused token (or a token sent to a tokenless store, or none sent
    /// to one that requires it) fails at once: retrying cannot fix it. So
    /// does a full store ([`StoreError::Full`]). Joining without a token
    /// logs a warning (once per process).
    pub fn connect(
        addr: SocketAddr,
        token: Option<&str>,
        timeout: Duration,
    ) -> Result<TcpStore, StoreError> {
        let token = token.unwrap_or("").as_bytes();
        check_token(token)?;
        if token.is_empty() {
            warn_no_token(&format!("joining the TCP store at {addr}"));
        }
        let conn = connect_within(addr, token, timeout)?;
        Ok(TcpStore {
            inner: Inner::Client(Client {
                addr,
                token: token.to_vec(),
                conn: Mutex::new(Conn::new(conn)),
            }),
        })
    }

    /// The address the host is bound to, or the address a client connected
    /// to. Useful after binding port 0.
    pub fn local_addr(&self) -> SocketAddr {
        match &self.inner {
            Inner::Host(h) => h.addr,
            Inner::Client(c) => c.addr,
        }
    }

    /// Whether this is the hosting end (rank 0) rather than a client.
    pub fn is_host(&self) -> bool {
        matches!(self.inner, Inner::Host(_))
    }
}

impl Drop for Host {
    /// Stops accepting, lingers for the clients to leave, then closes the
    /// connections left; see [Shutdown](TcpStore#shutdown).
    fn drop(&mut self) {
        let addr = self.addr;
        // The accept loop sees the flag within `ACCEPT_POLL`, closes the
        // listener and returns; every connection it accepted is registered
        // by then.
        self.shared.closing.store(true, Ordering::Release);
        let threads = match self.acceptor.take().map(JoinHandle::join) {
            Some(Ok(threads)) => threads,
            _ => Vec::new(),
        };
        // Serve the connected clients until they leave, for a while.
        let deadline = Instant::now().checked_add(self.linger);
        let conns = self.shared.wait_idle(self.shared.conns(), deadline);
        // Then cut off the rest: shutting the sockets down fails every read
        // and write on them at once, however slowly the client reads.
        self.shared.shutdown.store(true, Ordering::Release);
        let left = conns.live.len();
        if left > 0 {
            tracing::debug!(
                "store at {addr}: closing {left} connection(s) still open after {:?}",
                self.linger
            );
        }
        for c in conns.live.values() {
            if c.last_word {
                // One byte fits the socket's buffer: the write cannot wait.
                let _ = (&c.stream).write_all(&[GOODBYE]);
            }
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        let conns = self
            .shared
            .wait_idle(conns, Instant::now().checked_add(FORCE_CLOSE_WAIT));
        let stuck = conns.live.len();
        drop(conns);
        if stuck == 0 {
            // Every thread has deregistered, its last act: joins are short.
            for t in threads {
                let _ = t.join();
            }
        } else {
            tracing::warn!(
                "store at {addr}: {stuck} connection thread(s) did not stop within \
                 {FORCE_CLOSE_WAIT:?} of being closed; leaving them"
            );
        }
    }
}

fn check_token(token: &[u8]) -> Result<(), StoreError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(StoreError::TooLarge {
            what: "token",
            len: token.len(),
            max: MAX_TOKEN_LEN,
        });
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<(), StoreError> {
    if value.len() > TcpStore::MAX_VALUE_LEN {
        return Err(StoreError::TooLarge {
            what: "value",
            len: value.len(),
            max: TcpStore::MAX_VALUE_LEN,
        });
    }
    Ok(())
}

impl Store for TcpStore {
    fn set(&self, key: &str, value: &[u8]) -> Result<(), StoreError> {
        check_key(key)?;
        check_value(value)?;
        match &self.inner {
            Inner::Host(h) => h.shared.values.set(Writer::Host, key, value),
            Inner::Client(c) => {
                let mut req = Frame::new(OP_SET);
                req.bytes(key.as_bytes());
                req.bytes(value);
                c.call(req, Some(REQUEST_TIMEOUT), |st, r| match st {
                    ST_OK => Ok(Ok(())),
                    _ => other_status(st, r),
                })
            }
        }
    }

    fn try_get(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError> {
        check_key(key)?;
        match &self.inner {
            Inner::Host(h) => h.shared.values.try_get(key),
            Inner::Client(c) => {
                let mut req = Frame::new(OP_TRY_GET);
                req.bytes(key.as_bytes());
                c.call(req, Some(REQUEST_TIMEOUT), |st, r| match st {
                    ST_VALUE => Ok(Ok(Some(r.bytes(TcpStore::MAX_FRAME_LEN)?.to_vec()))),
                    ST_NONE => Ok(Ok(None)),
                    _ => other_status(st, r),
                })
            }
        }
    }

    fn wait(&self, keys: &[String], timeout: Duration) -> Result<(), StoreError> {
        for k in keys {
            check_key(k)?;
        }
        match &self.inner {
            Inner::Host(h) => h.shared.values.wait(keys, timeout),
            Inner::Client(c) => {
                let mut req = Frame::new(OP_WAIT);
                // Round up so the server waits at least `timeout`.
                let ms = timeout.as_nanos().div_ceil(1_000_000);
                req.u64(u64::try_from(ms).unwrap_or(u64::MAX));
                req.u32(keys.len() as u32);
                for k in keys {
                    req.bytes(k.as_bytes());
                }
                if req.payload_len() > TcpStore::MAX_FRAME_LEN {
                    return Err(StoreError::TooLarge {
                        what: "wait request",
                        len: req.payload_len(),
                        max: TcpStore::MAX_FRAME_LEN,
                    });
                }
                // The reply comes when the wait ends, so the read timeout
                // must exceed the wait's; a huge timeout reads forever.
                let read_timeout = timeout.checked_add(REQUEST_TIMEOUT);
                c.call(req, read_timeout, |st, r| match st {
                    ST_OK => Ok(Ok(())),
                    ST_TIMEOUT => {
                        let n = r.u32()? as usize;
                        let mut missing = Vec::with_capacity(n.min(r.remaining() / 4));
                        for _ in 0..n {
                            missing.push(r.key()?.to_owned());
                        }
                        Ok(Err(StoreError::Timeout { timeout, missing }))
                    }
                    _ => other_status(st, r),
                })
            }
        }
    }

    fn add(&self, key: &str, delta: i64) -> Result<i64, StoreError> {
        check_key(key)?;
        match &self.inner {
            Inner::Host(h) => h.shared.values.add(Writer::Host, key, delta),
            Inner::Client(c) => {
                let mut req = Frame::new(OP_ADD);
                req.bytes(key.as_bytes());
                req.i64(delta);
                c.call(req, Some(REQUEST_TIMEOUT), |st, r| match st {
                    ST_COUNTER => Ok(Ok(r.i64()?)),
                    ST_NOT_A_COUNTER => Ok(Err(StoreError::NotACounter {
                        key: key.to_owned(),
                    })),
                    _ => other_status(st, r),
                })
            }
        }
    }

    fn serves_others(&self) -> bool {
        self.is_host()
    }

    fn last_word(
        &self,
        key: &str,
        value: &[u8],
        counter: &str,
    ) -> Result<Option<LastWord>, StoreError> {
        let Inner::Client(c) = &self.inner else {
            return Ok(None);
        };
        check_key(key)?;
        check_key(counter)?;
        if value.len() > MAX_LAST_WORD_LEN {
            return Err(StoreError::Unavailable(format!(
                "a last word of {} bytes (the most is {MAX_LAST_WORD_LEN})",
                value.len()
            )));
        }
        let (stream, _) = connect_within(c.addr, &c.token, RECONNECT_TIMEOUT)?;
        let mut f = Frame::new(OP_LAST_WORD);
        f.bytes(key.as_bytes());
        f.bytes(value);
        f.bytes(counter.as_bytes());
        let lost =
            |e: String| StoreError::Unavailable(format!("leaving a last word at {}: {e}", c.addr));
        (&stream)
            .write_all(&f.into_bytes())
            .map_err(|e| lost(e.to_string()))?;
        let reply = read_frame_blocking(&stream, TcpStore::MAX_FRAME_LEN)
            .map_err(|e| lost(e.to_string()))?;
        if reply.first() != Some(&ST_OK) {
            return Err(lost(format!("the host answered {:?}", reply.first())));
        }
        // From here on it only watches for the host's end.
        stream
            .set_nonblocking(true)
            .map_err(|e| lost(e.to_string()))?;
        Ok(Some(LastWord::new(TcpLastWord { stream })))
    }
}

/// Replies any request may get: an error from the server, a memory limit,
/// or nonsense.
fn other_status<T>(st: u8, r: &mut Reader<'_>) -> Result<Result<T, StoreError>, String> {
    match st {
        ST_ERROR => {
            let msg = String::from_utf8_lossy(r.rest()).into_owned();
            Ok(Err(StoreError::Unavailable(msg)))
        }
        ST_OVER_LIMIT => {
            let limit = match r.u8()? {
                LIMIT_PER_CONNECTION => "per-connection value memory",
                LIMIT_TOTAL => "total value memory",
                w => return Err(format!("unknown memory limit {w}")),
            };
            let size = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            let max = size(r.u64()?);
            let would_be = size(r.u64()?);
            Ok(Err(StoreError::OverLimit {
                limit,
                max,
                would_be,
            }))
        }
        _ => Err(format!("unexpected reply status {st}")),
    }
}

// ---------------------------------------------------------------------------
// Client side.

/// Logs, once per process, that a store runs without a token (`doing`
/// says which and where) and how to set one.
fn warn_no_token(doing: &str) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            "{doing} without a token: anyone who can reach the port can read the \
             rendezvous records and forge them. Give every rank the same random \
             SYMM_STORE_TOKEN (e.g. `export SYMM_STORE_TOKEN=$(openssl rand -hex 16)` \
             before launching; symm-run sets one by itself)"
        );
    });
}

/// Connects and says hello, retrying with backoff until `timeout`; a
/// refusal ends it at once.
fn connect_within(
    addr: SocketAddr,
    token: &[u8],
    timeout: Duration,
) -> Result<(TcpStream, Option<Duration>), StoreError> {
    let start = Instant::now();
    let deadline = start.checked_add(timeout);
    let mut backoff = FIRST_BACKOFF;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let left = time_left(deadline);
        let err = match try_connect(addr, token, left) {
            Ok(conn) => return Ok(conn),
            Err(Attempt::Refused(e)) => return Err(e),
            Err(Attempt::Retry(e)) => e,
        };
        let left = time_left(deadline);
        if left.is_zero() {
            return Err(StoreError::Unavailable(format!(
                "could not connect to the store at {addr} within {timeout:?} \
                 ({attempts} attempts over {:?}; last error: {err})",
                start.elapsed()
            )));
        }
        std::thread::sleep(backoff.min(left));
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

enum Attempt {
    /// Worth retrying: nobody listening yet, a reset, a timeout.
    Retry(String),
    /// The store answered and said no.
    Refused(StoreError),
}

fn try_connect(
    addr: SocketAddr,
    token: &[u8],
    left: Duration,
) -> Result<(TcpStream, Option<Duration>), Attempt> {
    let io = |e: io::Error| Attempt::Retry(e.to_string());
    let stream = TcpStream::connect_timeout(
        &addr,
        left.clamp(Duration::from_millis(1), MAX_CONNECT_ATTEMPT),
    )
    .map_err(io)?;
    // Connecting to a free local port can, rarely, connect a socket to
    // itself (TCP simultaneous open); it would read its own hello back.
    if stream.local_addr().ok() == Some(addr) {
        return Err(Attempt::Retry("connected to itself".into()));
    }
    stream.set_nodelay(true).map_err(io)?;
    let hs = left.clamp(MIN_HANDSHAKE_TIME, FRAME_TIMEOUT);
    stream.set_read_timeout(Some(hs)).map_err(io)?;
    stream.set_write_timeout(Some(hs)).map_err(io)?;
    let mut hello = Frame::new_raw();
    hello.raw(MAGIC);
    hello.raw(&VERSION.to_le_bytes());
    hello.bytes(token);
    // A full store answers without reading the hello and closes, which can
    // fail this write; its answer is still there to read.
    let sent = (&stream).write_all(&hello.into_bytes());
    let reply = match read_frame_blocking(&stream, MAX_HELLO_LEN) {
        Ok(reply) => reply,
        Err(e) => {
            let why = sent.err().unwrap_or(e);
            return Err(Attempt::Retry(format!("handshake failed: {why}")));
        }
    };
    let mut r = Reader::new(&reply);
    let (code, version) = match (r.u8(), r.u16()) {
        (Ok(c), Ok(v)) => (c, v),
        _ => return Err(Attempt::Retry("malformed handshake reply".into())),
    };
    let refused = |msg: String| Err(Attempt::Refused(StoreError::Unavailable(msg)));
    match code {
        HELLO_OK => {
            let ms = r
                .u64()
                .map_err(|e| Attempt::Retry(format!("malformed handshake reply: {e}")))?;
            let idle = (ms != u64::MAX).then(|| Duration::from_millis(ms));
            Ok((stream, idle))
        }
        HELLO_FULL => {
            let n = r.u32().unwrap_or(0);
            Err(Attempt::Refused(StoreError::Full {
                addr,
                connections: n as usize,
            }))
        }
        HELLO_WRONG_TOKEN => refused(format!(
            "the store at {addr} refused the token (SYMM_STORE_TOKEN must be the same on \
             every rank)"
        )),
        HELLO_TOKEN_REQUIRED => refused(format!(
            "the store at {addr} requires a token and none was given (set SYMM_STORE_TOKEN \
             to the same value on every rank)"
        )),
        HELLO_TOKEN_UNEXPECTED => refused(format!(
            "the store at {addr} has no token but this client sent one \
             (are all ranks configured alike?)"
        )),
        HELLO_BAD_VERSION => refused(format!(
            "the store at {addr} speaks protocol version {version}, this client {VERSION}"
        )),
        c => refused(format!(
            "the store at {addr} answered the handshake with unknown code {c}"
        )),
    }
}

/// Reads one frame from a blocking stream, refusing lengths above `max`.
fn read_frame_blocking(mut stream: &TcpStream, max: usize) -> io::Result<Vec<u8>> {
    let mut hdr = [0u8; 4];
    stream.read_exact(&mut hdr)?;
    let len = u32::from_le_bytes(hdr) as usize;
    if len > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("peer sent a {len}-byte frame, more than the limit of {max}"),
        ));
    }
    let mut body = Vec::new();
    while body.len() < len {
        match read_body_chunk(stream, &mut body, len) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed mid-frame",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(body)
}

/// Reads once from `stream` onto the end of `body`, a frame body of `len`
/// bytes in all, and returns how many bytes came (0 at the end of the
/// stream). `body` grows only by what arrives, at most doubling and never
/// past `len`, so a frame header alone costs no memory.
fn read_body_chunk(mut stream: &TcpStream, body: &mut Vec<u8>, len: usize) -> io::Result<usize> {
    let have = body.len();
    let mut chunk = [0u8; READ_CHUNK];
    let want = (len - have).min(READ_CHUNK);
    let n = stream.read(&mut chunk[..want])?;
    if body.capacity() - have < n {
        body.reserve_exact((len - have).min(have.max(n)));
    }
    body.extend_from_slice(&chunk[..n]);
    Ok(n)
}

impl Client {
    /// Sends `req` and parses the reply with `parse`, which gets the status
    /// byte and the rest. `parse`'s outer error means a malformed reply.
    fn call<T>(
        &self,
        req: Frame,
        read_timeout: Option<Duration>,
        parse: impl FnOnce(u8, &mut Reader<'_>) -> Result<Result<T, StoreError>, String>,
    ) -> Result<T, StoreError> {
        let addr = self.addr;
        let mut conn = self.conn.lock().map_err(|_| {
            StoreError::Unavailable(format!(
                "a thread panicked while using the connection to the store at {addr}"
            ))
        })?;
        if let Some(why) = &conn.lost {
            return Err(StoreError::Unavailable(format!(
                "the connection to the store at {addr} was lost earlier: {why}"
            )));
        }
        self.refresh(&mut conn)?;
        let req = req.into_bytes();
        let mut resent = false;
        loop {
            let Some(stream) = conn.stream.as_ref() else {
                unreachable!("refresh leaves a connection or fails");
            };
            let reply = match exchange(stream, &req, read_timeout) {
                Ok(reply) => reply,
                Err(why) => return Err(conn.lose(addr, why)),
            };
            if reply.first() == Some(&ST_IDLE) && !resent {
                // The host closed the connection for idleness before it
                // read any of the request: it was not served.
                resent = true;
                conn.stream = None;
                self.refresh(&mut conn)?;
                continue;
            }
            conn.last_reply = Instant::now();
            let parsed = (|| {
                let mut r = Reader::new(&reply);
                let st = r.u8()?;
                let out = parse(st, &mut r)?;
                r.finish()?;
                Ok(out)
            })();
            return match parsed {
                Ok(out) => out,
                Err(why) => Err(conn.lose(addr, why)),
            };
        }
    }

    /// Makes sure `conn` has a connection the host will not close under
    /// the next request: a fresh one in place of one idle for half the
    /// host's idle timeout, one the host already closed for idleness, or
    /// none (a replacement that failed earlier).
    fn refresh(&self, conn: &mut Conn) -> Result<(), StoreError> {
        let addr = self.addr;
        if let Some(stream) = &conn.stream {
            let idle_long = conn
                .idle_timeout
                .is_some_and(|t| conn.last_reply.elapsed() >= t / 2);
            if !idle_long {
                match pending(stream) {
                    Ok(false) => return Ok(()),
                    // The host spoke unasked: its idle notice, or the end.
                    Ok(true) => {
                        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
                        match read_frame_blocking(stream, TcpStore::MAX_FRAME_LEN) {
                            Ok(f) if f.first() == Some(&ST_IDLE) => {}
                            _ => {
                                return Err(
                                    conn.lose(addr, "the store closed the connection".into())
                                )
                            }
                        }
                    }
                    Err(e) => return Err(conn.lose(addr, e.to_string())),
                }
            }
            if let Some(s) = conn.stream.take() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        match connect_within(addr, &self.token, RECONNECT_TIMEOUT) {
            Ok(fresh) => {
                *conn = Conn::new(fresh);
                Ok(())
            }
            // Not lost: the next call tries again (a full store may have
            // room by then).
            Err(StoreError::Unavailable(why)) => Err(StoreError::Unavailable(format!(
                "could not replace the idle connection to the store at {addr}: {why}"
            ))),
            Err(e) => Err(e),
        }
    }
}

impl Conn {
    /// Gives the connection up for good, for `why`, and returns the error.
    fn lose(&mut self, addr: SocketAddr, why: String) -> StoreError {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
        let msg = format!("lost the connection to the store at {addr}: {why}");
        self.lost = Some(why);
        StoreError::Unavailable(msg)
    }
}

/// Whether the host has sent something (or closed) while no request was
/// pending: only its idle notice or its end can be there.
fn pending(stream: &TcpStream) -> io::Result<bool> {
    stream.set_nonblocking(true)?;
    let peeked = stream.peek(&mut [0u8; 1]);
    stream.set_nonblocking(false)?;
    match peeked {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
        Err(e) => Err(e),
    }
}

/// Sends a request's bytes and reads the reply frame.
fn exchange(
    stream: &TcpStream,
    req: &[u8],
    read_timeout: Option<Duration>,
) -> Result<Vec<u8>, String> {
    let t = read_timeout.map(|t| t.max(Duration::from_millis(1)));
    stream.set_read_timeout(t).map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(REQUEST_TIMEOUT))
        .map_err(|e| e.to_string())?;
    if let Err(w) = (&*stream).write_all(req) {
        // The host may have sent its idle notice and closed before the
        // request reached it; that notice is still there to read.
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        return match read_frame_blocking(stream, TcpStore::MAX_FRAME_LEN) {
            Ok(f) if f.first() == Some(&ST_IDLE) => Ok(f),
            _ => Err(w.to_string()),
        };
    }
    read_frame_blocking(stream, TcpStore::MAX_FRAME_LEN).map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!(
            "no reply within {:?}",
            read_timeout.unwrap_or(Duration::MAX)
        ),
        io::ErrorKind::UnexpectedEof => "the store closed the connection".into(),
        _ => e.to_string(),
    })
}

// ---------------------------------------------------------------------------
// Server side.

/// What the accept loop needs, and hands each connection thread.
struct Server {
    token: Option<Arc<Vec<u8>>>,
    shared: Arc<Shared>,
    limits: TcpStoreLimits,
    local: SocketAddr,
}

impl Server {
    /// Accepts until the host is dropped, then closes the listener and
    /// returns the handles of the connection threads still running.
    fn accept_loop(self, listener: TcpListener) -> Vec<JoinHandle<()>> {
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        let mut last_warning: Option<Instant> = None;
        let mut refused = 0u64;
        while !self.shared.closing.load(Ordering::Acquire) {
            match listener.accept() {
                Ok((stream, peer)) => {
                    threads.retain(|h| !h.is_finished());
                    let id = match self.register(&stream) {
                        Ok(id) => id,
                        Err(None) => {
                            // Over the limit: refuse at once, before the
                            // connection costs a thread or any memory.
                            refuse_full(stream, self.limits.max_connections);
                            refused += 1;
                            if last_warning.is_none_or(|t| t.elapsed() >= REFUSAL_WARN_INTERVAL) {
                                tracing::warn!(
                                    "store at {}: full, already serving {} connections, the \
                                     limit; refused {refused} more since the last such warning, \
                                     the latest from {peer}",
                                    self.local,
                                    self.limits.max_connections
                                );
                                last_warning = Some(Instant::now());
                                refused = 0;
                            }
                            continue;
                        }
                        Err(Some(e)) => {
                            tracing::warn!("store could not serve {peer}: {e}");
                            continue;
                        }
                    };
                    let registration = Registration {
                        shared: self.shared.clone(),
                        id,
                    };
                    let token = self.token.clone();
                    let limits = self.limits;
                    let spawned = std::thread::Builder::new()
                        // Linux shows 15 bytes: "symm-conn-" and the port.
                        .name(format!("symm-conn-{}-{peer}", self.local.port()))
                        .spawn(move || {
                            let registration = registration;
                            if let Err(why) = serve(stream, &registration, token.as_deref(), limits)
                            {
                                tracing::debug!("store connection from {peer} closed: {why}");
                            }
                        });
                    match spawned {
                        Ok(h) => threads.push(h),
                        // The closure, registration included, was dropped.
                        Err(e) => tracing::warn!("store could not serve {peer}: {e}"),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(ACCEPT_POLL),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors and the like: do not spin.
                    tracing::warn!("store accept failed: {e}");
                    std::thread::sleep(ACCEPT_POLL);
                }
            }
        }
        drop(listener);
        threads
    }

    /// Records a new connection's socket. When the host already serves as
    /// many as it may, it makes room by closing the oldest connection still
    /// without an accepted hello, and refuses (`Err(None)`) only when every
    /// connection has one: someone without the token can then hold a slot
    /// for no longer than it takes the next connection to arrive, while a
    /// client that says hello at once, as ours do, is past it long before.
    fn register(&self, stream: &TcpStream) -> Result<u64, Option<io::Error>> {
        let mut conns = self.shared.conns();
        if conns.live.len() >= self.limits.max_connections {
            let oldest = conns
                .live
                .iter()
                .find(|(_, c)| !c.greeted)
                .map(|(&id, _)| id);
            let Some(oldest) = oldest else {
                return Err(None);
            };
            // Its thread sees the socket end at once, and leaves.
            if let Some(c) = conns.live.remove(&oldest) {
                let _ = c.stream.shutdown(Shutdown::Both);
            }
        }
        let clone = stream.try_clone().map_err(Some)?;
        let id = conns.next_id;
        conns.next_id += 1;
        conns.live.insert(
            id,
            Live {
                stream: clone,
                greeted: false,
                last_word: false,
            },
        );
        Ok(id)
    }
}

/// Answers a connection over the limit with the store-full refusal and
/// closes it, from the accept loop: nothing here may block.
fn refuse_full(stream: TcpStream, max_connections: usize) {
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let mut reply = Frame::new(HELLO_FULL);
    reply.raw(&VERSION.to_le_bytes());
    reply.u32(u32::try_from(max_connections).unwrap_or(u32::MAX));
    // A few bytes into a fresh socket's empty buffer: the write completes.
    let _ = (&stream).write_all(&reply.into_bytes());
    let _ = stream.shutdown(Shutdown::Write);
    // Closing with unread input resets the connection, which may discard
    // the reply on its way: read the hello if it is already here.
    let mut buf = [0u8; MAX_HELLO_LEN + 4];
    let _ = (&stream).read(&mut buf);
}

/// Why the server stopped serving a connection.
enum End {
    /// The client closed between frames.
    Closed,
    /// The host is shutting down.
    Shutdown,
    /// The client sent no request within the idle timeout.
    Idle,
    /// The client broke the protocol or the socket failed.
    Bad(String),
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            End::Closed => f.write_str("client closed the connection"),
            End::Shutdown => f.write_str("store shutting down"),
            End::Idle => f.write_str("idle for the idle timeout"),
            End::Bad(why) => f.write_str(why),
        }
    }
}

impl From<String> for End {
    fn from(s: String) -> Self {
        End::Bad(s)
    }
}

/// Serves one connection until the client leaves, breaks the protocol, or
/// the host shuts down. Returns why it stopped when that was not normal.
fn serve(
    stream: TcpStream,
    registration: &Registration,
    token: Option<&Vec<u8>>,
    limits: TcpStoreLimits,
) -> Result<(), End> {
    let mut conn = ServerConn {
        stream,
        shared: &registration.shared,
        id: registration.id,
        writer: Writer::Conn(registration.id),
        frame_timeout: limits.frame_timeout,
        idle_timeout: limits.idle_timeout,
        last_word: None,
    };
    let r = conn.run(token);
    // Its process ended without a release (the host's own shutdown is no
    // such end): its word stands, unless it said another first.
    let closing = conn.shared.shutdown.load(Ordering::Acquire);
    if let (Some(w), false) = (conn.last_word.take(), closing) {
        let values = &conn.shared.values;
        if let Ok(None) = values.try_get(&w.key) {
            if values.set(Writer::Host, &w.key, &w.value).is_ok() {
                let _ = values.add(Writer::Host, &w.counter, 1);
            }
            tracing::debug!(
                "store: a client ended without releasing its last word; wrote {}",
                w.key
            );
        }
    }
    if let Err(End::Idle) = r {
        // Tell the client why, so that it knows the request it may be
        // sending right now was not served.
        let mut notice = Frame::new(ST_IDLE);
        notice.u64(duration_ms(limits.idle_timeout));
        let _ = conn.write(notice);
        let _ = conn.stream.shutdown(Shutdown::Write);
    }
    let _ = conn.stream.shutdown(Shutdown::Both);
    match r {
        Err(End::Closed) | Err(End::Shutdown) | Ok(()) => Ok(()),
        Err(e) => Err(e),
    }
}

/// `d` in whole milliseconds, `u64::MAX` for a duration too long to say.
fn duration_ms(d: Duration) -> u64 {
    if d == Duration::MAX {
        return u64::MAX;
    }
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

struct ServerConn<'a> {
    stream: TcpStream,
    shared: &'a Shared,
    /// This connection's number.
    id: u64,
    /// Whom this connection's writes are charged to.
    writer: Writer,
    frame_timeout: Duration,
    idle_timeout: Duration,
    /// What to write if the client's process ends without releasing it.
    last_word: Option<LastWordSpec>,
}

/// A client's last word, as the host keeps it.
struct LastWordSpec {
    key: String,
    value: Vec<u8>,
    counter: String,
}

impl ServerConn<'_> {
    fn run(&mut self, token: Option<&Vec<u8>>) -> Result<(), End> {
        let io = |e: io::Error| End::Bad(e.to_string());
        // Accepted sockets may inherit the listener's nonblocking mode.
        self.stream.set_nonblocking(false).map_err(io)?;
        self.stream.set_nodelay(true).map_err(io)?;
        // Reads poll so the shutdown flag is seen; writes give up on a
        // client that does not read. (The host also shuts the socket down
        // when it stops, which ends a read or write at once.)
        self.stream.set_read_timeout(Some(POLL)).map_err(io)?;
        self.stream
            .set_write_timeout(Some(WRITE_TIMEOUT))
            .map_err(io)?;

        let hello = self
            .read_frame(
                MAX_HELLO_LEN,
                Instant::now().checked_add(self.frame_timeout),
                None,
            )?
            .ok_or(End::Closed)?;
        let mut r = Reader::new(&hello);
        if r.raw(MAGIC.len())? != MAGIC {
            return Err(End::Bad("not a symm store client (bad magic)".into()));
        }
        let version = r.u16()?;
        let code = if version != VERSION {
            HELLO_BAD_VERSION
        } else {
            let theirs = r.bytes(MAX_TOKEN_LEN)?;
            r.finish()?;
            match token {
                Some(_) if theirs.is_empty() => HELLO_TOKEN_REQUIRED,
                Some(ours) if !constant_time_eq(ours, theirs) => HELLO_WRONG_TOKEN,
                None if !theirs.is_empty() => HELLO_TOKEN_UNEXPECTED,
                _ => HELLO_OK,
            }
        };
        // Greeted before the reply: a connection told it is in is never
        // closed to make room. One closed meanwhile hears nothing.
        if code == HELLO_OK {
            match self.shared.conns().live.get_mut(&self.id) {
                Some(c) => c.greeted = true,
                None => return Err(End::Bad("closed to make room before its hello".into())),
            }
        }
        let mut reply = Frame::new(code);
        reply.raw(&VERSION.to_le_bytes());
        if code == HELLO_OK {
            reply.u64(duration_ms(self.idle_timeout));
        }
        self.write(reply)?;
        if code != HELLO_OK {
            return Err(End::Bad(format!("handshake refused with code {code}")));
        }

        // The idle clock runs from each reply: time spent serving a
        // request, a wait included, is never idle.
        let idle_by = |this: &Self| {
            // A connection holding a last word stays silent by design.
            match this.last_word {
                Some(_) => None,
                None => Instant::now().checked_add(this.idle_timeout),
            }
        };
        while let Some(frame) = self.read_frame(TcpStore::MAX_FRAME_LEN, None, idle_by(self))? {
            let reply = self.handle(&frame)?;
            self.write(reply)?;
        }
        Ok(())
    }

    /// Answers one request. Errors close the connection.
    fn handle(&mut self, frame: &[u8]) -> Result<Frame, End> {
        let (values, writer) = (&self.shared.values, self.writer);
        let mut r = Reader::new(frame);
        let op = r.u8()?;
        if self.last_word.is_some() && op != OP_RELEASE {
            return Err(End::Bad(format!(
                "op {op} on a last word's connection (only a release may follow)"
            )));
        }
        let result = match op {
            OP_SET => {
                let key = r.key()?;
                let value = r.bytes(TcpStore::MAX_VALUE_LEN)?;
                r.finish()?;
                values.set(writer, key, value).map(|()| Frame::new(ST_OK))
            }
            OP_TRY_GET => {
                let key = r.key()?;
                r.finish()?;
                values.try_get(key).map(|v| match v {
                    Some(v) => {
                        let mut f = Frame::new(ST_VALUE);
                        f.bytes(&v);
                        f
                    }
                    None => Frame::new(ST_NONE),
                })
            }
            OP_WAIT => {
                let ms = r.u64()?;
                let n = r.u32()? as usize;
                // Each key takes at least its 4-byte length: bound the
                // allocation by what the frame can hold.
                if n > r.remaining() / 4 {
                    return Err(End::Bad(format!("wait for {n} keys in a short frame")));
                }
                let mut keys = Vec::with_capacity(n);
                for _ in 0..n {
                    keys.push(r.key()?.to_owned());
                }
                r.finish()?;
                let timeout = (ms != u64::MAX).then(|| Duration::from_millis(ms));
                match self.wait(&keys, timeout)? {
                    Ok(()) => Ok(Frame::new(ST_OK)),
                    Err(StoreError::Timeout { missing, .. }) => {
                        let mut f = Frame::new(ST_TIMEOUT);
                        f.u32(missing.len() as u32);
                        for k in &missing {
                            f.bytes(k.as_bytes());
                        }
                        Ok(f)
                    }
                    Err(e) => Err(e),
                }
            }
            OP_ADD => {
                let key = r.key()?;
                let delta = r.i64()?;
                r.finish()?;
                match values.add(writer, key, delta) {
                    Ok(v) => {
                        let mut f = Frame::new(ST_COUNTER);
                        f.i64(v);
                        Ok(f)
                    }
                    Err(StoreError::NotACounter { .. }) => Ok(Frame::new(ST_NOT_A_COUNTER)),
                    Err(e) => Err(e),
                }
            }
            OP_LAST_WORD => {
                let key = r.key()?.to_owned();
                let value = r.bytes(MAX_LAST_WORD_LEN)?.to_vec();
                let counter = r.key()?.to_owned();
                r.finish()?;
                self.last_word = Some(LastWordSpec {
                    key,
                    value,
                    counter,
                });
                if let Some(c) = self.shared.conns().live.get_mut(&self.id) {
                    c.last_word = true;
                }
                Ok(Frame::new(ST_OK))
            }
            OP_RELEASE => {
                r.finish()?;
                self.last_word = None;
                Ok(Frame::new(ST_OK))
            }
            op => return Err(End::Bad(format!("unknown op {op}"))),
        };
        Ok(result.unwrap_or_else(|e| match e {
            StoreError::OverLimit {
                limit,
                max,
                would_be,
            } => {
                let mut f = Frame::new(ST_OVER_LIMIT);
                f.raw(&[if limit.starts_with("total") {
                    LIMIT_TOTAL
                } else {
                    LIMIT_PER_CONNECTION
                }]);
                f.u64(max as u64);
                f.u64(would_be as u64);
                f
            }
            e => {
                let mut f = Frame::new(ST_ERROR);
                f.raw(e.to_string().as_bytes());
                f
            }
        }))
    }

    /// Waits in slices of `POLL`, so that shutdown and a vanished client
    /// end the wait early. `None` waits forever.
    fn wait(
        &mut self,
        keys: &[String],
        timeout: Option<Duration>,
    ) -> Result<Result<(), StoreError>, End> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        loop {
            let slice = time_left(deadline).min(POLL);
            match self.shared.values.wait(keys, slice) {
                Ok(()) => return Ok(Ok(())),
                Err(StoreError::Timeout { missing, .. }) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(Err(StoreError::Timeout {
                            timeout: timeout.unwrap_or(Duration::MAX),
                            missing,
                        }));
                    }
                }
                Err(e) => return Ok(Err(e)),
            }
            if self.shared.shutdown.load(Ordering::Acquire) {
                return Err(End::Shutdown);
            }
            self.check_client_idle()?;
        }
    }

    /// While a request is being served the client must stay silent; EOF
    /// means it left, so stop waiting on its behalf.
    fn check_client_idle(&mut self) -> Result<(), End> {
        let io = |e: io::Error| End::Bad(e.to_string());
        self.stream.set_nonblocking(true).map_err(io)?;
        let mut b = [0u8; 1];
        let peeked = self.stream.peek(&mut b);
        self.stream.set_nonblocking(false).map_err(io)?;
        match peeked {
            Ok(0) => Err(End::Closed),
            Ok(_) => Err(End::Bad(
                "client sent data while its wait was pending".into(),
            )),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Reads one frame of at most `max` bytes. `Ok(None)` is a clean close
    /// before the frame began. Once a frame has begun it must finish within
    /// the frame timeout (or by `deadline`, if given, from the start); it
    /// must begin by `idle_by`, if given, or the connection is idle. The
    /// body grows as its bytes arrive, never ahead of them.
    fn read_frame(
        &mut self,
        max: usize,
        deadline: Option<Instant>,
        idle_by: Option<Instant>,
    ) -> Result<Option<Vec<u8>>, End> {
        let mut deadline = deadline;
        let mut hdr = [0u8; 4];
        if !self.fill(&mut hdr, &mut deadline, idle_by)? {
            return Ok(None);
        }
        let len = u32::from_le_bytes(hdr) as usize;
        if len > max {
            return Err(End::Bad(format!(
                "{len}-byte frame exceeds the limit of {max}"
            )));
        }
        let mut body = Vec::new();
        while body.len() < len {
            self.check_progress(deadline)?;
            match read_body_chunk(&self.stream, &mut body, len) {
                Ok(0) => return Err(End::Bad("connection closed mid-frame".into())),
                Ok(_) => {}
                Err(e) if is_transient(&e) => {}
                Err(e) => return Err(End::Bad(e.to_string())),
            }
        }
        Ok(Some(body))
    }

    /// Fails once the host shuts down or `deadline` has passed.
    fn check_progress(&self, deadline: Option<Instant>) -> Result<(), End> {
        if self.shared.shutdown.load(Ordering::Acquire) {
            return Err(End::Shutdown);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(End::Bad("frame not received in time".into()));
        }
        Ok(())
    }

    /// Fills `buf`, the header of a frame, polling the shutdown flag.
    /// Returns `false` on a clean EOF before the first byte, and fails with
    /// [`End::Idle`] if no byte came by `idle_by`.
    fn fill(
        &mut self,
        buf: &mut [u8],
        deadline: &mut Option<Instant>,
        idle_by: Option<Instant>,
    ) -> Result<bool, End> {
        let mut got = 0;
        while got < buf.len() {
            self.check_progress(*deadline)?;
            if got == 0 && idle_by.is_some_and(|t| Instant::now() >= t) {
                return Err(End::Idle);
            }
            match self.stream.read(&mut buf[got..]) {
                Ok(0) if got == 0 => return Ok(false),
                Ok(0) => return Err(End::Bad("connection closed mid-frame".into())),
                Ok(n) => {
                    got += n;
                    if deadline.is_none() {
                        *deadline = Instant::now().checked_add(self.frame_timeout);
                    }
                }
                Err(e) if is_transient(&e) => {}
                Err(e) => return Err(End::Bad(e.to_string())),
            }
        }
        Ok(true)
    }

    fn write(&mut self, mut reply: Frame) -> Result<(), End> {
        if reply.payload_len() > TcpStore::MAX_FRAME_LEN {
            // Cannot happen with the limits on keys and values; be safe.
            reply = Frame::new(ST_ERROR);
            reply.raw(b"reply too large");
        }
        self.stream
            .write_all(&reply.into_bytes())
            .map_err(|e| End::Bad(format!("writing reply: {e}")))
    }
}

/// A read that timed out or was interrupted: poll again.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Compares tokens without an early exit, so timing does not tell an
/// attacker how much of a guess was right.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    std::hint::black_box(diff) == 0
}

// ---------------------------------------------------------------------------
// Encoding.

/// A frame being built: a length placeholder, then the payload.
struct Frame {
    buf: Vec<u8>,
}

impl Frame {
    fn new_raw() -> Self {
        Frame {
            buf: vec![0, 0, 0, 0],
        }
    }

    fn new(first: u8) -> Self {
        let mut f = Self::new_raw();
        f.buf.push(first);
        f
    }

    fn payload_len(&self) -> usize {
        self.buf.len() - 4
    }

    fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    fn u32(&mut self, v: u32) {
        self.raw(&v.to_le_bytes());
    }

    fn u64(&mut self, v: u64) {
        self.raw(&v.to_le_bytes());
    }

    fn i64(&mut self, v: i64) {
        self.raw(&v.to_le_bytes());
    }

    /// A length-prefixed byte string. Callers bound lengths well below 4 GiB.
    fn bytes(&mut self, b: &[u8]) {
        self.u32(b.len() as u32);
        self.raw(b);
    }

    /// The frame on the wire: the length header patched in, then the payload.
    fn into_bytes(mut self) -> Vec<u8> {
        // Callers check payloads against MAX_FRAME_LEN, far below 4 GiB.
        let len = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&len.to_le_bytes());
        self.buf
    }
}

/// A cursor over a received payload; every error is a protocol violation.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn raw(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.buf.len() {
            return Err(format!(
                "truncated field: need {n} bytes, {} left",
                self.buf.len()
            ));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], String> {
        Ok(self.raw(N)?.try_into().expect("raw returned N bytes"))
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn i64(&mut self) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// A length-prefixed byte string of at most `max` bytes.
    fn bytes(&mut self, max: usize) -> Result<&'a [u8], String> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(format!("{n}-byte field exceeds the limit of {max}"));
        }
        self.raw(n)
    }

    fn key(&mut self) -> Result<&'a str, String> {
        let b = self.bytes(MAX_KEY_LEN)?;
        std::str::from_utf8(b).map_err(|_| "key is not UTF-8".to_string())
    }

    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    fn finish(&self) -> Result<(), String> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes", self.buf.len()))
        }
    }
}
