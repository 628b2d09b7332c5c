// Generic nodes with bounds in the parameter list and in a where clause,
// a lifetime, a const generic, and nested derived children.
use std::fmt::Debug;

use nodes_std::IterableWrapper;
use nodes_std::prelude::*;

#[derive(Node)]
struct Scale<'a, S: Node, const K: u32>
where
    S::Item: Into<u64> + Debug,
{
    #[node(child)]
    source: S,
    #[node(param)]
    label: &'a str,
    #[node(state)]
    seen: u64,
}

impl<'a, S, const K: u32> nodes_std::Node for Scale<'a, S, K>
where
    S: Node,
    S::Item: Into<u64> + Debug,
{
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        let item = self.source.next(cx)?;
        self.seen += 1;
        Ok(item.map(|x| x.into() * u64::from(K)))
    }
}

#[derive(Node)]
struct Outer<T: Node<Item = u64>> {
    #[node(child)]
    inner: T,
}

impl<T: Node<Item = u64>> nodes_std::Node for Outer<T> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u64>> {
        self.inner.next(cx)
    }
}

fn main() -> Result<()> {
    let scale: Scale<'static, _, 3> = Scale {
        source: IterableWrapper::new(vec![1u32, 2]),
        label: "x3",
        seen: 0,
    };
    let outer = Outer { inner: scale };
    let items: Vec<u64> = outer.start()?.collect::<Result<_>>()?;
    assert_eq!(items, [3, 6]);
    Ok(())
}
