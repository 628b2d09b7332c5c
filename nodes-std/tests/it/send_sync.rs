//! Every public node is `Send` (a pipeline can be built on one thread and
//! run on another, and the threaded nodes move their sources to workers),
//! and the values users share between threads are `Send + Sync`. Checked at
//! compile time: a node that stops being `Send` fails to build this test.

use std::sync::Arc;

use nodes_std::prelude::*;
use nodes_std::{
    Batcher, Cycler, Filter, Header, Loader, Mapper, Prefetcher, Running, Sharder, Shuffler,
    TryMapper, Unbatcher, Zip,
};

fn send<T: Send>(_: T) {}

fn send_sync<T: Send + Sync>(_: T) {}

#[test]
fn every_public_node_is_send() -> nodes_std::Result<()> {
    let source = || IterableWrapper::new(0..10u64);
    send::<Mapper<_, _>>(source().map(|x| x + 1));
    send::<TryMapper<_, _>>(source().try_map(Ok::<_, std::io::Error>));
    send::<Filter<_, _>>(source().filter(|x| x % 2 == 0));
    send::<Batcher<_>>(source().batch(2)?);
    send::<Unbatcher<_>>(source().batch(2)?.unbatch());
    send::<Header<_>>(source().header(3));
    send::<Cycler<_>>(source().cycle());
    send::<Shuffler<_>>(source().shuffle(4, 1)?);
    send::<Zip<_, _>>(source().zip(source()));
    send::<Sharder<_>>(source().shard(0, 2)?);
    send(source().par_map(Ok, ParallelOptions::new(2))?);
    let prefetcher: Prefetcher<_> = source().prefetch(2)?;
    send(prefetcher);
    send(SamplerWrapper::new(RandomSampler::new(10, 1)));
    send(MapStyleWrapper::sequential(vec![1u8, 2, 3]));
    let names = || [("a", source()), ("b", source())];
    send(MultiNodeRoundRobinSampler::new(names())?);
    send(MultiNodeWeightedSampler::new(names(), [("a", 1.0), ("b", 2.0)])?.tagged());
    send(source().flat_map(|x| vec![x, x]));
    send(source().filter_map(|x| (x > 2).then_some(x)));
    send(source().interleave(2, 1, |x| IterableWrapper::new(0..x))?);
    send(source().map(|x| vec![x; 3]).pack(4)?.with_segments());
    let files = Files::list(["a.jsonl", "b.jsonl"])?;
    send(files.read_lines());
    send(Files::list(["c.jsonl"])?.read_jsonl::<Vec<u8>>());
    send(IterableWrapper::from_fn(|| (0..3u8).map(|x| x + 1)));
    send(MapStyleWrapper::new(
        vec![1u8, 2],
        ElasticSampler::new(RandomSampler::new(2, 1), 0, 1)?,
    ));
    send(source().boxed());
    send(Loader::new(source()));
    send::<Running<_>>(source().start()?);
    Ok(())
}

#[test]
fn shared_values_are_send_and_sync() -> nodes_std::Result<()> {
    send_sync(ParallelOptions::new(2));
    send_sync(ErrorPolicy::Skip);
    send_sync(StopCriteria::AllDatasetsExhausted);
    send_sync(Loader::new(IterableWrapper::new(0..3u64)).state_dict()?);
    send_sync(IterableWrapper::new(0..3u64).describe());
    send_sync(Error::invalid_argument("Test", "an error crosses threads"));
    send_sync(Arc::<str>::from("ds0"));
    Ok(())
}
