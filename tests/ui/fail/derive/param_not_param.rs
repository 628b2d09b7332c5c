// A parameter is part of every checkpoint's fingerprint, so its type says how
// it is written (`Param`); `Debug` is not enough.
use nodes_std::prelude::*;

#[derive(Debug, Clone, Copy)]
enum Resize {
    Crop,
}

#[derive(Node)]
struct Images<S> {
    #[node(child)]
    source: S,
    #[node(param)]
    resize: Resize,
}

impl<S: Node> nodes_std::Node for Images<S> {
    type Item = S::Item;
    fn next(&mut self, cx: &mut Cx) -> Result<Option<S::Item>> {
        let _ = Resize::Crop;
        self.source.next(cx)
    }
}

fn main() {}
