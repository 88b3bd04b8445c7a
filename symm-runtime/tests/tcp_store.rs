//! `TcpStore`: many clients, timeouts, retry, tokens and hostile input.

use rand::Rng;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};
use symm_runtime::store::MAX_KEY_LEN;
use symm_runtime::{InProcessStore, Store, StoreError, TcpStore};

const T: Duration = Duration::from_secs(10);

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
fn dropping_the_host_stops_serving_promptly() {
    let host = host();
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
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
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

/// A raw connection past a valid, tokenless handshake.
fn raw_after_hello(addr: SocketAddr) -> TcpStream {
    let mut s = raw(addr);
    let mut hello = MAGIC.to_vec();
    hello.extend_from_slice(&1u16.to_le_bytes());
    hello.extend_from_slice(&0u32.to_le_bytes());
    s.write_all(&frame(&hello)).unwrap();
    let mut reply = [0u8; 7];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(reply[..5], [3, 0, 0, 0, 0], "hello accepted");
    s
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
