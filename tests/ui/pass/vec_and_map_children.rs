use std::collections::BTreeMap;

use nodes_std::IterableWrapper;
use nodes_std::prelude::*;

type Source = IterableWrapper<Vec<u32>>;

#[derive(Node)]
struct Concat {
    #[node(children)]
    parts: Vec<Source>,
    #[node(children)]
    extras: BTreeMap<String, Box<dyn Node<Item = u32>>>,
    #[node(state)]
    current: usize,
}

impl nodes_std::Node for Concat {
    type Item = u32;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<u32>> {
        while let Some(part) = self.parts.get_mut(self.current) {
            // A concretely typed stock child is advanced through the trait.
            if let Some(x) = Node::next(part, cx)? {
                return Ok(Some(x));
            }
            self.current += 1;
        }
        for extra in self.extras.values_mut() {
            if let Some(x) = extra.next(cx)? {
                return Ok(Some(x));
            }
        }
        Ok(None)
    }
}

fn main() -> Result<()> {
    let mut extras: BTreeMap<String, Box<dyn Node<Item = u32>>> = BTreeMap::new();
    extras.insert("tail".into(), IterableWrapper::new(vec![9]).boxed());
    let node = Concat {
        parts: vec![IterableWrapper::new(vec![1, 2]), IterableWrapper::new(vec![3])],
        extras,
        current: 0,
    };
    let items: Vec<u32> = node.start()?.collect::<Result<_>>()?;
    assert_eq!(items, [1, 2, 3, 9]);
    Ok(())
}
