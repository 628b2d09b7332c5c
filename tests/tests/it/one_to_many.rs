//! The one-to-many and many-to-one nodes: `flat_map`, `filter_map`,
//! `interleave` and `pack`. Each is checked with `testing::assert_save_load`
//! at every cut point of a pass (item boundaries, the middle of an item's
//! output, inner-node boundaries, the last item, past the end), against a
//! plain reference implementation, in `describe()` and in the stats, and
//! with damaged states.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nodes_std::prelude::*;
use nodes_std::testing::{assert_save_load, check_save_load};
use nodes_std::{Packed, ParallelOptions};

/// Every cut point of a pass of `len` items, and one past the end.
fn cuts(len: usize) -> std::ops::RangeInclusive<usize> {
    0..=len + 1
}

fn collect<N: Node>(node: N) -> Vec<N::Item> {
    node.start().unwrap().collect::<Result<_>>().unwrap()
}

/// A source whose order varies between runs: an out-of-order parallel map.
fn varying(n: u32) -> impl Node<Item = u32> {
    IterableWrapper::new(0..n)
        .par_map(Ok, ParallelOptions::new(2).in_order(false))
        .unwrap()
}

// ---------------------------------------------------------------------------
// flat_map

/// 0 to 3 copies of each item, so some outputs are empty.
fn copies(x: u32) -> Vec<u32> {
    vec![x * 10; (x % 4) as usize]
}

#[test]
fn flat_map_yields_each_output_in_order_and_skips_empty_ones() {
    let out = collect(IterableWrapper::new(0..6u32).flat_map(copies));
    assert_eq!(out, [10, 20, 20, 30, 30, 30, 50]);
    // A closure returning a `Vec` needs no annotation.
    let twice = collect(IterableWrapper::new(0..2u32).flat_map(|x| vec![x, x]));
    assert_eq!(twice, [0, 0, 1, 1]);
    // Any IntoIterator: an Option, a range.
    let ranges = collect(IterableWrapper::new(1..4u32).flat_map(|n| 0..n));
    assert_eq!(ranges, [0, 0, 1, 0, 1, 2]);
}

#[test]
fn flat_map_resumes_exactly_at_every_cut() {
    let factory = || IterableWrapper::new(0..10u32).flat_map(copies);
    let len = collect(factory()).len();
    assert_eq!(len, 13);
    for cut in cuts(len) {
        assert_save_load(factory, cut);
    }
    // Over a source restored by replay, and under a batch.
    let replayed = || {
        IterableWrapper::new(
            (0..12u32)
                .collect::<Vec<_>>()
                .into_iter()
                .filter(|x| x % 5 != 0),
        )
        .flat_map(|x| 0..x % 3)
        .batch(2)
        .unwrap()
    };
    for cut in cuts(collect(replayed()).len()) {
        assert_save_load(replayed, cut);
    }
}

#[test]
fn flat_map_state_stands_before_the_item_with_the_position_in_its_output_and_after_it() {
    let mut running = IterableWrapper::new(0..6u32)
        .flat_map(copies)
        .start()
        .unwrap();
    for _ in 0..2 {
        running.next().unwrap().unwrap(); // 10, then the first 20
    }
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"source":{"num_yielded":2},"output_idx":1,"after":{"num_yielded":3}}"#
    );
    let rest: Vec<u32> = IterableWrapper::new(0..6u32)
        .flat_map(copies)
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [20, 30, 30, 30, 50]);
}

#[test]
fn flat_map_calls_the_function_once_per_item_and_once_more_on_restore() {
    let calls = Arc::new(AtomicUsize::new(0));
    let build = |calls: Arc<AtomicUsize>| {
        IterableWrapper::new(0..5u32).flat_map(move |x| {
            calls.fetch_add(1, Ordering::SeqCst);
            vec![x; 3]
        })
    };
    let mut running = build(Arc::clone(&calls)).start().unwrap();
    for _ in 0..4 {
        running.next().unwrap().unwrap();
    }
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    let state = running.get_state().unwrap();
    let restored = Arc::new(AtomicUsize::new(0));
    let rest: Vec<u32> = build(Arc::clone(&restored))
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(rest, [1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]);
    // One call to re-make item 1's output, then items 2, 3 and 4.
    assert_eq!(restored.load(Ordering::SeqCst), 4);
}

#[test]
fn flat_map_refuses_a_source_whose_order_varies_naming_both_nodes() {
    let err = varying(8).flat_map(|x| vec![x]).start().unwrap_err();
    let Error::InvalidPipeline { node, below, .. } = &err else {
        panic!("refused with the wrong error: {err}");
    };
    assert_eq!(*node, "FlatMapper");
    assert!(below.contains("ParallelMapper"), "{below}");
    assert!(
        err.to_string().contains("above the `.flat_map(f)`"),
        "{err}"
    );
}

#[test]
fn flat_map_rejects_a_position_past_the_output() {
    let state = State::from_json(r#"{"source":{"num_yielded":2},"output_idx":4}"#).unwrap();
    let err = IterableWrapper::new(0..6u32)
        .flat_map(copies)
        .start_from(&state)
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/output_idx"), "{err}");
    let past_end = State::from_json(r#"{"source":{"num_yielded":6},"output_idx":1}"#).unwrap();
    let err = IterableWrapper::new(0..6u32)
        .flat_map(copies)
        .start_from(&past_end)
        .unwrap_err();
    assert!(err.to_string().contains("none left"), "{err}");
}

/// Pending items (what a reshard deals: another rank's item part way
/// through) come first, from the source state each names; a malformed list
/// is refused at its path.
#[test]
fn flat_map_returns_pending_items_first_and_refuses_a_malformed_list() {
    let start = |json: &str| {
        let state = State::from_json(json).unwrap();
        IterableWrapper::new(0..6u32)
            .flat_map(copies)
            .start_from(&state)
    };
    // Item 3 (three 30s), one returned; then item 2 (two 20s), none; then
    // the node's own position: item 5 next.
    let pending =
        r#"{"0":{"source":{"num_yielded":3},"skip":1},"1":{"source":{"num_yielded":2},"skip":0}}"#;
    let json = format!(r#"{{"source":{{"num_yielded":5}},"output_idx":0,"pending":{pending}}}"#);
    let items: Vec<u32> = start(&json).unwrap().collect::<Result<_>>().unwrap();
    assert_eq!(items, [30, 30, 20, 20, 50]);
    let cases = [
        (
            r#"{"1":{"source":{"num_yielded":3},"skip":1}}"#,
            "/pending/1",
        ),
        (
            r#"{"0":{"source":{"num_yielded":3},"skip":4}}"#,
            "/pending/0/skip",
        ),
        (
            r#"{"0":{"source":{"num_yielded":6},"skip":1}}"#,
            "/pending/0/skip",
        ),
        (r#"{"0":{"source":{"num_yielded":3}}}"#, "/pending/0/skip"),
    ];
    for (pending, path) in cases {
        let json =
            format!(r#"{{"source":{{"num_yielded":5}},"output_idx":0,"pending":{pending}}}"#);
        let err = start(&json).unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{pending}: {err}");
    }
    // `after` belongs to an item part way through only.
    let err = start(r#"{"source":{"num_yielded":5},"output_idx":0,"after":{"num_yielded":5}}"#)
        .unwrap_err();
    assert_eq!(err.state_path(), Some("/after"), "{err}");
}

// ---------------------------------------------------------------------------
// filter_map

#[test]
fn filter_map_resumes_at_every_cut_and_keeps_the_source_state_only() {
    let factory = || IterableWrapper::new(0..20u32).filter_map(|x| (x % 3 != 0).then_some(x * 2));
    let len = collect(factory()).len();
    assert_eq!(len, 13);
    for cut in cuts(len) {
        assert_save_load(factory, cut);
    }
    let mut running = factory().start().unwrap();
    running.next().unwrap().unwrap();
    assert_eq!(
        running.get_state().unwrap().to_json().unwrap(),
        r#"{"source":{"num_yielded":2}}"#
    );
}

#[test]
fn filter_map_runs_over_a_source_whose_order_varies() {
    let mut out = collect(varying(20).filter_map(|x| (x % 2 == 0).then_some(x)));
    out.sort_unstable();
    assert_eq!(out, (0..20).step_by(2).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------
// interleave

/// tf.data's interleave, written plainly over vectors.
fn reference_interleave(inputs: &[Vec<u32>], cycle: usize, block: usize) -> Vec<u32> {
    let mut input = inputs.iter();
    let mut slots: Vec<Option<std::vec::IntoIter<u32>>> = (0..cycle).map(|_| None).collect();
    let (mut at, mut taken, mut end, mut open) = (0, 0, false, 0);
    let mut out = Vec::new();
    while !end || open > 0 {
        if let Some(it) = &mut slots[at] {
            if let Some(x) = it.next() {
                out.push(x);
                taken += 1;
                if taken == block {
                    taken = 0;
                    at = (at + 1) % cycle;
                }
                continue;
            }
            slots[at] = None;
            open -= 1;
            taken = 0;
            at = (at + 1) % cycle;
        } else if !end {
            match input.next() {
                Some(v) => {
                    slots[at] = Some(v.clone().into_iter());
                    open += 1;
                }
                None => end = true,
            }
        } else {
            taken = 0;
            at = (at + 1) % cycle;
        }
    }
    out
}

/// Inner node `i` yields `i * 100 + 0..len`, with lengths 0 to 4.
fn files() -> Vec<(u32, u32)> {
    [3, 0, 4, 1, 2, 4, 0, 3]
        .into_iter()
        .enumerate()
        .map(|(i, n)| (i as u32, n))
        .collect()
}

fn file(&(i, n): &(u32, u32)) -> Vec<u32> {
    (0..n).map(|k| i * 100 + k).collect()
}

fn interleaved(cycle: usize, block: usize) -> impl Node<Item = u32> {
    IterableWrapper::new(files())
        .interleave(cycle, block, |f| IterableWrapper::new(file(&f)))
        .unwrap()
}

#[test]
fn interleave_matches_tf_data_order() {
    let inputs: Vec<Vec<u32>> = files().iter().map(file).collect();
    for cycle in 1..=5 {
        for block in 1..=4 {
            assert_eq!(
                collect(interleaved(cycle, block)),
                reference_interleave(&inputs, cycle, block),
                "cycle_length {cycle}, block_length {block}"
            );
        }
    }
    assert_eq!(
        collect(interleaved(2, 1)),
        // File 1 is empty: when it ends the cycle moves on, so file 0
        // gives two items in a row.
        [
            0, 1, 200, 2, 201, 202, 300, 203, 400, 500, 401, 501, 502, 503, 700, 701, 702
        ]
    );
}

#[test]
fn interleave_resumes_exactly_at_every_cut_including_inner_boundaries() {
    for (cycle, block) in [(1, 1), (2, 1), (2, 3), (3, 2), (8, 1), (100, 2)] {
        let factory = || interleaved(cycle, block);
        let len = collect(factory()).len();
        for cut in cuts(len) {
            if let Err(message) = check_save_load(factory, cut) {
                panic!("cycle_length {cycle}, block_length {block}, cut {cut}: {message}");
            }
        }
    }
}

#[test]
fn interleave_of_stateful_inner_pipelines_resumes_exactly() {
    // Inner nodes with state of their own (a shuffle, a batch) and an
    // outer node restored by replay.
    let factory = || {
        IterableWrapper::new((0..7u32).collect::<Vec<_>>().into_iter().map(|x| x * 3))
            .interleave(3, 2, |seed| {
                IterableWrapper::new(0..seed % 5 + 1)
                    .shuffle(3, u64::from(seed))
                    .unwrap()
                    .batch(2)
                    .unwrap()
                    .map(move |b| (seed, b))
            })
            .unwrap()
    };
    for cut in cuts(collect(factory()).len()) {
        assert_save_load(factory, cut);
    }
}

#[test]
fn interleave_reads_inner_nodes_in_parallel_with_the_sequential_order() {
    // Each inner node prefetched on a thread of its own, through a slow map.
    let parallel = |cycle: usize, block: usize, ahead: usize| {
        IterableWrapper::new(files())
            .interleave(cycle, block, move |f| {
                IterableWrapper::new(file(&f))
                    .map(|x| {
                        // Jitter only: the streams compared do not depend on timing.
                        std::thread::sleep(std::time::Duration::from_micros(u64::from(x % 3) * 20));
                        x
                    })
                    .prefetch(ahead)
                    .unwrap()
            })
            .unwrap()
    };
    for (cycle, block, ahead) in [(2, 1, 1), (3, 2, 4), (4, 3, 16)] {
        assert_eq!(
            collect(parallel(cycle, block, ahead)),
            collect(interleaved(cycle, block)),
            "cycle_length {cycle}, block_length {block}, prefetch {ahead}"
        );
        let factory = || parallel(cycle, block, ahead);
        for cut in cuts(collect(factory()).len()) {
            assert_save_load(factory, cut);
        }
    }
    let mut loader = Loader::new(parallel(3, 2, 4)).record_stats();
    assert_eq!(loader.epoch().count(), 17);
    let stats = loader.stats().unwrap();
    assert!(stats.get("Interleave/Prefetcher").is_some(), "{stats:?}");
}

#[test]
fn interleave_state_has_the_open_slots_items_and_inner_states() {
    let mut running = interleaved(2, 2).start().unwrap();
    for _ in 0..3 {
        // 0, 1 from file 0; file 1 is empty and closed; 2 from file 0.
        running.next().unwrap().unwrap();
    }
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        concat!(
            r#"{"source":{"num_yielded":2},"cycle_index":0,"block_index":1,"end_of_input":false,"slots_used":2,"#,
            r#""slots":{"0":{"item":[0,3],"source":{"num_yielded":0},"state":{"num_yielded":3}}}}"#
        )
    );
    // Restoring makes one inner node per open slot, from its item pulled again.
    let made = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&made);
    let rest: Vec<u32> = IterableWrapper::new(files())
        .interleave(2, 2, move |f| {
            counted.fetch_add(1, Ordering::SeqCst);
            IterableWrapper::new(file(&f))
        })
        .unwrap()
        .start_from(&state)
        .unwrap()
        .take(2)
        .collect::<Result<_>>()
        .unwrap();
    // File 0 ends, its slot closes, and file 2 opens in slot 1.
    assert_eq!(rest, [200, 201]);
    // Slot 0 made again from its saved item, then file 2.
    assert_eq!(made.load(Ordering::SeqCst), 2);
}

#[test]
fn interleave_over_an_outer_node_whose_order_varies_resumes_with_the_saved_items() {
    let build = || {
        varying(12)
            .interleave(3, 2, |i| {
                IterableWrapper::new((0..i % 4).map(move |k| i * 100 + k))
            })
            .unwrap()
    };
    let mut want: Vec<u32> = collect(build());
    want.sort_unstable();
    for cut in [0, 1, 5, 9] {
        let mut running = build().start().unwrap();
        let mut got: Vec<u32> = (0..cut).map(|_| running.next().unwrap().unwrap()).collect();
        let state = State::from_json(&running.get_state().unwrap().to_json().unwrap()).unwrap();
        drop(running);
        got.extend(build().start_from(&state).unwrap().map(Result::unwrap));
        got.sort_unstable();
        assert_eq!(got, want, "cut {cut}");
    }
}

#[test]
fn interleave_rejects_bad_arguments_and_bad_states() {
    let inner = |f: (u32, u32)| IterableWrapper::new(file(&f));
    assert!(matches!(
        IterableWrapper::new(files()).interleave(0, 1, inner),
        Err(Error::InvalidArgument { .. })
    ));
    assert!(matches!(
        IterableWrapper::new(files()).interleave(1, 0, inner),
        Err(Error::InvalidArgument { .. })
    ));
    // A huge cycle_length allocates nothing up front.
    assert_eq!(
        collect(
            IterableWrapper::new(files())
                .interleave(usize::MAX, 1, inner)
                .unwrap()
        )
        .len(),
        17
    );
    let good = concat!(
        r#"{"source":{"num_yielded":3},"cycle_index":1,"block_index":1,"end_of_input":false,"slots_used":2,"#,
        r#""slots":{"0":{"item":[0,3],"source":{"num_yielded":0},"state":{"num_yielded":2}},"#,
        r#""1":{"item":[2,4],"source":{"num_yielded":2},"state":{"num_yielded":1}}}}"#
    );
    let cases = [
        (r#""cycle_index":1"#, r#""cycle_index":2"#, "/cycle_index"),
        (r#""block_index":1"#, r#""block_index":2"#, "/block_index"),
        (r#""slots_used":2"#, r#""slots_used":3"#, "/slots_used"),
        (r#""1":{"item""#, r#""7":{"item""#, "/slots/7"),
        (r#""1":{"item""#, r#""01":{"item""#, "/slots/01"),
        (r#""item":[2,4]"#, r#""item":"x""#, "/slots/1/item"),
        (
            r#""source":{"num_yielded":2}"#,
            r#""source":{"num_yielded":99}"#,
            "/slots/1/source/num_yielded",
        ),
        (
            r#""state":{"num_yielded":1}"#,
            r#""state":{"num_yielded":99}"#,
            "/slots/1/state/num_yielded",
        ),
    ];
    for (from, to, path) in cases {
        let state = State::from_json(&good.replace(from, to)).unwrap();
        let err = interleaved(2, 2)
            .start_from(&state)
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{to}: {err}");
    }
    interleaved(2, 2)
        .start_from(&State::from_json(good).unwrap())
        .unwrap();
}

// ---------------------------------------------------------------------------
// pack

fn docs() -> Vec<Vec<u32>> {
    vec![
        vec![1, 2, 3],
        vec![],
        vec![4, 5],
        (10..21).collect(), // longer than two chunks
        vec![6],
        vec![7, 8, 9, 30],
    ]
}

#[test]
fn pack_concatenates_then_splits() {
    let all: Vec<u32> = docs().concat();
    let chunks = collect(IterableWrapper::new(docs()).pack(4).unwrap());
    assert_eq!(
        chunks,
        all.chunks(4).map(<[u32]>::to_vec).collect::<Vec<_>>()
    );
    let exact = collect(IterableWrapper::new(docs()).pack_exact(4).unwrap());
    assert_eq!(
        exact,
        all.chunks_exact(4).map(<[u32]>::to_vec).collect::<Vec<_>>()
    );
    let one = collect(IterableWrapper::new(docs()).pack(usize::MAX).unwrap());
    assert_eq!(one, [all]);
    assert!(matches!(
        IterableWrapper::new(docs()).pack(0),
        Err(Error::InvalidArgument { .. })
    ));
}

#[test]
fn pack_with_segments_numbers_documents_and_continues_positions() {
    let chunks = collect(
        IterableWrapper::new(docs())
            .pack(8)
            .unwrap()
            .with_segments(),
    );
    assert_eq!(
        chunks[0],
        Packed {
            tokens: vec![1, 2, 3, 4, 5, 10, 11, 12],
            segment_ids: vec![1, 1, 1, 2, 2, 3, 3, 3],
            positions: vec![0, 1, 2, 0, 1, 0, 1, 2],
        }
    );
    assert_eq!(
        chunks[1],
        Packed {
            tokens: vec![13, 14, 15, 16, 17, 18, 19, 20],
            segment_ids: vec![1; 8],
            positions: (3..11).collect(),
        }
    );
    assert_eq!(
        chunks[2],
        Packed {
            tokens: vec![6, 7, 8, 9, 30],
            segment_ids: vec![1, 2, 2, 2, 2],
            positions: vec![0, 0, 1, 2, 3],
        }
    );
    assert_eq!(chunks.len(), 3);
}

#[test]
fn pack_resumes_exactly_at_every_cut_with_the_remainder_in_the_state() {
    for seq_len in [1, 2, 3, 4, 7, 30] {
        let plain = || IterableWrapper::new(docs()).pack(seq_len).unwrap();
        for cut in cuts(collect(plain()).len()) {
            assert_save_load(plain, cut);
        }
        let exact = || IterableWrapper::new(docs()).pack_exact(seq_len).unwrap();
        for cut in cuts(collect(exact()).len()) {
            assert_save_load(exact, cut);
        }
        let segmented = || {
            IterableWrapper::new(docs())
                .pack(seq_len)
                .unwrap()
                .with_segments()
        };
        for cut in cuts(collect(segmented()).len()) {
            assert_save_load(segmented, cut);
        }
    }
    let mut running = IterableWrapper::new(docs())
        .pack(4)
        .unwrap()
        .start()
        .unwrap();
    running.next().unwrap().unwrap(); // 1 2 3 4
    assert_eq!(
        running.get_state().unwrap().to_json().unwrap(),
        r#"{"source":{"num_yielded":3},"carry":[{"tokens":[5],"position":1}]}"#
    );
}

#[test]
fn pack_returns_a_source_error_in_place_and_keeps_the_carry() {
    let docs = || {
        IterableWrapper::new(vec!["1 2 3", "x", "4 5", "6"]).try_map(|line: &str| {
            line.split(' ')
                .map(str::parse::<u32>)
                .collect::<std::result::Result<Vec<_>, _>>()
        })
    };
    let mut running = docs().pack(2).unwrap().start().unwrap();
    assert_eq!(running.next().unwrap().unwrap(), [1, 2]);
    assert!(running.next().unwrap().is_err());
    let state = running.get_state().unwrap();
    let rest: Vec<Vec<u32>> = running.map(Result::unwrap).collect();
    assert_eq!(rest, [vec![3, 4], vec![5, 6]]);
    let resumed: Vec<Vec<u32>> = docs()
        .pack(2)
        .unwrap()
        .start_from(&state)
        .unwrap()
        .collect::<Result<_>>()
        .unwrap();
    assert_eq!(resumed, rest);
}

#[test]
fn pack_rejects_a_carry_of_the_wrong_shape() {
    for (json, path) in [
        (
            r#"{"source":{"num_yielded":0},"carry":[{"tokens":["a"],"position":0}]}"#,
            "/carry",
        ),
        (
            r#"{"source":{"num_yielded":0},"carry":[{"tokens":[1]}]}"#,
            "/carry",
        ),
        (r#"{"source":{"num_yielded":0},"carry":{}}"#, "/carry"),
    ] {
        let err = IterableWrapper::new(docs())
            .pack(4)
            .unwrap()
            .start_from(&State::from_json(json).unwrap())
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.state_path(), Some(path), "{json}: {err}");
    }
}

// ---------------------------------------------------------------------------
// describe and stats

#[test]
fn the_new_nodes_show_in_describe_and_in_the_stats() {
    let pipeline = IterableWrapper::new(files())
        .interleave(3, 2, |f| IterableWrapper::new(file(&f)))
        .unwrap()
        .flat_map(|x| vec![x, x + 1])
        .filter_map(|x| (x % 3 != 0).then_some(vec![x; 2]))
        .pack_exact(5)
        .unwrap()
        .with_segments();
    let text = pipeline.describe().render_text();
    for expected in [
        "Packer(seq_len=5, drop_last=true, segments=true)",
        "FilterMapper",
        "FlatMapper",
        "Interleave(cycle_length=3, block_length=2)",
        "IterableWrapper",
    ] {
        assert!(text.contains(expected), "{expected} not in\n{text}");
    }
    let mut loader = Loader::new(pipeline).record_stats();
    let chunks: Vec<Packed<u32>> = loader.epoch().collect::<Result<_>>().unwrap();
    let stats = loader.stats().unwrap();
    let count = |name: &str| {
        stats
            .get(name)
            .map(|s| s.items)
            .unwrap_or_else(|| panic!("no stats for {name}: {stats:?}"))
    };
    assert_eq!(count("Packer"), chunks.len() as u64);
    assert_eq!(count("FlatMapper"), 34);
    assert_eq!(count("Interleave"), 17);
    // Of the 34 values, those not divisible by 3, two tokens each, in
    // chunks of 5 (the short last one dropped).
    let kept = collect(interleaved(3, 2).flat_map(|x| vec![x, x + 1]))
        .into_iter()
        .filter(|x| x % 3 != 0)
        .count() as u64;
    assert_eq!(count("FilterMapper"), kept);
    assert_eq!(chunks.len() as u64, kept * 2 / 5);
    // The inner nodes show under the interleave.
    assert!(
        stats.get("Interleave/IterableWrapper").is_some(),
        "{stats:?}"
    );
}

// ---------------------------------------------------------------------------
// The random-pipeline generator

/// The exactly-once, fault and bad-state suites see the new nodes: the
/// generator draws each of them often, flat_maps over an out-of-order map
/// (refused when they start) too, and each drawn pipeline is determined at
/// some level.
#[test]
fn the_generator_draws_every_new_node() {
    use crate::support::spec::{Grammar, Spec, spec_strategy};
    use proptest::strategy::{Strategy, ValueTree};
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let strategy = spec_strategy(Grammar::every_shape(4, 40, 4));
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let kinds = ["flat_map", "filter_map", "pack", "pack_exact", "interleave"];
    let mut counts = [0usize; 5];
    let (mut refusable, mut segments, mut varying_outer) = (0, 0, 0);
    let drawn = 1000;
    for _ in 0..drawn {
        let spec = strategy.new_tree(&mut runner).unwrap().current();
        assert!(spec.level().is_some(), "{spec}");
        let nodes = spec.nodes();
        for (count, kind) in counts.iter_mut().zip(kinds) {
            *count += usize::from(nodes.iter().any(|n| n.kind() == kind));
        }
        refusable +=
            usize::from(nodes.iter().any(|n| n.kind() == "flat_map") && spec.may_be_refused());
        segments += usize::from(nodes.iter().any(|n| matches!(n, Spec::Pack(_, _, _, true))));
        varying_outer += usize::from(nodes.iter().any(|n| {
            matches!(n, Spec::Interleave { outer, .. } if !outer.over_varying().is_empty()
                || matches!(**outer, Spec::ParMap(_, p, _) if p.varies()))
        }));
    }
    println!(
        "of {drawn} drawn pipelines: {:?} contain {kinds:?}; {refusable} a flat_map over an out-of-order map; {segments} a pack with segments; {varying_outer} an interleave over an order that varies",
        counts
    );
    for (count, kind) in counts.iter().zip(kinds) {
        assert!(*count >= drawn / 50, "{kind} drawn in {count} of {drawn}");
    }
    assert!(refusable > 0 && segments > 0 && varying_outer > 0);
}
