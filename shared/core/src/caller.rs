//! Who a request is for: the one name every port takes to keep each owner's chats, files, counters and documents
//! apart, below all of them.

/// Who asks: the owner their chats are kept under, and the names a document's access list may know them by.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// The owner id of their history (how they were proven, and who they are).
    pub owner: String,
    /// Their own id as documents' `oids` name it; `None` when the way they were proven gives none.
    pub oid: Option<String>,
    /// The groups they belong to, as documents' `groups` name them (from a JWT's groups claim).
    pub groups: Vec<String>,
}

impl Caller {
    /// A caller known only by their owner id.
    pub fn owner(owner: impl Into<String>) -> Self {
        Self {
            owner: owner.into(),
            oid: None,
            groups: Vec::new(),
        }
    }
}
