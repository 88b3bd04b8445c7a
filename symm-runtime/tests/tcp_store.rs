//! `TcpStore`: many clients, timeouts, retry, tokens, shutdown, limits and
//! hostile input.

use rand::Rng;
use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use symm_runtime::store::{TcpStoreLimits, MAX_KEY_LEN};
use symm_runtime::{InProcessStore, Store, StoreError, TcpStore};

const T: Duration = Duration::from_secs(10);

/// A frame length that nothing else in these tests allocates near: an
/// allocation of about this size means a reader allocated for a frame
/// header before the body arrived.
const ODD_LEN: usize = 12_345_679;
static NEAR_ODD_LEN: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting allocations within 64 KiB of `ODD_LEN`.
struct Spy;

fn note(size: usize) {
    if size.abs_diff(ODD_LEN) <= 64 << 10 {
        NEAR_ODD_LEN.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to the system allocator unchanged; counting
// allocates nothing.
unsafe impl GlobalAlloc for Spy {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is the
        // system allocator's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is the
        // system allocator's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is the
        // system allocator's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc`'s contract, which is the
        // system allocator's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Spy = Spy;

/// A host with a short linger and frame timeout, for shutdown tests.
fn host_with(linger: Duration, max_connections: usize, frame_timeout: Duration) -> TcpStore {
    let mut limits = TcpStoreLimits::default();
    limits.linger = linger;
    limits.max_connections = max_connections;
    limits.frame_timeout = frame_timeout;
    TcpStore::host_with(localhost0(), None, limits).unwrap()
}

fn localhost0() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// A port nothing listens on (bound, then released).
fn free_port_addr() -> SocketAddr {
    TcpListener::bind(localhost0())
        .unwrap()
        .local_addr()
        .unwrap()
}

fn host() -> TcpStore {
    TcpStore::host(localhost0(), None).unwrap()
}

fn unavailable(e: StoreError) -> String {
    match e {
        StoreError::Unavailable(m) => m,
        e => panic!("expected Unavailable, got {e:?}"),
    }
}

#[test]
fn many_clients_set_get_wait_and_add() {
    const N: usize = 32;
    const ADDS: usize = 20;
    let host = Arc::new(host());
    let addr = host.local_addr();
    let threads: Vec<_> = (0..N)
        .map(|i| {
            std::thread::spawn(move || {
                let s = TcpStore::connect(addr, None, T).unwrap();
                assert!(!s.is_host());
                s.set(
                    &format!("symm/test/rank/{i}"),
                    format!("value-{i}").as_bytes(),
                )
                .unwrap();
                assert_eq!(
                    s.try_get(&format!("symm/test/rank/{i}")).unwrap().unwrap(),
                    format!("value-{i}").as_bytes()
                );
                let mut counts = Vec::new();
                for _ in 0..ADDS {
                    counts.push(s.add("symm/test/counter", 1).unwrap());
                }
                let keys: Vec<String> = (0..N).map(|j| format!("symm/test/rank/{j}")).collect();
                s.wait(&keys, T).unwrap();
                for j in 0..N {
                    let v = s.get(&format!("symm/test/rank/{j}"), T).unwrap();
                    assert_eq!(v, format!("value-{j}").as_bytes());
                }
                counts
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    let mut total = 0;
    for t in threads {
        let counts = t.join().unwrap();
        total += counts.len();
        all.extend(counts);
    }
    let n = (N * ADDS) as i64;
    assert_eq!(total, N * ADDS);
    assert_eq!(all, (1..=n).collect::<BTreeSet<_>>());
    // The host sees what clients wrote, with InProcessStore's encoding.
    assert_eq!(host.add("symm/test/counter", 0).unwrap(), n);
    assert_eq!(
        host.try_get("symm/test/counter").unwrap().unwrap(),
        n.to_string().as_bytes()
    );
    let reference = InProcessStore::new();
    for _ in 0..n {
        reference.add("c", 1).unwrap();
    }
    assert_eq!(
        reference.try_get("c").unwrap(),
        host.try_get("symm/test/counter").unwrap()
    );
    // And clients see what the host writes.
    host.set("from/host", b"hello").unwrap();
    let c = TcpStore::connect(addr, None, T).unwrap();
    assert_eq!(c.get("from/host", T).unwrap(), b"hello");
    assert_eq!(c.try_get("absent").unwrap(), None);
    c.set("empty", b"").unwrap();
    assert_eq!(host.try_get("empty").unwrap(), Some(vec![]));
}

#[test]
fn counters_and_not_a_counter_over_tcp() {
    let host = host();
    let c = TcpStore::connect(host.local_addr(), None, T).unwrap();
    assert_eq!(c.add("c", 5).unwrap(), 5);
    assert_eq!(c.add("c", -7).unwrap(), -2);
    assert_eq!(c.try_get("c").unwrap().unwrap(), b"-2");
    c.set("n", b"41").unwrap();
    assert_eq!(c.add("n", 1).unwrap(), 42);
    c.set("text", b"abc").unwrap();
    assert_eq!(
        c.add("text", 1).unwrap_err(),
        StoreError::NotACounter { key: "text".into() }
    );
    // The error did not break the connection.
    assert_eq!(c.add("c", 2).unwrap(), 0);
}

#[test]
fn wait_wakes_when_another_client_sets() {
    let host = host();
    let addr = host.local_addr();
    let setter = std::thread::spawn(move || {
        let s = TcpStore::connect(addr, None, T).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        s.set("late", b"v").unwrap();
    });
    let c = TcpStore::connect(addr, None, T).unwrap();
    let t = Instant::now();
    assert_eq!(c.get("late", T).unwrap(), b"v");
    assert!(t.elapsed() < Duration::from_secs(5));
    setter.join().unwrap();
}

#[test]
fn wait_times_out_naming_missing_keys() {
    let host = host();
    let c = TcpStore::connect(host.local_addr(), None, T).unwrap();
    c.set("present", b"x").unwrap();
    let timeout = Duration::from_millis(300);
    for store in [&c as &dyn Store, &host as &dyn Store] {
        let t = Instant::now();
        let err = store
            .wait(&["present".into(), "missing/key".into()], timeout)
            .unwrap_err();
        let elapsed = t.elapsed();
        assert!(elapsed >= timeout, "{elapsed:?}");
        assert!(elapsed <= timeout + Duration::from_secs(1), "{elapsed:?}");
        assert!(err.to_string().contains("missing/key"), "{err}");
        assert_eq!(
            err,
            StoreError::Timeout {
                timeout,
                missing: vec!["missing/key".into()]
            }
        );
    }
    // A timed-out wait leaves the connection usable.
    c.set("after", b"ok").unwrap();
    assert_eq!(c.try_get("after").unwrap().unwrap(), b"ok");
    // A zero timeout checks once.
    c.wait(&["present".into()], Duration::ZERO).unwrap();
    // A timeout too large for the wire waits without overflowing.
    c.wait(&["present".into()], Duration::MAX).unwrap();
}

#[test]
fn connect_retries_until_the_server_starts() {
    let addr = free_port_addr();
    let server = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        TcpStore::host(addr, None).unwrap()
    });
    let t = Instant::now();
    let c = TcpStore::connect(addr, None, T).unwrap();
    let elapsed = t.elapsed();
    let host = server.join().unwrap();
    assert!(elapsed >= Duration::from_millis(250), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    c.set("k", b"v").unwrap();
    assert_eq!(host.try_get("k").unwrap().unwrap(), b"v");
    // Clients leave first, or the host's drop lingers for them.
    drop(c);
}

#[test]
fn connect_to_nothing_fails_after_the_timeout() {
    let addr = free_port_addr();
    let timeout = Duration::from_millis(500);
    let t = Instant::now();
    let err = TcpStore::connect(addr, None, timeout).unwrap_err();
    let elapsed = t.elapsed();
    assert!(elapsed >= timeout, "{elapsed:?}");
    assert!(
        elapsed < timeout + Duration::from_millis(1500),
        "{elapsed:?}"
    );
    let msg = unavailable(err);
    assert!(msg.contains(&addr.to_string()), "{msg}");
    assert!(msg.contains("within 500ms"), "{msg}");
}

#[test]
fn tokens_are_checked() {
    let host = TcpStore::host(localhost0(), Some("s3cret")).unwrap();
    let addr = host.local_addr();
    let good = TcpStore::connect(addr, Some("s3cret"), T).unwrap();
    good.set("k", b"v").unwrap();
    assert_eq!(good.try_get("k").unwrap().unwrap(), b"v");

    // Refusals are immediate, not retried until the timeout.
    let t = Instant::now();
    let msg = unavailable(TcpStore::connect(addr, Some("s3cres"), T).unwrap_err());
    assert!(msg.contains("refused the token"), "{msg}");
    assert!(msg.contains(&addr.to_string()), "{msg}");
    let msg = unavailable(TcpStore::connect(addr, Some("s3cret-and-more"), T).unwrap_err());
    assert!(msg.contains("refused the token"), "{msg}");
    let msg = unavailable(TcpStore::connect(addr, None, T).unwrap_err());
    assert!(msg.contains("requires a token"), "{msg}");
    let msg = unavailable(TcpStore::connect(addr, Some(""), T).unwrap_err());
    assert!(msg.contains("requires a token"), "{msg}");
    assert!(t.elapsed() < Duration::from_secs(5));

    let open = host_without_token();
    let msg = unavailable(TcpStore::connect(open.local_addr(), Some("s3cret"), T).unwrap_err());
    assert!(msg.contains("has no token"), "{msg}");
    TcpStore::connect(open.local_addr(), None, T).unwrap();

    // The good client was not disturbed by the refused ones.
    assert_eq!(good.try_get("k").unwrap().unwrap(), b"v");
}

fn host_without_token() -> TcpStore {
    host()
}

#[test]
fn oversized_requests_are_refused_before_sending() {
    let host = host();
    let c = TcpStore::connect(host.local_addr(), None, T).unwrap();
    let big = vec![7u8; TcpStore::MAX_VALUE_LEN + 1];
    let err = c.set("big", &big).unwrap_err();
    assert_eq!(
        err,
        StoreError::TooLarge {
            what: "value",
            len: big.len(),
            max: TcpStore::MAX_VALUE_LEN
        }
    );
    assert!(err.to_string().contains("limit"), "{err}");
    // Nothing was sent: the connection still works and the key is absent.
    assert_eq!(c.try_get("big").unwrap(), None);
    // The host refuses the same value, so every value can be served.
    assert!(matches!(
        host.set("big", &big),
        Err(StoreError::TooLarge { .. })
    ));
    let long_key = "k".repeat(MAX_KEY_LEN + 1);
    assert!(matches!(
        c.set(&long_key, b"v"),
        Err(StoreError::TooLarge { what: "key", .. })
    ));
    // The largest allowed value and key make the round trip.
    let max_key = "k".repeat(MAX_KEY_LEN);
    let max_val: Vec<u8> = (0..TcpStore::MAX_VALUE_LEN).map(|i| i as u8).collect();
    c.set(&max_key, &max_val).unwrap();
    assert!(c.try_get(&max_key).unwrap().unwrap() == max_val);
}

#[test]
fn a_client_still_connected_delays_the_hosts_drop_by_at_most_the_linger() {
    let linger = Duration::from_millis(500);
    let host = host_with(linger, TcpStore::MAX_CONNECTIONS, T);
    let addr = host.local_addr();
    let idle = TcpStore::connect(addr, None, T).unwrap();
    let waiter = std::thread::spawn(move || {
        let w = TcpStore::connect(addr, None, T).unwrap();
        let t = Instant::now();
        let r = w.wait(&["never".into()], Duration::from_secs(60));
        (r, t.elapsed())
    });
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    drop(host);
    let took = t.elapsed();
    // It lingered for the connected clients, then closed their connections.
    assert!(took >= linger - Duration::from_millis(20), "{took:?}");
    assert!(took < linger + Duration::from_secs(1), "{took:?}");
    let (r, waited) = waiter.join().unwrap();
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    let msg = unavailable(r.unwrap_err());
    assert!(msg.contains(&addr.to_string()), "{msg}");
    let msg = unavailable(idle.try_get("k").unwrap_err());
    assert!(msg.contains(&addr.to_string()), "{msg}");
    // The lost connection stays lost, with a clear error, no hang.
    let msg = unavailable(idle.set("k", b"v").unwrap_err());
    assert!(msg.contains("lost"), "{msg}");
    // The listener is closed: the port is free again.
    TcpListener::bind(addr).unwrap();
}

#[test]
fn dropping_the_host_after_its_clients_is_prompt() {
    // The default linger is 10 s; none of it is spent once clients left.
    let host = host();
    let addr = host.local_addr();
    let clients: Vec<TcpStore> = (0..4)
        .map(|i| {
            let c = TcpStore::connect(addr, None, T).unwrap();
            c.set(&format!("k{i}"), b"v").unwrap();
            c.add("joined", 1).unwrap();
            c
        })
        .collect();
    host.wait(&["k0".into(), "k3".into()], T).unwrap();
    drop(clients);
    let t = Instant::now();
    drop(host);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[test]
fn the_host_serves_connected_clients_until_they_leave() {
    // Rank 0 drops its store while another rank still reads its last keys:
    // that rank is served, rank 0's drop returns when it disconnects, and
    // nobody new gets in meanwhile.
    let host = host();
    let addr = host.local_addr();
    host.set("last", b"word").unwrap();
    let late = TcpStore::connect(addr, None, T).unwrap();
    let dropper = std::thread::spawn(move || {
        let t = Instant::now();
        drop(host);
        Instant::now() - t
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!dropper.is_finished(), "the host left a client behind");
    assert_eq!(late.try_get("last").unwrap().unwrap(), b"word");
    late.set("bye", b"").unwrap();
    assert!(
        TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_err(),
        "a lingering host accepted a new connection"
    );
    std::thread::sleep(Duration::from_millis(100));
    let t = Instant::now();
    drop(late);
    let took = dropper.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(took < Duration::from_secs(3), "{took:?}");
}

#[test]
fn a_slow_reader_cannot_hold_up_the_hosts_drop() {
    // The client asks for a 16 MiB value and reads 64 KiB every 100 ms from
    // a small receive buffer: the server's write keeps progressing, so no
    // write timeout fires; only closing the socket ends it.
    let linger = Duration::from_millis(300);
    let host = host_with(linger, TcpStore::MAX_CONNECTIONS, T);
    let addr = host.local_addr();
    let value = vec![1u8; TcpStore::MAX_VALUE_LEN];
    host.set("big", &value).unwrap();
    let mut s = raw_after_hello(addr);
    nix::sys::socket::setsockopt(&s, nix::sys::socket::sockopt::RcvBuf, &(64 << 10)).unwrap();
    let mut payload = vec![2u8];
    payload.extend_from_slice(&3u32.to_le_bytes());
    payload.extend_from_slice(b"big");
    s.write_all(&frame(&payload)).unwrap();
    let fast = Arc::new(AtomicBool::new(false));
    let reader = {
        let fast = fast.clone();
        std::thread::spawn(move || {
            s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
            let start = Instant::now();
            let mut buf = vec![0u8; 64 << 10];
            let mut got = 0;
            while start.elapsed() < Duration::from_secs(60) {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got += n,
                }
                if !fast.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            got
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let t = Instant::now();
    drop(host);
    let took = t.elapsed();
    fast.store(true, Ordering::Relaxed);
    assert!(took >= linger - Duration::from_millis(20), "{took:?}");
    assert!(took < linger + Duration::from_secs(1), "{took:?}");
    // The client saw the reply cut off, not finished.
    let got = reader.join().unwrap();
    assert!(got < 4 + 1 + 4 + value.len(), "{got}");
}

/// How many connection threads the host at `addr` runs, as Linux names
/// them (15 bytes of "symm-conn-PORT-PEER").
fn connection_threads(addr: SocketAddr) -> usize {
    let name = format!("symm-conn-{}-", addr.port());
    let shown = &name[..name.len().min(15)];
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim_end() == shown)
        .count()
}

/// This process's thread count.
fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("Threads:")).unwrap();
    line["Threads:".len()..].trim().parse().unwrap()
}

#[test]
fn connections_beyond_the_limit_are_closed_at_once() {
    const CAP: usize = 8;
    const FLOOD: usize = 300;
    let host = host_with(T, CAP, Duration::from_millis(500));
    let addr = host.local_addr();
    let good = TcpStore::connect(addr, None, T).unwrap();
    good.set("k", b"v").unwrap();
    let before = threads();
    // Connections that never say hello.
    let flood: Vec<TcpStream> = (0..FLOOD)
        .map(|_| TcpStream::connect_timeout(&addr, T).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let conn_threads = connection_threads(addr);
    let grown = threads().saturating_sub(before);
    assert!(conn_threads <= CAP, "{conn_threads} connection threads");
    // Loose: other tests start and end threads meanwhile.
    assert!(grown < FLOOD / 2, "{grown} more threads");
    // All but the slots left were refused by the server.
    let closed = flood
        .iter()
        .filter(|s| {
            // EOF or a reset: closed; nothing to read yet: open.
            s.set_nonblocking(true).unwrap();
            !matches!(
                (&**s).read(&mut [0u8; 1]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
            )
        })
        .count();
    assert!(closed >= FLOOD - (CAP - 1), "only {closed} closed");
    // The connected client was served throughout.
    assert_eq!(good.get("k", T).unwrap(), b"v");
    good.set("k2", b"v2").unwrap();
    // Those that took slots without a hello are dropped after the handshake
    // timeout, and a new client gets in.
    let t = Instant::now();
    let fresh = loop {
        match TcpStore::connect(addr, None, T) {
            Ok(c) => break c,
            Err(StoreError::Full { .. }) if t.elapsed() < Duration::from_secs(3) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Err(e) => panic!("{e:?} after {:?}", t.elapsed()),
        }
    };
    assert_eq!(fresh.try_get("k2").unwrap().unwrap(), b"v2");
    drop(flood);
    drop((good, fresh));
    let t = Instant::now();
    drop(host);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

// ---------------------------------------------------------------------------
// Hostile input.

const MAGIC: &[u8] = b"SYMMSTOR";

fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    s
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_le_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

/// The protocol version these tests speak.
const VERSION: u16 = 3;

/// A hello frame with `token`.
fn hello(token: &[u8]) -> Vec<u8> {
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&VERSION.to_le_bytes());
    hello.extend_from_slice(&(token.len() as u32).to_le_bytes());
    hello.extend_from_slice(token);
    frame(&hello)
}

/// A fake host's reply accepting a hello, with this idle timeout in ms.
fn hello_ok(idle_ms: Option<u64>) -> Vec<u8> {
    let mut reply = vec![0u8];
    reply.extend_from_slice(&VERSION.to_le_bytes());
    reply.extend_from_slice(&idle_ms.unwrap_or(u64::MAX).to_le_bytes());
    frame(&reply)
}

/// A raw connection past a valid handshake with `token`; returns it and
/// the idle timeout the host announced.
fn raw_after_hello_with(addr: SocketAddr, token: &[u8]) -> (TcpStream, u64) {
    let mut s = raw(addr);
    s.write_all(&hello(token)).unwrap();
    let mut reply = [0u8; 15];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(
        reply[..7],
        [11, 0, 0, 0, 0, VERSION as u8, 0],
        "hello accepted"
    );
    let idle_ms = u64::from_le_bytes(reply[7..].try_into().unwrap());
    (s, idle_ms)
}

/// A raw connection past a valid, tokenless handshake.
fn raw_after_hello(addr: SocketAddr) -> TcpStream {
    raw_after_hello_with(addr, b"").0
}

/// Asserts the server closes `s` within a second (reads drain whatever it
/// sent before closing, then see EOF or a reset).
fn assert_closed_by_server(mut s: TcpStream, what: &str) {
    let t = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                panic!("{what}: server kept the connection open")
            }
            Err(_) => break,
        }
    }
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "{what}: {:?}",
        t.elapsed()
    );
}

fn assert_still_serving(good: &TcpStore, addr: SocketAddr, rng: &mut impl Rng, what: &str) {
    let key = format!("fresh/{}", rng.random::<u64>());
    let mut value = vec![0u8; rng.random_range(0..256)];
    rng.fill(&mut value[..]);
    good.set(&key, &value)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(good.get(&key, T).unwrap(), value, "{what}");
    let fresh = TcpStore::connect(addr, None, T).unwrap();
    assert_eq!(fresh.try_get(&key).unwrap().unwrap(), value, "{what}");
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let host = host();
    let addr = host.local_addr();
    let good = Arc::new(TcpStore::connect(addr, None, T).unwrap());
    let max = TcpStore::MAX_FRAME_LEN as u32;
    let threads: Vec<_> = (0..4)
        .map(|thread| {
            let good = good.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                for round in 0..6 {
                    let case = (thread + round) % 8;
                    let what = format!("case {case}");
                    match case {
                        // Random bytes instead of a hello (more than a
                        // hello can hold, so the server cannot wait for more).
                        0 => {
                            let mut s = raw(addr);
                            let mut junk = vec![0u8; rng.random_range(2048..8192)];
                            rng.fill(&mut junk[..]);
                            let _ = s.write_all(&junk);
                            assert_closed_by_server(s, &what);
                        }
                        // A length above the maximum, before and after hello.
                        1 => {
                            let mut s = raw(addr);
                            let len = rng.random_range(max + 1..=u32::MAX);
                            s.write_all(&len.to_le_bytes()).unwrap();
                            assert_closed_by_server(s, &what);
                            let mut s = raw_after_hello(addr);
                            s.write_all(&len.to_le_bytes()).unwrap();
                            assert_closed_by_server(s, &what);
                        }
                        // A valid length, a truncated body, then close.
                        2 => {
                            let mut s = raw_after_hello(addr);
                            let len = rng.random_range(16..4096u32);
                            let mut part = vec![0u8; rng.random_range(0..len as usize)];
                            rng.fill(&mut part[..]);
                            s.write_all(&len.to_le_bytes()).unwrap();
                            s.write_all(&part).unwrap();
                            s.shutdown(Shutdown::Write).unwrap();
                            assert_closed_by_server(s, &what);
                        }
                        // Unknown op codes.
                        3 => {
                            let mut s = raw_after_hello(addr);
                            let op = loop {
                                let op: u8 = rng.random();
                                if !(1..=4).contains(&op) {
                                    break op;
                                }
                            };
                            let mut payload = vec![op; 1 + rng.random_range(0..64)];
                            rng.fill(&mut payload[1..]);
                            s.write_all(&frame(&payload)).unwrap();
                            assert_closed_by_server(s, &what);
                        }
                        // A valid hello, then random garbage.
                        4 => {
                            let mut s = raw_after_hello(addr);
                            let mut junk = vec![0u8; rng.random_range(1..4096)];
                            rng.fill(&mut junk[..]);
                            let _ = s.write_all(&junk);
                            let _ = s.shutdown(Shutdown::Write);
                            assert_closed_by_server(s, &what);
                        }
                        // Truncated fields inside a complete frame: a set
                        // whose key length runs past the frame.
                        5 => {
                            let mut s = raw_after_hello(addr);
                            let mut payload = vec![1u8];
                            let n = rng.random_range(10..=MAX_KEY_LEN as u32);
                            payload.extend_from_slice(&n.to_le_bytes());
                            payload.extend_from_slice(&[b'k'; 9]);
                            s.write_all(&frame(&payload)).unwrap();
                            assert_closed_by_server(s, &what);
                        }
                        // A key that is not UTF-8.
                        6 => {
                            let mut s = raw_after_hello(addr);
                            let mut key = vec![b'k'; rng.random_range(0..16)];
                            key.push(0xff);
                            let mut payload = vec![2u8];
                            payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
                            payload.extend_from_slice(&key);
                            s.write_all(&frame(&payload)).unwrap();
                            assert_closed_by_server(s, &what);
                        }
                        // A wait claiming more keys than its frame holds,
                        // and a hello with a wrong magic.
                        _ => {
                            let mut s = raw_after_hello(addr);
                            let mut payload = vec![3u8];
                            payload.extend_from_slice(&100u64.to_le_bytes());
                            payload.extend_from_slice(&rng.random_range(2..u32::MAX).to_le_bytes());
                            payload.extend_from_slice(&0u32.to_le_bytes());
                            s.write_all(&frame(&payload)).unwrap();
                            assert_closed_by_server(s, &what);
                            let mut s = raw(addr);
                            let mut hello = b"SYMMSTOX".to_vec();
                            hello.extend_from_slice(&[1, 0, 0, 0, 0, 0]);
                            s.write_all(&frame(&hello)).unwrap();
                            assert_closed_by_server(s, &what);
                        }
                    }
                    assert_still_serving(&good, addr, &mut rng, &what);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn a_valid_raw_request_is_answered() {
    // Pins the wire format the hostile tests rely on: a try_get of an
    // absent key answers status 2 (none), a set answers 0 (ok).
    let host = host();
    let mut s = raw_after_hello(host.local_addr());
    let mut payload = vec![2u8];
    payload.extend_from_slice(&3u32.to_le_bytes());
    payload.extend_from_slice(b"abc");
    s.write_all(&frame(&payload)).unwrap();
    let mut reply = [0u8; 5];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [1, 0, 0, 0, 2]);
    let mut payload = vec![1u8];
    payload.extend_from_slice(&3u32.to_le_bytes());
    payload.extend_from_slice(b"abc");
    payload.extend_from_slice(&2u32.to_le_bytes());
    payload.extend_from_slice(b"xy");
    s.write_all(&frame(&payload)).unwrap();
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply, [1, 0, 0, 0, 0]);
    assert_eq!(host.try_get("abc").unwrap().unwrap(), b"xy");
}

#[test]
fn a_frame_header_alone_costs_the_server_no_memory() {
    let frame_timeout = Duration::from_millis(300);
    let host = host_with(T, TcpStore::MAX_CONNECTIONS, frame_timeout);
    let addr = host.local_addr();
    let good = TcpStore::connect(addr, None, T).unwrap();
    let mut rng = rand::rng();
    let mut s = raw_after_hello(addr);
    s.write_all(&(ODD_LEN as u32).to_le_bytes()).unwrap();
    s.write_all(b"just a few bytes").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        NEAR_ODD_LEN.load(Ordering::Relaxed),
        0,
        "allocated for the announced length"
    );
    assert_still_serving(&good, addr, &mut rng, "body pending");
    // The rest never comes: closed once the frame timeout passes.
    let t = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    assert!(matches!(s.read(&mut [0u8; 1]), Ok(0) | Err(_)));
    assert!(t.elapsed() < frame_timeout + Duration::from_secs(1));
    assert_still_serving(&good, addr, &mut rng, "after the timeout");
    assert_eq!(NEAR_ODD_LEN.load(Ordering::Relaxed), 0);
}

#[test]
fn a_frame_header_alone_costs_the_client_no_memory() {
    // A fake store accepts the hello, then answers the first request with a
    // header announcing a large reply, a few bytes of it, and a close.
    let listener = TcpListener::bind(localhost0()).unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        fn read_frame(mut s: &TcpStream) {
            let mut len = [0u8; 4];
            s.read_exact(&mut len).unwrap();
            let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
            s.read_exact(&mut body).unwrap();
        }
        read_frame(&s);
        s.write_all(&hello_ok(None)).unwrap();
        read_frame(&s);
        s.write_all(&(ODD_LEN as u32).to_le_bytes()).unwrap();
        s.write_all(&[1, 0, 0, 0, 0]).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(NEAR_ODD_LEN.load(Ordering::Relaxed), 0);
    });
    let c = TcpStore::connect(addr, None, T).unwrap();
    let msg = unavailable(c.try_get("k").unwrap_err());
    assert!(msg.contains("closed"), "{msg}");
    server.join().unwrap();
    assert_eq!(NEAR_ODD_LEN.load(Ordering::Relaxed), 0);
}

// ---------------------------------------------------------------------------
// Attacks: no token, idle connections, a full store, memory.

/// A random token, as symm-run draws one.
fn random_token(rng: &mut impl Rng) -> String {
    (0..16)
        .map(|_| format!("{:02x}", rng.random::<u8>()))
        .collect()
}

/// A host with `token` and these limits changed from the defaults.
fn host_limited(token: Option<&str>, change: impl FnOnce(&mut TcpStoreLimits)) -> TcpStore {
    let mut limits = TcpStoreLimits::default();
    change(&mut limits);
    TcpStore::host_with(localhost0(), token, limits).unwrap()
}

/// Reads one whole frame from a raw connection.
fn read_raw_frame(mut s: &TcpStream) -> Vec<u8> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).unwrap();
    let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
    s.read_exact(&mut body).unwrap();
    body
}

/// A raw set request's frame.
fn set_frame(key: &str, value: &[u8]) -> Vec<u8> {
    let mut payload = vec![1u8];
    payload.extend_from_slice(&(key.len() as u32).to_le_bytes());
    payload.extend_from_slice(key.as_bytes());
    payload.extend_from_slice(&(value.len() as u32).to_le_bytes());
    payload.extend_from_slice(value);
    frame(&payload)
}

#[test]
fn clients_without_the_token_are_refused_while_ranks_holding_it_rendezvous() {
    const RANKS: usize = 8;
    let mut rng = rand::rng();
    let token = random_token(&mut rng);
    let host = Arc::new(TcpStore::host(localhost0(), Some(&token)).unwrap());
    let addr = host.local_addr();
    let values: Vec<Vec<u8>> = (0..RANKS)
        .map(|_| {
            let mut v = vec![0u8; rng.random_range(1..512)];
            rng.fill(&mut v[..]);
            v
        })
        .collect();
    let values = Arc::new(values);
    let stop = Arc::new(AtomicBool::new(false));
    // Attackers: the real client without a token or with a wrong one, and
    // raw connections that try to forge rank 0's record after a refused
    // hello. All of them, all the time, while the ranks meet.
    let attackers: Vec<_> = (0..2)
        .map(|i| {
            let (stop, token) = (stop.clone(), token.clone());
            std::thread::spawn(move || {
                let mut rng = rand::rng();
                let mut tries = 0;
                while !stop.load(Ordering::Relaxed) || tries < 5 {
                    tries += 1;
                    let wrong = random_token(&mut rng);
                    let t = Instant::now();
                    let msg = unavailable(TcpStore::connect(addr, None, T).unwrap_err());
                    assert!(msg.contains("requires a token"), "{msg}");
                    assert!(msg.contains("SYMM_STORE_TOKEN"), "{msg}");
                    let msg = unavailable(TcpStore::connect(addr, Some(&wrong), T).unwrap_err());
                    assert!(msg.contains("refused the token"), "{msg}");
                    // One byte off is as wrong as any other guess.
                    let mut near = token.clone().into_bytes();
                    near[i] ^= 1;
                    let near = String::from_utf8(near).unwrap();
                    let msg = unavailable(TcpStore::connect(addr, Some(&near), T).unwrap_err());
                    assert!(msg.contains("refused the token"), "{msg}");
                    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
                    for (theirs, code) in [(&b""[..], 2u8), (wrong.as_bytes(), 1)] {
                        let mut s = raw(addr);
                        let mut bytes = hello(theirs);
                        bytes.extend(set_frame("rank/0", b"forged"));
                        let _ = s.write_all(&bytes);
                        let reply = read_raw_frame(&s);
                        assert_eq!(reply, [code, VERSION as u8, 0], "refusal code");
                        assert_closed_by_server(s, "refused hello");
                    }
                }
            })
        })
        .collect();
    let ranks: Vec<_> = (0..RANKS)
        .map(|r| {
            let (values, token) = (values.clone(), token.clone());
            std::thread::spawn(move || {
                let c = TcpStore::connect(addr, Some(&token), T).unwrap();
                c.set(&format!("rank/{r}"), &values[r]).unwrap();
                let keys: Vec<String> = (0..RANKS).map(|j| format!("rank/{j}")).collect();
                c.wait(&keys, T).unwrap();
                (0..RANKS)
                    .map(|j| c.get(&keys[j], T).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let seen: Vec<Vec<Vec<u8>>> = ranks.into_iter().map(|t| t.join().unwrap()).collect();
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.join().unwrap();
    }
    // Every rank read every rank's own record, bit for bit: nothing forged.
    for s in &seen {
        assert_eq!(s, &*values);
    }
    assert_eq!(host.try_get("rank/0").unwrap().unwrap(), values[0]);
}

#[test]
fn idle_connections_are_closed_after_the_hello_but_waits_and_clients_go_on() {
    let idle = Duration::from_millis(300);
    const CAP: usize = 4;
    let host = host_limited(None, |l| {
        l.idle_timeout = idle;
        l.max_connections = CAP;
    });
    let addr = host.local_addr();
    // A raw connection says hello, then nothing: the host announces its
    // idle timeout, then sends its notice and closes after it.
    let t = Instant::now();
    let (s, idle_ms) = raw_after_hello_with(addr, b"");
    assert_eq!(idle_ms, 300);
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let notice = read_raw_frame(&s);
    let waited = t.elapsed();
    let mut expected = vec![7u8];
    expected.extend_from_slice(&300u64.to_le_bytes());
    assert_eq!(notice, expected);
    assert!(waited >= idle, "{waited:?}");
    assert!(waited < idle + Duration::from_secs(1), "{waited:?}");
    assert_closed_by_server(s, "idle");

    // Idle connections cannot hold the slots: CAP of them fill the store,
    // and are gone after the idle timeout.
    let squatters: Vec<TcpStream> = (0..CAP).map(|_| raw_after_hello(addr)).collect();
    let e = TcpStore::connect(addr, None, T).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Full {
                connections: CAP,
                ..
            }
        ),
        "{e:?}"
    );
    std::thread::sleep(idle + Duration::from_millis(300));
    let waiter = TcpStore::connect(addr, None, T).unwrap();
    let setter = TcpStore::connect(addr, None, T).unwrap();
    drop(squatters);

    // A blocking wait three idle timeouts long is not idle: it is served
    // to its end.
    let t = Instant::now();
    let late = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(900));
        setter.set("late", b"v").unwrap();
        setter
    });
    waiter.wait(&["late".into()], T).unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(850),
        "{:?}",
        t.elapsed()
    );
    let setter = late.join().unwrap();
    // Clients idle past the timeout go on as if nothing happened: they
    // replace their connection before it is closed under them.
    for round in 0..3 {
        std::thread::sleep(idle + Duration::from_millis(100));
        let key = format!("after/{round}");
        setter.set(&key, b"x").unwrap();
        assert_eq!(waiter.get(&key, T).unwrap(), b"x");
        assert_eq!(waiter.add("count", 1).unwrap(), round + 1);
    }
    drop((waiter, setter));
    let t = Instant::now();
    drop(host);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

#[test]
fn a_request_the_host_closed_as_idle_is_sent_again() {
    // A fake host that never lets the client see an idle timeout coming:
    // its first connection answers the first request with the idle notice
    // (as when the notice and the request cross), its second serves that
    // request, then sends the notice unasked, and its third serves.
    let listener = TcpListener::bind(localhost0()).unwrap();
    let addr = listener.local_addr().unwrap();
    let mut notice = vec![7u8];
    notice.extend_from_slice(&60_000u64.to_le_bytes());
    let notice = frame(&notice);
    let server = std::thread::spawn(move || {
        let mut requests = Vec::new();
        for conn in 0..3 {
            let (mut s, _) = listener.accept().unwrap();
            read_raw_frame(&s);
            s.write_all(&hello_ok(None)).unwrap();
            requests.push(read_raw_frame(&s));
            if conn == 0 {
                s.write_all(&notice).unwrap();
                continue;
            }
            s.write_all(&frame(&[1, 1, 0, 0, 0, b'v'])).unwrap();
            if conn == 1 {
                s.write_all(&notice).unwrap();
            }
        }
        requests
    });
    let c = TcpStore::connect(addr, None, T).unwrap();
    assert_eq!(c.try_get("k").unwrap().unwrap(), b"v");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(c.try_get("k").unwrap().unwrap(), b"v");
    let requests = server.join().unwrap();
    // The request was sent again, whole, on the fresh connection.
    assert_eq!(requests.len(), 3);
    assert!(requests.iter().all(|r| *r == requests[0]), "{requests:?}");
}

#[test]
fn a_full_store_says_so_at_once_and_admits_clients_once_slots_free() {
    const CAP: usize = 4;
    let token = random_token(&mut rand::rng());
    let host = host_limited(Some(&token), |l| l.max_connections = CAP);
    let addr = host.local_addr();
    let mut clients: Vec<TcpStore> = (0..CAP)
        .map(|i| {
            let c = TcpStore::connect(addr, Some(&token), T).unwrap();
            c.set(&format!("k{i}"), b"v").unwrap();
            c
        })
        .collect();
    // One more: refused at once, whatever its timeout, saying why.
    for _ in 0..3 {
        let t = Instant::now();
        let e = TcpStore::connect(addr, Some(&token), Duration::from_secs(60)).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        assert_eq!(
            e,
            StoreError::Full {
                addr,
                connections: CAP
            }
        );
        assert!(e.to_string().contains("store full (4 connections)"), "{e}");
    }
    // On the wire: the refusal comes without waiting for a hello.
    let s = raw(addr);
    assert_eq!(read_raw_frame(&s), [5, VERSION as u8, 0, 4, 0, 0, 0]);
    assert_closed_by_server(s, "over the limit");
    // The connected ranks are served throughout.
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.get(&format!("k{}", (i + 1) % CAP), T).unwrap(), b"v");
    }
    // Once one leaves, a new rank gets in (after the host notices).
    drop(clients.pop());
    let t = Instant::now();
    let fresh = loop {
        match TcpStore::connect(addr, Some(&token), T) {
            Ok(c) => break c,
            Err(StoreError::Full { .. }) if t.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e:?} after {:?}", t.elapsed()),
        }
    };
    assert_eq!(fresh.get("k0", T).unwrap(), b"v");
}

#[test]
fn value_memory_limits_per_connection_and_in_all() {
    const PER_CONN: usize = 64 << 10;
    const TOTAL: usize = 160 << 10;
    let host = host_limited(None, |l| {
        l.max_bytes_per_connection = PER_CONN;
        l.max_bytes = TOTAL;
    });
    let addr = host.local_addr();
    let mut rng = rand::rng();
    let mut random = |n: usize| {
        let mut v = vec![0u8; n];
        rng.fill(&mut v[..]);
        v
    };
    // Each key costs its bytes, its value's, and 64.
    let cost = |key: &str, n: usize| key.len() + n + 64;
    let a = TcpStore::connect(addr, None, T).unwrap();
    let a0 = random(40 << 10);
    a.set("a/0", &a0).unwrap();
    let e = a.set("a/1", &random(30 << 10)).unwrap_err();
    assert_eq!(
        e,
        StoreError::OverLimit {
            limit: "per-connection value memory",
            max: PER_CONN,
            would_be: cost("a/0", 40 << 10) + cost("a/1", 30 << 10),
        }
    );
    assert!(
        e.to_string()
            .contains("per-connection value memory limit of 65536 bytes"),
        "{e}"
    );
    // Nothing was written, and the connection goes on: replacing its own
    // key frees what the old value cost.
    assert_eq!(a.try_get("a/1").unwrap(), None);
    let a0 = random(60 << 10);
    a.set("a/0", &a0).unwrap();
    // Other connections have their own allowance, up to the total.
    let b = TcpStore::connect(addr, None, T).unwrap();
    let b0 = random(60 << 10);
    b.set("b/0", &b0).unwrap();
    let c = TcpStore::connect(addr, None, T).unwrap();
    let used = cost("a/0", 60 << 10) + cost("b/0", 60 << 10);
    let e = c.set("c/0", &random(60 << 10)).unwrap_err();
    assert_eq!(
        e,
        StoreError::OverLimit {
            limit: "total value memory",
            max: TOTAL,
            would_be: used + cost("c/0", 60 << 10),
        }
    );
    assert!(
        e.to_string()
            .contains("total value memory limit of 163840 bytes"),
        "{e}"
    );
    // Counters count too: new ones fill what is left, then are refused.
    let mut counters = 0;
    let e = loop {
        match c.add(&format!("n/{counters}"), 1) {
            Ok(1) => counters += 1,
            Ok(n) => panic!("counter at {n}"),
            Err(e) => break e,
        }
        assert!(counters < 1000, "no limit reached");
    };
    assert!(
        matches!(
            e,
            StoreError::OverLimit {
                limit: "total value memory",
                ..
            }
        ),
        "{e:?}"
    );
    assert!(counters > 0);
    // The host's own writes are held to the total as well.
    assert!(matches!(
        host.set("h", &random(1024)),
        Err(StoreError::OverLimit { .. })
    ));
    // Everyone is still served, and reads what was written, exactly.
    assert_eq!(b.get("a/0", T).unwrap(), a0);
    assert_eq!(a.get("b/0", T).unwrap(), b0);
    assert_eq!(c.try_get("c/0").unwrap(), None);
    assert_eq!(c.add("n/0", 1).unwrap(), 2);
    let fresh = TcpStore::connect(addr, None, T).unwrap();
    assert_eq!(fresh.try_get("n/0").unwrap().unwrap(), b"2");
    // Freeing memory makes room again.
    a.set("a/0", b"").unwrap();
    fresh.set("c/0", &random(50 << 10)).unwrap();
}

#[test]
fn a_client_replaces_a_connection_idle_for_half_the_hosts_timeout() {
    // A fake host that announces a 400 ms idle timeout and answers every
    // request, on whichever connection, with "none", noting the connection.
    let listener = TcpListener::bind(localhost0()).unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let end = Instant::now() + Duration::from_secs(3);
        for conn in 0..2 {
            // Bounded: a client that never comes back ends the test.
            let mut s = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(_) if Instant::now() < end => std::thread::sleep(Duration::from_millis(10)),
                    Err(_) => return seen,
                }
            };
            s.set_nonblocking(false).unwrap();
            read_raw_frame(&s);
            s.write_all(&hello_ok(Some(400))).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut len = [0u8; 4];
            while s.read_exact(&mut len).is_ok() {
                let mut body = vec![0u8; u32::from_le_bytes(len) as usize];
                s.read_exact(&mut body).unwrap();
                seen.push(conn);
                s.write_all(&frame(&[2])).unwrap();
            }
        }
        seen
    });
    let c = TcpStore::connect(addr, None, T).unwrap();
    // Busy: the same connection.
    for _ in 0..3 {
        assert_eq!(c.try_get("k").unwrap(), None);
        std::thread::sleep(Duration::from_millis(50));
    }
    // Idle for more than half the timeout: a fresh connection, before the
    // host could close the old one under the request.
    std::thread::sleep(Duration::from_millis(250));
    assert_eq!(c.try_get("k").unwrap(), None);
    drop(c);
    assert_eq!(server.join().unwrap(), [0, 0, 0, 1]);
}

#[test]
fn connections_that_never_say_hello_cannot_keep_ranks_out() {
    const CAP: usize = 8;
    let token = random_token(&mut rand::rng());
    // The default 10 s for the hello: the squatters would hold their slots
    // that long.
    let host = host_limited(Some(&token), |l| l.max_connections = CAP);
    let addr = host.local_addr();
    let rank = TcpStore::connect(addr, Some(&token), T).unwrap();
    rank.set("k", b"v").unwrap();
    // The other slots, and then some, taken by connections that say nothing.
    let squatters: Vec<TcpStream> = (0..3 * CAP).map(|_| raw(addr)).collect();
    std::thread::sleep(Duration::from_millis(100));
    // Ranks still get in at once, each in place of the oldest squatter.
    let t = Instant::now();
    let ranks: Vec<TcpStore> = (0..CAP - 1)
        .map(|_| TcpStore::connect(addr, Some(&token), T).unwrap())
        .collect();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    for r in &ranks {
        assert_eq!(r.get("k", T).unwrap(), b"v");
    }
    // Now every slot holds a rank: the store is full, and says so, while
    // the squatters are all gone.
    let e = TcpStore::connect(addr, Some(&token), T).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Full {
                connections: CAP,
                ..
            }
        ),
        "{e:?}"
    );
    for s in squatters {
        assert_closed_by_server(s, "squatter");
    }
    assert_eq!(rank.get("k", T).unwrap(), b"v");
}

/// A last word is written by the host when its connection ends without a
/// release (its process died): once, not over a value already there, and
/// never after a release; a client sees the host's end on it.
#[test]
fn a_last_word_is_written_only_when_its_process_ends_without_one() {
    // A short linger: the host's drop below must not wait for the word.
    let host = host_with(Duration::from_millis(100), 64, T);
    let addr = host.local_addr();
    let client = TcpStore::connect(addr, None, T).unwrap();
    assert!(
        host.last_word("k", b"v", "n").unwrap().is_none(),
        "the host keeps no word"
    );
    // Released: nothing written.
    let w = client
        .last_word("released", b"gone", "count")
        .unwrap()
        .unwrap();
    assert_eq!(w.host_end(), None);
    drop(w);
    drop(client);
    // A killed process's word: its socket closes with no release.
    let word = |key: &str| {
        let mut raw = raw_after_hello(addr);
        let mut p = vec![5u8];
        for b in [key.as_bytes(), b"killed", b"count"] {
            p.extend_from_slice(&(b.len() as u32).to_le_bytes());
            p.extend_from_slice(b);
        }
        raw.write_all(&frame(&p)).unwrap();
        let mut reply = [0u8; 5];
        raw.read_exact(&mut reply).unwrap();
        assert_eq!(reply[4], 0, "last word accepted");
    };
    // A key that has its own value already keeps it.
    host.set("said", b"its own word").unwrap();
    word("said");
    word("raw");
    let deadline = Instant::now() + T;
    while host.try_get("raw").unwrap().is_none() {
        assert!(Instant::now() < deadline, "the last word was never written");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        host.try_get("raw").unwrap().as_deref(),
        Some(&b"killed"[..])
    );
    assert_eq!(
        host.try_get("released").unwrap(),
        None,
        "a released word stays unsaid"
    );
    assert_eq!(
        host.try_get("said").unwrap().as_deref(),
        Some(&b"its own word"[..])
    );
    assert_eq!(host.add("count", 0).unwrap(), 1, "one word written");
    // The host's end is seen on a live word's connection: here it closes
    // the store (a killed host: tests/fail_fast.rs).
    let client = TcpStore::connect(addr, None, T).unwrap();
    let w = client.last_word("late", b"x", "count").unwrap().unwrap();
    drop(client);
    drop(host);
    let deadline = Instant::now() + T;
    while w.host_end().is_none() {
        assert!(Instant::now() < deadline, "the host's end was not seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(w.host_end(), Some(symm_runtime::store::HostEnd::Left));
}
