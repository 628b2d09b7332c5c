// A stock node that was only constructed cannot be advanced: there is no `Cx`
// outside a started pipeline, and the message says what to call.
use nodes_std::IterableWrapper;


fn main() {
    let mut node = IterableWrapper::new(0..3u32);
    let _ = node.next();
}
