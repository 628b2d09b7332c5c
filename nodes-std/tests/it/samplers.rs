//! What both samplers (`MultiNodeRoundRobinSampler` and
//! `MultiNodeWeightedSampler`) must do, written once and run for each. What
//! only one of them does is tested in its own module.

use crate::mixing_support::{Count, Forgetful, Varying};
use nodes_std::{
    Error, MultiNodeRoundRobinSampler, MultiNodeWeightedSampler, Node, NodeExt, StopCriteria,
};

type Source = Box<dyn Node<Item = u64>>;

#[derive(Debug, Clone, Copy)]
enum Sampler {
    RoundRobin,
    /// Every source weighs the same.
    Weighted,
}

const SAMPLERS: [Sampler; 2] = [Sampler::RoundRobin, Sampler::Weighted];

impl Sampler {
    fn name(self) -> &'static str {
        match self {
            Sampler::RoundRobin => "MultiNodeRoundRobinSampler",
            Sampler::Weighted => "MultiNodeWeightedSampler",
        }
    }

    /// The sampler over `sources`; `seed` is the weighted sampler's.
    fn mix(self, sources: Vec<(String, Source)>, stop: StopCriteria, seed: u64) -> Source {
        match self {
            Sampler::RoundRobin => MultiNodeRoundRobinSampler::new(sources)
                .unwrap()
                .stop_criteria(stop)
                .boxed(),
            Sampler::Weighted => {
                let weights: Vec<(String, f64)> = sources
                    .iter()
                    .map(|(name, _)| (name.clone(), 1.0))
                    .collect();
                MultiNodeWeightedSampler::new(sources, weights)
                    .unwrap()
                    .stop_criteria(stop)
                    .seed(seed)
                    .boxed()
            }
        }
    }

    /// Over sources `ds{i}` of the given sizes yielding `1000 * i + k`.
    fn over_counts(self, sizes: &[u64], stop: StopCriteria, seed: u64) -> Source {
        let sources = crate::mixing_support::counts(sizes)
            .into_iter()
            .map(|(name, count)| (name, count.boxed()))
            .collect();
        self.mix(sources, stop, seed)
    }
}

#[test]
fn end_is_idempotent() {
    let stops = [
        StopCriteria::AllDatasetsExhausted,
        StopCriteria::FirstDatasetExhausted,
        StopCriteria::CycleUntilAllDatasetsExhausted,
    ];
    for sampler in SAMPLERS {
        for stop in stops {
            for sizes in [&[1, 2][..], &[2, 3]] {
                let mut run = sampler.over_counts(sizes, stop, 1).start().unwrap();
                while run.try_next().unwrap().is_some() {}
                let state = run.get_state().unwrap();
                for _ in 0..3 {
                    assert!(run.try_next().unwrap().is_none(), "{sampler:?}, {stop}");
                }
                assert_eq!(run.get_state().unwrap(), state, "{sampler:?}, {stop}");
            }
        }
    }
}

/// The mix varies between runs if a source's order does: the sampler says
/// which source (the first one, in source order), as `#[derive(Node)]`
/// forwards it for derived nodes.
#[test]
fn varying_order_is_forwarded_from_the_sources() {
    for sampler in SAMPLERS {
        let build = |varying: &[bool; 3]| {
            let sources = ["a", "b", "c"]
                .into_iter()
                .zip(varying)
                .enumerate()
                .map(|(i, (name, &v))| {
                    let count = Count::new(1000 * i as u64, 3);
                    let node = if v {
                        Varying(count).boxed()
                    } else {
                        count.boxed()
                    };
                    (name.to_string(), node)
                })
                .collect();
            sampler.mix(sources, StopCriteria::default(), 0)
        };
        assert_eq!(
            build(&[false, false, false]).describe().varying_order(),
            None
        );
        assert_eq!(
            build(&[false, true, true])
                .describe()
                .varying_order()
                .as_deref(),
            Some("Varying(base=1000)"),
            "{sampler:?}"
        );
        assert_eq!(
            build(&[true, false, false])
                .boxed()
                .describe()
                .varying_order()
                .as_deref(),
            Some("Varying(base=0)"),
            "{sampler:?}"
        );
    }
}

#[test]
fn used_before_reset_is_an_error() {
    for sampler in SAMPLERS {
        // Through the traits, as a parent that forgot to reset its child would
        // call it (on the concrete type, the call does not compile).
        let s = sampler.over_counts(&[2], StopCriteria::AllDatasetsExhausted, 0);
        let mut run = Forgetful(s).start().unwrap();
        let err = run.next().unwrap().unwrap_err();
        assert!(
            matches!(err, Error::NotReset { node } if node == sampler.name()),
            "{err}"
        );
        assert!(matches!(run.get_state(), Err(Error::NotReset { .. })));
        let s = sampler.over_counts(&[2], StopCriteria::AllDatasetsExhausted, 0);
        assert_eq!(s.start().unwrap().next().transpose().unwrap(), Some(0));
    }
}
