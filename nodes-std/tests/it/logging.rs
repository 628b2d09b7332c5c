//! The `tracing` feature: the events for epochs, restores, worker threads
//! and skipped records, with their fields, caught by a small subscriber that
//! records every event (installed per test, so that tests running at the
//! same time do not see each other's events).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use nodes_std::prelude::*;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One event as the subscriber saw it.
#[derive(Debug, Clone)]
struct Captured {
    target: String,
    level: Level,
    /// Every field, the message under `message`, as text.
    fields: BTreeMap<String, String>,
}

impl Captured {
    fn message(&self) -> &str {
        self.field("message")
    }

    fn field(&self, name: &str) -> &str {
        self.fields
            .get(name)
            .map_or_else(|| panic!("no field {name:?} in {self:?}"), String::as_str)
    }
}

/// Records every event; spans are accepted and ignored (nodes emits none).
#[derive(Default)]
struct Collector {
    events: Arc<Mutex<Vec<Captured>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl Subscriber for Collector {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(Captured {
            target: event.metadata().target().to_owned(),
            level: *event.metadata().level(),
            fields,
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

/// The process-wide subscriber of this test binary: it records nothing
/// but keeps every callsite asking (`sometimes`), so a callsite first hit
/// by another test's thread, with no subscriber of its own, is not cached
/// as never enabled while a `capture` starts on another thread.
struct AskEveryTime;

impl Subscriber for AskEveryTime {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> tracing::subscriber::Interest {
        tracing::subscriber::Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Runs `f` with the collector as this thread's subscriber (worker threads
/// started inside inherit it) and returns the events it saw.
fn capture(f: impl FnOnce()) -> Vec<Captured> {
    static ASK_EVERY_TIME: std::sync::Once = std::sync::Once::new();
    ASK_EVERY_TIME.call_once(|| {
        let _ = tracing::subscriber::set_global_default(AskEveryTime);
    });
    let collector = Collector::default();
    let events = Arc::clone(&collector.events);
    tracing::subscriber::with_default(collector, || {
        // Callsites registered before (by threads of other tests) are
        // asked again, now that this collector is there.
        tracing::callsite::rebuild_interest_cache();
        f()
    });
    events.lock().unwrap().clone()
}

/// The events with `message`, in order.
fn named<'a>(events: &'a [Captured], message: &str) -> Vec<&'a Captured> {
    events.iter().filter(|e| e.message() == message).collect()
}

#[test]
fn every_event_has_the_nodes_target() {
    let events = capture(|| {
        let mut loader = Loader::new(IterableWrapper::new(0..2u8));
        loader.epoch().for_each(drop);
    });
    assert!(!events.is_empty());
    assert!(events.iter().all(|e| e.target == "nodes"), "{events:?}");
}

#[test]
fn epochs_log_their_number_at_start_and_their_item_count_at_end() {
    let events = capture(|| {
        let mut loader = Loader::new(IterableWrapper::new(0..3u8));
        assert_eq!(loader.epoch().count(), 3);
        assert_eq!(loader.epoch().count(), 3);
    });
    let started = named(&events, "epoch started");
    let ended = named(&events, "epoch ended");
    assert_eq!(started.len(), 2, "{events:?}");
    assert_eq!(ended.len(), 2, "{events:?}");
    for (k, (start, end)) in started.iter().zip(&ended).enumerate() {
        assert_eq!(start.level, Level::INFO);
        assert_eq!(start.field("epoch"), k.to_string());
        assert_eq!(start.field("resumed_at"), "0");
        assert_eq!(end.level, Level::INFO);
        assert_eq!(end.field("epoch"), k.to_string());
        assert_eq!(end.field("items"), "3");
    }
}

#[test]
fn a_restore_logs_both_fingerprints_and_the_outcome() {
    let pipeline = || IterableWrapper::new(0..4u8).batch(2).unwrap();
    let mut loader = Loader::new(pipeline());
    let mut epoch = loader.epoch();
    epoch.next();
    let state = State::from_json(&epoch.state_dict().unwrap().to_json().unwrap()).unwrap();
    let fingerprint: String = state.get("fingerprint").unwrap();

    let events = capture(|| {
        let mut resumed = Loader::new(pipeline());
        resumed.load_state_dict(&state).unwrap();
        assert_eq!(resumed.epoch().count(), 1);
    });
    let [restored] = named(&events, "state restored")[..] else {
        panic!("one restore expected: {events:?}");
    };
    assert_eq!(restored.level, Level::INFO);
    assert_eq!(restored.field("outcome"), "ok");
    assert_eq!(restored.field("fingerprint"), fingerprint);
    assert_eq!(restored.field("saved_fingerprint"), fingerprint);
    assert_eq!(restored.field("epoch"), "0");
    assert_eq!(restored.field("items"), "1");
    // The resumed epoch says where it stands.
    let [started] = named(&events, "epoch started")[..] else {
        panic!("one epoch expected: {events:?}");
    };
    assert_eq!(started.field("resumed_at"), "1");

    // Into a pipeline of another shape: refused, with the error.
    let events = capture(|| {
        let other = IterableWrapper::new(0..4u8).batch(3).unwrap();
        assert!(Loader::new(other).load_state_dict(&state).is_err());
    });
    let [failed] = named(&events, "restore failed")[..] else {
        panic!("one failed restore expected: {events:?}");
    };
    assert_eq!(failed.level, Level::WARN);
    assert_eq!(failed.field("outcome"), "error");
    assert_eq!(failed.field("saved_fingerprint"), fingerprint);
    assert_ne!(failed.field("fingerprint"), fingerprint);
    assert!(
        failed.field("error").contains("pipeline differs"),
        "{failed:?}"
    );
}

#[test]
fn a_running_pipeline_restored_from_a_state_logs_its_fingerprint() {
    let node = || IterableWrapper::new(0..4u8).header(3);
    let mut running = node().start().unwrap();
    running.next();
    let state = running.get_state().unwrap();
    // The fingerprint a loader computes for the same pipeline.
    let expected: String = Loader::new(node())
        .state_dict()
        .unwrap()
        .get("fingerprint")
        .unwrap();

    let events = capture(|| {
        let resumed = nodes_std::Running::start_from(node(), &state).unwrap();
        assert_eq!(resumed.count(), 2);
    });
    let [restored] = named(&events, "state restored")[..] else {
        panic!("one restore expected: {events:?}");
    };
    assert_eq!(restored.field("outcome"), "ok");
    assert_eq!(restored.field("fingerprint"), expected);
    // A node's own state does not carry one.
    assert_eq!(restored.field("saved_fingerprint"), "none");
}

#[test]
fn worker_threads_log_their_start_and_stop() {
    let events = capture(|| {
        let node = IterableWrapper::new(0..50u32)
            .par_map(|x| Ok(x + 1), ParallelOptions::new(2))
            .unwrap();
        let mut loader = Loader::new(node);
        assert_eq!(loader.epoch().count(), 50);
        // Joins the workers: their last events are in before `capture` ends.
        loader.shutdown();
    });
    for message in ["worker started", "worker stopped"] {
        let mut seen: Vec<(String, String)> = named(&events, message)
            .iter()
            .map(|e| {
                assert_eq!(e.level, Level::DEBUG);
                assert_eq!(e.field("node"), "ParallelMapper");
                (e.field("worker").to_owned(), e.field("thread").to_owned())
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                ("0".to_owned(), "nodes-par-map-0".to_owned()),
                ("1".to_owned(), "nodes-par-map-1".to_owned())
            ],
            "{message}: {events:?}"
        );
    }
}

#[test]
fn a_skipped_bad_record_logs_a_warning_with_its_node_index_and_error() {
    let events = capture(|| {
        let node = IterableWrapper::new(["1", "x", "3", "y"])
            .try_map(|s: &str| s.parse::<u8>())
            .on_error(ErrorPolicy::Skip);
        let items: Vec<u8> = node.start().unwrap().collect::<Result<_>>().unwrap();
        assert_eq!(items, [1, 3]);
    });
    let skipped = named(&events, "bad record skipped");
    assert_eq!(skipped.len(), 2, "{events:?}");
    for (record, (index, count)) in skipped.iter().zip([("1", "1"), ("3", "2")]) {
        assert_eq!(record.level, Level::WARN);
        assert_eq!(record.field("node"), "TryMapper");
        assert_eq!(record.field("index"), index);
        assert_eq!(record.field("skipped"), count);
        assert!(
            record.field("error").contains("invalid digit"),
            "{record:?}"
        );
    }
}

#[test]
fn a_delivered_bad_record_is_not_logged_as_skipped() {
    let events = capture(|| {
        let node = IterableWrapper::new(["1", "x"]).try_map(|s: &str| s.parse::<u8>());
        assert_eq!(node.start().unwrap().count(), 2);
    });
    assert!(
        named(&events, "bad record skipped").is_empty(),
        "{events:?}"
    );
}

#[test]
fn a_reader_skipping_a_malformed_line_logs_it() {
    let dir = std::env::temp_dir().join(format!("nodes-it-logging-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.jsonl"), "1\noops\n3\n").unwrap();
    let events = capture(|| {
        let rows: Vec<u8> = nodes_std::Files::in_dir(&dir)
            .unwrap()
            .read_jsonl::<u8>()
            .on_error(ErrorPolicy::Skip)
            .start()
            .unwrap()
            .collect::<Result<_>>()
            .unwrap();
        assert_eq!(rows, [1, 3]);
    });
    std::fs::remove_dir_all(&dir).unwrap();
    let [skipped] = named(&events, "bad record skipped")[..] else {
        panic!("one skipped record expected: {events:?}");
    };
    assert_eq!(skipped.level, Level::WARN);
    assert_eq!(skipped.field("node"), "ReadJsonl");
    assert!(
        skipped.field("error").contains("a.jsonl:2: invalid JSON"),
        "{skipped:?}"
    );
}
