//! One macro for nodes whose `Stateful` methods hand over to a field
//! unchanged (a node built on the threaded core, or on the one-to-many
//! expander), so the forwarding is written once.

/// Writes, inside an `impl Stateful`, each listed method as a call to the
/// same method of `self.$field`:
/// `delegate_stateful!(core: reset, get_state, shutdown);`.
macro_rules! delegate_stateful {
    ($field:ident: $($method:ident),+ $(,)?) => {
        $( $crate::delegate::delegate_stateful!(@ $field $method); )+
    };
    (@ $field:ident reset) => {
        fn reset(&mut self, state: Option<&nodes_core::State>) -> nodes_core::Result<()> {
            self.$field.reset(state)
        }
    };
    (@ $field:ident check_state) => {
        fn check_state(&self, state: &nodes_core::State) -> nodes_core::Result<()> {
            self.$field.check_state(state)
        }
    };
    (@ $field:ident get_state) => {
        fn get_state(&self, cx: &nodes_core::Cx) -> nodes_core::Result<nodes_core::State> {
            self.$field.get_state(cx)
        }
    };
    (@ $field:ident describe) => {
        fn describe(&self) -> nodes_core::Description {
            self.$field.describe()
        }
    };
    (@ $field:ident shutdown) => {
        fn shutdown(&mut self) {
            self.$field.shutdown();
        }
    };
    (@ $field:ident size_hint) => {
        fn size_hint(&self) -> nodes_core::Hint {
            self.$field.size_hint()
        }
    };
    (@ $field:ident resume) => {
        fn resume(&self) -> $crate::Resume {
            self.$field.resume()
        }
    };
}
pub(crate) use delegate_stateful;
