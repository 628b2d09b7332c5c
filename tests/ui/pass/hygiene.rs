// Generated code uses absolute paths only: shadowing prelude names next to
// the derive changes nothing.
#![allow(dead_code, non_camel_case_types)]

use nodes_std::prelude::{Cx, Node};

struct Option;
struct Result;
struct Some;
struct None;
struct Ok;
struct Err;
struct Default;
struct State;
mod core {}
mod std {}

#[derive(nodes_std::Node)]
struct Hygienic {
    #[node(state)]
    n: u64,
    #[node(state, rename = "type")]
    r#type: ::std::string::String,
}

impl nodes_std::Node for Hygienic {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> nodes_std::Result<::core::option::Option<u64>> {
        ::core::result::Result::Ok(::core::option::Option::None)
    }
}

// The size-hint methods too, both ways.
#[derive(nodes_std::Node)]
#[node(size_hint = "child")]
struct Forwards<S> {
    #[node(child)]
    source: S,
}

impl<S: Node<Item = u64>> nodes_std::Node for Forwards<S> {
    type Item = u64;
    fn next(&mut self, cx: &mut Cx) -> nodes_std::Result<::core::option::Option<u64>> {
        self.source.next(cx)
    }
}

#[derive(nodes_std::Node)]
#[node(size_hint)]
struct Counts {
    #[node(state)]
    left: u64,
}

impl nodes_std::SizeHint for Counts {
    fn size_hint(&self) -> nodes_std::Hint {
        nodes_std::Hint::exact(self.left)
    }
}

impl nodes_std::Node for Counts {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> nodes_std::Result<::core::option::Option<u64>> {
        ::core::result::Result::Ok(::core::option::Option::None)
    }
}

fn main() {}
