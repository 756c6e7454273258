//! Who may do what with documents: what a user uploads is theirs alone, and only a document administrator gives
//! one to groups or everyone (or lists everyone's).

use super::Documents;
use super::types::{AccessChoice, AccessList, DocumentError, invalid};
use crate::Caller;

/// The most groups an administrator may give one document.
pub const MAX_DOCUMENT_GROUPS: usize = 20;

impl Documents {
    /// Whether `caller` is an administrator of documents.
    pub fn is_admin(&self, caller: &Caller) -> bool {
        self.settings
            .admin_group
            .as_ref()
            .is_some_and(|g| caller.groups.iter().any(|c| c == g))
    }

    /// The access list of what `caller` uploads, as they chose it.
    pub fn access_for(
        &self,
        caller: &Caller,
        choice: &AccessChoice,
    ) -> Result<AccessList, DocumentError> {
        if choice.is_private() {
            let oid = caller.oid.clone().unwrap_or_else(|| caller.owner.clone());
            return Ok(AccessList {
                oids: vec![oid],
                groups: Vec::new(),
            });
        }
        if !self.is_admin(caller) {
            return Err(DocumentError::Forbidden(
                "Only a document administrator may share a document with groups or everyone: what you upload \
                 is yours alone."
                    .into(),
            ));
        }
        let mut groups = names("groups", &choice.groups)?;
        if choice.everyone && !groups.contains(&self.settings.everyone_group) {
            groups.push(self.settings.everyone_group.clone());
        }
        Ok(AccessList {
            oids: Vec::new(),
            groups,
        })
    }
}

/// Names (groups or oids) trimmed, checked and without repeats: at most [`MAX_DOCUMENT_GROUPS`], each 1 to 256
/// characters without control characters.
pub(super) fn names(field: &str, given: &[String]) -> Result<Vec<String>, DocumentError> {
    if given.len() > MAX_DOCUMENT_GROUPS {
        return Err(invalid(
            field,
            format!("at most {MAX_DOCUMENT_GROUPS} {field}"),
        ));
    }
    let mut out = Vec::new();
    for g in given {
        let g = g.trim();
        if g.is_empty() || g.len() > 256 || g.chars().any(char::is_control) {
            let one = match field {
                "oids" => "an oid",
                _ => "a group",
            };
            return Err(invalid(
                field,
                format!("{one} is a name of 1 to 256 characters"),
            ));
        }
        if !out.iter().any(|have: &String| have == g) {
            out.push(g.to_string());
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::fakes::{caller, service};

    #[test]
    fn what_a_user_uploads_is_theirs_alone_and_only_an_administrator_shares() {
        let s = service(Some("doc-admins"));
        let alice = caller("jwt:alice", Some("alice"), &["engineering"]);
        assert_eq!(
            s.access_for(&alice, &AccessChoice::default()).unwrap(),
            AccessList {
                oids: vec!["alice".into()],
                groups: vec![]
            }
        );
        // Without an oid, the owner id names them.
        let local = caller("local-user", None, &[]);
        assert_eq!(
            s.access_for(&local, &AccessChoice::default()).unwrap().oids,
            ["local-user"]
        );
        let share = AccessChoice {
            groups: vec!["leadership".into(), "leadership".into()],
            everyone: false,
        };
        assert!(matches!(
            s.access_for(&alice, &share),
            Err(DocumentError::Forbidden(_))
        ));
        let admin = caller("jwt:dana", Some("dana"), &["doc-admins"]);
        assert_eq!(
            s.access_for(&admin, &share).unwrap(),
            AccessList {
                oids: vec![],
                groups: vec!["leadership".into()]
            }
        );
        let everyone = AccessChoice {
            groups: vec![],
            everyone: true,
        };
        assert_eq!(
            s.access_for(&admin, &everyone).unwrap().groups,
            ["everyone"]
        );
        // No administrator group configured: nobody shares.
        assert!(service(None).access_for(&admin, &everyone).is_err());
    }
}
