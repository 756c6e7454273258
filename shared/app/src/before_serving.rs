//! An app's builders (`with_…`) change what it holds behind its `Arc` before it serves; this takes it back out.

use std::sync::Arc;

/// What an app holds behind `held`, taken back to be changed: an app's builders run before it serves, when the
/// `Arc` is held once (a route clones it only once it serves).
pub(crate) fn take_back<T>(held: Arc<T>) -> T {
    let Ok(value) = Arc::try_unwrap(held) else {
        unreachable!("the state is shared only once the app serves")
    };
    value
}
