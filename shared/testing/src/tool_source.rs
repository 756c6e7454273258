//! A tool source for tests: the same tools for every caller and turn, and the same sources said to be down.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use chat_core::{Caller, Tool, ToolListing, ToolSource};

/// Offers `tools` to every caller, every turn, and says each of `unavailable` is down.
#[derive(Clone, Default)]
pub struct FixedTools {
    pub tools: Vec<Arc<dyn Tool>>,
    pub unavailable: Vec<String>,
}

impl FixedTools {
    /// A source offering `tools`, none down.
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        Self {
            tools,
            unavailable: Vec::new(),
        }
    }
}

impl ToolSource for FixedTools {
    fn list<'a>(
        &'a self,
        _caller: &'a Caller,
    ) -> Pin<Box<dyn Future<Output = ToolListing> + Send + 'a>> {
        let listing = ToolListing {
            tools: self.tools.clone(),
            unavailable: self.unavailable.clone(),
        };
        Box::pin(async move { listing })
    }
}
