//! `FileStore`: semantics, cross-handle atomicity and key safety.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use symm_runtime::store::MAX_KEY_LEN;
use symm_runtime::{FileStore, InProcessStore, Store, StoreError};

const T: Duration = Duration::from_secs(10);

/// Names of the files in `dir`, sorted.
fn entries(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn set_get_and_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStore::new(dir.path().join("created/on/demand")).unwrap();
    assert!(s.dir().is_dir());
    assert_eq!(s.try_get("a").unwrap(), None);
    s.set("a", b"1").unwrap();
    assert_eq!(s.try_get("a").unwrap().as_deref(), Some(&b"1"[..]));
    s.set("a", b"22").unwrap();
    assert_eq!(s.get("a", Duration::from_millis(1)).unwrap(), b"22");
    s.set("empty", b"").unwrap();
    assert_eq!(s.try_get("empty").unwrap(), Some(vec![]));
    // Another handle on the same directory sees the same data.
    let other = FileStore::new(s.dir()).unwrap();
    assert_eq!(other.try_get("a").unwrap().unwrap(), b"22");
    // No temporary or lock files are left behind.
    let names = entries(s.dir());
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("k-")), "{names:?}");
}

#[test]
fn wait_times_out_naming_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = FileStore::new(dir.path()).unwrap();
    s.set("k0", b"x").unwrap();
    let timeout = Duration::from_millis(300);
    let t = Instant::now();
    let err = s
        .wait(&["k0".into(), "k1".into(), "k2/x".into()], timeout)
        .unwrap_err();
    let elapsed = t.elapsed();
    assert!(elapsed >= timeout, "{elapsed:?}");
    assert!(elapsed <= timeout + Duration::from_secs(1), "{elapsed:?}");
    assert!(err.to_string().contains("k2/x"), "{err}");
    assert_eq!(
        err,
        StoreError::Timeout {
            timeout,
            missing: vec!["k1".into(), "k2/x".into()]
        }
    );
    s.wait(&["k0".into()], Duration::ZERO).unwrap();
    s.wait(&["k0".into()], Duration::MAX).unwrap();
}

#[test]
fn wait_wakes_when_another_handle_sets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_owned();
    let setter = std::thread::spawn(move || {
        let s = FileStore::new(path).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        s.set("late", b"v").unwrap();
    });
    let s = FileStore::new(dir.path()).unwrap();
    let t = Instant::now();
    assert_eq!(s.get("late", T).unwrap(), b"v");
    let elapsed = t.elapsed();
    assert!(elapsed >= Duration::from_millis(90), "{elapsed:?}");
    // Polling backs off to at most 50 ms, so the wake-up is prompt.
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    setter.join().unwrap();
}

#[test]
fn add_is_atomic_across_handles() {
    const THREADS: usize = 8;
    const ADDS: usize = 200;
    let dir = tempfile::tempdir().unwrap();
    let threads: Vec<_> = (0..THREADS)
        .map(|_| {
            let path = dir.path().to_owned();
            std::thread::spawn(move || {
                let s = FileStore::new(path).unwrap();
                (0..ADDS)
                    .map(|_| s.add("symm/counter", 1).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = BTreeSet::new();
    let mut total = 0;
    for t in threads {
        let v = t.join().unwrap();
        total += v.len();
        all.extend(v);
    }
    let n = (THREADS * ADDS) as i64;
    assert_eq!(total, THREADS * ADDS);
    assert_eq!(all.len(), THREADS * ADDS, "returned values are distinct");
    assert_eq!(all, (1..=n).collect::<BTreeSet<_>>());
    let s = FileStore::new(dir.path()).unwrap();
    assert_eq!(s.add("symm/counter", 0).unwrap(), n);
    // Same encoding as InProcessStore's counters.
    let reference = InProcessStore::new();
    reference.add("c", n).unwrap();
    assert_eq!(
        s.try_get("symm/counter").unwrap(),
        reference.try_get("c").unwrap()
    );
    assert_eq!(s.try_get("symm/counter").unwrap().unwrap(), b"1600");
    assert_eq!(s.add("symm/counter", -1601).unwrap(), -1);
    // A value set as text counts too.
    s.set("n", b"41").unwrap();
    assert_eq!(s.add("n", 1).unwrap(), 42);
    s.set("text", b"abc").unwrap();
    assert_eq!(
        s.add("text", 1).unwrap_err(),
        StoreError::NotACounter { key: "text".into() }
    );
    // The failed add released its lock.
    s.set("text", b"7").unwrap();
    assert_eq!(s.add("text", 1).unwrap(), 8);
}

#[test]
fn odd_keys_stay_inside_the_directory() {
    let root = tempfile::tempdir().unwrap();
    let s = FileStore::new(root.path().join("store")).unwrap();
    let long = "x/".repeat(1000);
    let keys = [
        "symm/alloc/3/rank/1",
        "symm/alloc/3/rank/10",
        "ключ/日本語/🎉",
        "..",
        "../escape",
        "/etc/passwd",
        "",
        "A",
        "a",
        "with\0nul",
        long.as_str(),
    ];
    for (i, k) in keys.iter().enumerate() {
        s.set(k, format!("v{i}").as_bytes()).unwrap();
    }
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(s.get(k, T).unwrap(), format!("v{i}").as_bytes(), "{k:?}");
    }
    // One file per key, all inside the store directory.
    assert_eq!(entries(root.path()), ["store"]);
    assert_eq!(entries(s.dir()).len(), keys.len());
    assert!(entries(s.dir())
        .iter()
        .all(|n| n.len() < 255 && (n.starts_with("k-") || n.starts_with("h-"))));
    // Keys differing only by case are distinct.
    assert_eq!(s.try_get("A").unwrap().unwrap(), b"v7");
    assert_eq!(s.try_get("a").unwrap().unwrap(), b"v8");
    // Keys over the limit are refused, like TcpStore's.
    let too_long = "k".repeat(MAX_KEY_LEN + 1);
    assert!(matches!(
        s.set(&too_long, b"v"),
        Err(StoreError::TooLarge { what: "key", .. })
    ));
    s.set(&"k".repeat(MAX_KEY_LEN), b"max").unwrap();
    assert_eq!(
        s.try_get(&"k".repeat(MAX_KEY_LEN)).unwrap().unwrap(),
        b"max"
    );
}

#[test]
fn readers_never_see_a_torn_value() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let s = FileStore::new(dir.path()).unwrap();
    let (a, b) = (vec![b'a'; 1 << 18], vec![b'b'; 1 << 18]);
    s.set("v", &a).unwrap();
    let path = dir.path().to_owned();
    // The writer keeps alternating until the reader has read 200 times, so
    // every one of those reads overlaps the writes.
    let reads = Arc::new(AtomicUsize::new(0));
    let seen = reads.clone();
    let writer = std::thread::spawn(move || {
        let w = FileStore::new(path).unwrap();
        let mut i = 0;
        while i < 100 || seen.load(Ordering::Relaxed) < 200 {
            w.set("v", if i % 2 == 0 { &b } else { &a }).unwrap();
            i += 1;
        }
    });
    let (mut saw_a, mut saw_b) = (false, false);
    while !writer.is_finished() {
        let v = s.try_get("v").unwrap().unwrap();
        assert_eq!(v.len(), 1 << 18);
        assert!(v.iter().all(|&c| c == v[0]), "torn read");
        saw_a |= v[0] == b'a';
        saw_b |= v[0] == b'b';
        reads.fetch_add(1, Ordering::Relaxed);
    }
    writer.join().unwrap();
    assert!(
        saw_a && saw_b,
        "the reads overlapped the writes but saw only one value"
    );
}

// ---------------------------------------------------------------------------
// Directory protection.

use std::os::unix::fs::{symlink, MetadataExt as _, PermissionsExt as _};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::symlink_metadata(path).unwrap().mode() & 0o7777
}

/// The message of the `Unavailable` error `FileStore::new(dir)` fails with.
fn refused(dir: &std::path::Path) -> String {
    match FileStore::new(dir) {
        Err(StoreError::Unavailable(m)) => {
            let named = dir.display().to_string();
            assert!(m.contains(named.trim_end_matches('/')), "{m}");
            m
        }
        r => panic!("{} was not refused: {r:?}", dir.display()),
    }
}

#[test]
fn missing_directories_are_created_private() {
    let root = tempfile::tempdir().unwrap();
    let s = FileStore::new(root.path().join("a/b/c")).unwrap();
    for d in ["a", "a/b", "a/b/c"] {
        assert_eq!(mode(&root.path().join(d)), 0o700, "{d}");
    }
    s.set("k", b"v").unwrap();
    // Opening it again is fine, with or without a trailing slash.
    FileStore::new(root.path().join("a/b/c/")).unwrap();
    // So is an existing directory that only its owner can write.
    let shared = root.path().join("readable");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    FileStore::new(&shared).unwrap().set("k", b"v").unwrap();
}

#[test]
fn a_directory_others_can_write_is_refused() {
    let root = tempfile::tempdir().unwrap();
    for m in [0o777, 0o1777, 0o770, 0o702] {
        let dir = root.path().join(format!("open-{m:o}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(m)).unwrap();
        let msg = refused(&dir);
        assert!(msg.contains(&format!("mode {m:o}")), "{msg}");
        assert!(msg.contains("group or others"), "{msg}");
        // Nothing was written.
        assert!(entries(&dir).is_empty());
    }
}

#[test]
fn a_symlink_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let real = root.path().join("real");
    FileStore::new(&real).unwrap();
    let link = root.path().join("link");
    symlink(&real, &link).unwrap();
    for dir in [link.clone(), root.path().join("link/")] {
        let msg = refused(&dir);
        assert!(msg.contains("symbolic link"), "{msg}");
    }
    // A link to nowhere is not followed to create its target either.
    let dangling = root.path().join("dangling");
    symlink(root.path().join("nowhere"), &dangling).unwrap();
    assert!(matches!(
        FileStore::new(&dangling),
        Err(StoreError::Unavailable(_))
    ));
    assert!(!root.path().join("nowhere").exists());
}

#[test]
fn a_file_or_another_users_directory_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(matches!(
        FileStore::new(&file),
        Err(StoreError::Unavailable(_))
    ));
    // Only root can give a directory away.
    if nix::unistd::getuid().is_root() {
        let theirs = root.path().join("theirs");
        std::fs::create_dir(&theirs).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
        let msg = refused(&theirs);
        assert!(msg.contains("owned by uid 65534"), "{msg}");
    }
}
