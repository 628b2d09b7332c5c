//! Dataset and MapStyleWrapper: order, shuffling, errors and save/load.

use std::sync::Arc;

use crate::common::{collect, epochs, save_load_at_cuts};
use crate::scripted::assert_resumes_at_every_cut;
use nodes_std::prelude::*;
use nodes_std::{BoxError, testing};

/// torchdata's `DummyMapDataset`: rows computed from the index.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Row {
    step: usize,
    text: String,
}

struct Rows {
    n: usize,
}

impl Dataset for Rows {
    type Item = Row;
    fn len(&self) -> usize {
        self.n
    }
    fn get_item(&self, index: usize) -> std::result::Result<Row, BoxError> {
        if index == 13 {
            return Err("row 13 is corrupt".into());
        }
        Ok(Row {
            step: index,
            text: format!("str_{index}"),
        })
    }
}

#[test]
fn sequential_reads_rows_in_order_every_epoch() {
    let [e0, e1] =
        <[_; 2]>::try_from(epochs(MapStyleWrapper::sequential(Rows { n: 10 }), 2)).unwrap();
    let steps: Vec<usize> = e0.iter().map(|r| r.step).collect();
    assert_eq!(steps, (0..10).collect::<Vec<_>>());
    assert!(e0.iter().all(|r| r.text == format!("str_{}", r.step)));
    assert_eq!(e0, e1);
}

#[test]
fn shuffled_is_a_new_permutation_each_epoch() {
    let all = epochs(MapStyleWrapper::shuffled(Rows { n: 12 }, 5), 3);
    for epoch in &all {
        let mut steps: Vec<usize> = epoch.iter().map(|r| r.step).collect();
        steps.sort_unstable();
        assert_eq!(steps, (0..12).collect::<Vec<_>>());
    }
    assert_ne!(all[0], all[1]);
    assert_ne!(all[1], all[2]);
    // Same seed, same orders.
    assert_eq!(all, epochs(MapStyleWrapper::shuffled(Rows { n: 12 }, 5), 3));
}

#[test]
fn any_index_node_works_as_sampler() {
    let ds = vec!["a", "b", "c"];
    let out = collect(MapStyleWrapper::new(
        ds,
        IterableWrapper::new(vec![2usize, 0, 2]),
    ));
    assert_eq!(out, ["c", "a", "c"]);
}

#[test]
fn dataset_errors_are_user_errors_with_the_index() {
    let mut running = MapStyleWrapper::sequential(Rows { n: 15 }).start().unwrap();
    let mut got = Vec::new();
    let mut errors = Vec::new();
    for item in &mut running {
        match item {
            Ok(row) => got.push(row.step),
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(got, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14]);
    assert_eq!(errors.len(), 1);
    assert!(
        matches!(
            &errors[0],
            Error::User {
                node,
                index: Some(13),
                ..
            } if node == "MapStyleWrapper"
        ),
        "{:?}",
        errors[0]
    );
    assert_eq!(
        errors[0].to_string(),
        "user function failed in MapStyleWrapper at item 13: row 13 is corrupt"
    );

    // An index past a Vec's end is an error too, not a panic.
    let mut running = MapStyleWrapper::new(vec![1u8], IterableWrapper::new([5usize]))
        .start()
        .unwrap();
    let err = running.next().unwrap().unwrap_err();
    assert!(
        err.to_string()
            .contains("index 5 is out of range for a dataset of 1 items"),
        "{err}"
    );
}

#[test]
fn map_style_save_load() {
    save_load_at_cuts(|| MapStyleWrapper::sequential(Rows { n: 7 }));
    save_load_at_cuts(|| MapStyleWrapper::shuffled(Rows { n: 7 }, 11));
    save_load_at_cuts(|| MapStyleWrapper::shuffled(vec![1u8, 2, 3], 0));
    let shared = Arc::new(vec![10u32, 20, 30, 40]);
    save_load_at_cuts(|| MapStyleWrapper::shuffled(shared.clone(), 3));
    static ITEMS: [i8; 3] = [-1, -2, -3];
    save_load_at_cuts(|| MapStyleWrapper::sequential(&ITEMS[..]));
    for cut in [0, 3, 7] {
        testing::assert_save_load(
            || {
                let sampler = SamplerWrapper::new(
                    ShardedSampler::new(RandomSampler::new(20, 1), 1, 2, Remainder::Pad).unwrap(),
                );
                MapStyleWrapper::new((0..20u32).collect::<Vec<_>>(), sampler)
            },
            cut,
        );
    }
}

#[test]
fn map_style_state_is_the_sampler_state() {
    let mut running = MapStyleWrapper::sequential(vec![1u8, 2, 3])
        .start()
        .unwrap();
    running.next();
    let state = running.get_state().unwrap();
    assert_eq!(
        state.to_json().unwrap(),
        r#"{"sampler":{"epoch":0,"num_yielded":1,"started":true}}"#
    );
}

#[test]
fn a_failed_row_is_one_item_and_a_state_after_it_resumes_after_it() {
    // Row 13 fails: sequentially, shuffled, and under a sampler of indices.
    assert_resumes_at_every_cut(|| MapStyleWrapper::sequential(Rows { n: 16 }));
    assert_resumes_at_every_cut(|| MapStyleWrapper::shuffled(Rows { n: 16 }, 4));
    assert_resumes_at_every_cut(|| {
        MapStyleWrapper::new(
            Rows { n: 20 },
            IterableWrapper::new(vec![13usize, 2, 13, 13, 5]),
        )
    });
}

/// torchdata's `test_dict`: a dataset keyed by strings, read in the order of
/// a node of keys, resumes exactly.
#[test]
fn a_dataset_keyed_by_strings_reads_and_resumes() {
    use std::collections::HashMap;
    let build = || {
        let dataset: HashMap<String, u32> = (0..20).map(|i| (format!("k{i}"), i * 10)).collect();
        let keys: Vec<String> = (0..20).rev().map(|i| format!("k{i}")).collect();
        MapStyleWrapper::new(dataset, IterableWrapper::new(keys))
    };
    assert_eq!(
        collect(build()),
        (0..20).rev().map(|i| i * 10).collect::<Vec<u32>>()
    );
    for midpoint in [0, 1, 19, 20] {
        testing::assert_save_load(build, midpoint);
    }
    let missing = MapStyleWrapper::new(
        HashMap::from([("a".to_string(), 1u8)]),
        IterableWrapper::new(vec!["a".to_string(), "zz".to_string()]),
    );
    let out: Vec<_> = missing.start().unwrap().collect();
    assert_eq!(out[0].as_ref().ok(), Some(&1));
    let err = out[1].as_ref().unwrap_err();
    assert!(matches!(err, Error::User { index: None, .. }), "{err}");
    assert!(err.to_string().contains("\"zz\""), "{err}");
}
