// A facade that re-exports nodes-std under another path points the derive at it.
mod facade {
    pub use nodes_std as engine;
}

use nodes_std::prelude::{Cx, Node};

#[derive(nodes_std::Node)]
#[node(crate = crate::facade::engine, version = 3, rename_all = "camelCase")]
struct Renamed {
    #[node(state)]
    items_seen: u64,
}

impl nodes_std::Node for Renamed {
    type Item = u64;
    fn next(&mut self, _cx: &mut Cx) -> nodes_std::Result<Option<u64>> {
        Ok(None)
    }
}

fn main() -> nodes_std::Result<()> {
    use nodes_std::NodeExt;
    let running = Renamed { items_seen: 7 }.start()?;
    let state = running.get_state()?;
    assert_eq!(state.to_json()?, r#"{"itemsSeen":0,"version":3}"#);
    Ok(())
}
