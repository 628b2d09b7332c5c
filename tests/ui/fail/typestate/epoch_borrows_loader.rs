// A state cannot be loaded while an epoch is live (and then silently ignored,
// as in the Python loaders): the epoch borrows the loader.
use nodes_std::IterableWrapper;
use nodes_std::prelude::*;

fn main() -> Result<()> {
    let mut loader = Loader::new(IterableWrapper::new(0..3u32));
    let state = loader.state_dict()?;
    let mut epoch = loader.epoch();
    let _ = epoch.next();
    loader.load_state_dict(&state)?;
    let _ = epoch.next();
    Ok(())
}
