// The same holds for a derived node.
mod counter {
    use nodes_std::prelude::*;

    #[derive(Node)]
    pub struct Counter {
        #[node(state)]
        pub n: u64,
    }

    impl nodes_std::Node for Counter {
        type Item = u64;
        fn next(&mut self, _cx: &mut Cx) -> Result<Option<u64>> {
            self.n += 1;
            Ok(Some(self.n))
        }
    }
}


fn main() {
    let mut c = counter::Counter { n: 0 };
    let _ = c.next();
}
