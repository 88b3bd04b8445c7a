//! A store hosted or joined without a token warns once per process, saying
//! how to set one; with a token it says nothing. Its own test binary: the
//! warning is once per process, and this one installs the global
//! subscriber that counts it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use symm_runtime::{Store, TcpStore};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// Every warning's message.
static WARNINGS: Mutex<Vec<String>> = Mutex::new(Vec::new());
static NEXT_SPAN: AtomicUsize = AtomicUsize::new(1);

/// Keeps the messages of events at WARN and above.
struct Warnings;

struct Message(String);

impl Visit for Message {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

impl Subscriber for Warnings {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= Level::WARN
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(NEXT_SPAN.fetch_add(1, Ordering::Relaxed) as u64)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut m = Message(String::new());
        event.record(&mut m);
        WARNINGS.lock().unwrap().push(m.0);
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

fn no_token_warnings() -> Vec<String> {
    WARNINGS
        .lock()
        .unwrap()
        .iter()
        .filter(|w| w.contains("without a token"))
        .cloned()
        .collect()
}

#[test]
fn a_store_without_a_token_warns_once_per_process() {
    tracing::subscriber::set_global_default(Warnings).unwrap();
    let t = Duration::from_secs(10);
    let any = "127.0.0.1:0".parse().unwrap();
    // With a token: silence.
    let guarded = TcpStore::host(any, Some("s3cret")).unwrap();
    let c = TcpStore::connect(guarded.local_addr(), Some("s3cret"), t).unwrap();
    c.set("k", b"v").unwrap();
    assert_eq!(no_token_warnings(), Vec::<String>::new());
    // Without: one warning, however many stores and clients.
    let open = TcpStore::host(any, None).unwrap();
    let addr = open.local_addr();
    let clients: Vec<TcpStore> = (0..3)
        .map(|_| TcpStore::connect(addr, None, t).unwrap())
        .collect();
    let other = TcpStore::host(any, Some("")).unwrap();
    let warnings = no_token_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert!(w.contains(&addr.to_string()), "{w}");
    assert!(w.contains("forge"), "{w}");
    assert!(
        w.contains("export SYMM_STORE_TOKEN=$(openssl rand -hex 16)"),
        "{w}"
    );
    drop((clients, c, other, open, guarded));
}
