//! The one way a write's expressions are built: an item's attributes set, added to or set when absent, and the
//! conditions the write holds on, each named and valued through placeholders (`#n0`, `:v0`), so that no write
//! spells an expression, its names and its values by hand, and no attribute name can clash with a reserved word.

use std::collections::HashMap;

use aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update,
};

use super::Item;

/// An expression's names and values as a request carries them.
struct Placeholders {
    names: Option<HashMap<String, String>>,
    values: Option<HashMap<String, AttributeValue>>,
}

/// Where a term goes.
enum Clause {
    Set,
    Add,
    Condition,
}

/// The top attribute of a path (`a` of `a.b`): what a `REMOVE` must not overlap.
fn top(path: &[&str]) -> String {
    path.first().map(|a| a.to_string()).unwrap_or_default()
}

/// A write's update and condition expressions, with their names and values, built term by term.
#[derive(Debug, Default)]
pub(crate) struct Expression {
    sets: Vec<String>,
    adds: Vec<String>,
    conditions: Vec<String>,
    /// Attribute paths removed (`REMOVE`), each a list of names; dropped at build time where a `SET` or an `ADD` of
    /// the same expression writes the same top attribute (DynamoDB refuses overlapping paths).
    removes: Vec<Vec<String>>,
    /// The top attributes the `SET`s and `ADD`s write.
    written: std::collections::HashSet<String>,
    /// Placeholder → attribute; one placeholder an attribute, however often the expressions name it.
    names: HashMap<String, String>,
    values: HashMap<String, AttributeValue>,
}

impl Expression {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// `#n…` for an attribute.
    fn name(&mut self, attribute: &str) -> String {
        if let Some((placeholder, _)) = self.names.iter().find(|(_, a)| *a == attribute) {
            return placeholder.clone();
        }
        let placeholder = format!("#n{}", self.names.len());
        self.names
            .insert(placeholder.clone(), attribute.to_string());
        placeholder
    }

    /// `#n….#n…` for a path of attributes into maps.
    fn path(&mut self, path: &[&str]) -> String {
        path.iter()
            .map(|a| self.name(a))
            .collect::<Vec<_>>()
            .join(".")
    }

    /// `:v…` for a value.
    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// `term`, of the placeholders of `attribute` and `value` (when there is one), added to `clause`.
    fn term(
        self,
        clause: Clause,
        attribute: &str,
        value: Option<AttributeValue>,
        term: impl FnOnce(&str, &str) -> String,
    ) -> Self {
        self.term_at(clause, &[attribute], value, term)
    }

    /// [`Expression::term`] of a path into maps.
    fn term_at(
        mut self,
        clause: Clause,
        path: &[&str],
        value: Option<AttributeValue>,
        term: impl FnOnce(&str, &str) -> String,
    ) -> Self {
        if !matches!(clause, Clause::Condition) {
            self.written.insert(top(path));
        }
        let name = self.path(path);
        let value = value.map(|v| self.value(v)).unwrap_or_default();
        let term = term(&name, &value);
        match clause {
            Clause::Set => self.sets.push(term),
            Clause::Add => self.adds.push(term),
            Clause::Condition => self.conditions.push(term),
        }
        self
    }

    /// `SET attribute = value`.
    pub(crate) fn set(self, attribute: &str, value: AttributeValue) -> Self {
        self.term(Clause::Set, attribute, Some(value), |n, v| {
            format!("{n} = {v}")
        })
    }

    /// `SET a.b = value`: an attribute of a map the item holds.
    pub(crate) fn set_at(self, path: &[&str], value: AttributeValue) -> Self {
        self.term_at(Clause::Set, path, Some(value), |n, v| format!("{n} = {v}"))
    }

    /// `REMOVE attribute`, unless a `SET` or an `ADD` of this expression writes it (then it is not stale).
    pub(crate) fn remove(mut self, attribute: &str) -> Self {
        let path = vec![attribute.to_string()];
        if !self.removes.contains(&path) {
            self.removes.push(path);
        }
        self
    }

    /// On condition that `a.b` (an attribute of a map) is `value`.
    pub(crate) fn if_equals_at(self, path: &[&str], value: AttributeValue) -> Self {
        self.term_at(Clause::Condition, path, Some(value), |n, v| {
            format!("{n} = {v}")
        })
    }

    /// `ADD attribute value`: a number added to (an absent attribute counts as zero).
    pub(crate) fn add(self, attribute: &str, value: AttributeValue) -> Self {
        self.term(Clause::Add, attribute, Some(value), |n, v| {
            format!("{n} {v}")
        })
    }

    /// On condition that `attribute` is `value`.
    pub(crate) fn if_equals(self, attribute: &str, value: AttributeValue) -> Self {
        self.term(Clause::Condition, attribute, Some(value), |n, v| {
            format!("{n} = {v}")
        })
    }

    /// On condition that the item has `attribute` (a key attribute: that the item exists).
    pub(crate) fn if_exists(self, attribute: &str) -> Self {
        self.term(Clause::Condition, attribute, None, |n, _| {
            format!("attribute_exists({n})")
        })
    }

    /// On condition that the item has no `attribute` (a key attribute: that there is no such item).
    pub(crate) fn if_absent(self, attribute: &str) -> Self {
        self.term(Clause::Condition, attribute, None, |n, _| {
            format!("attribute_not_exists({n})")
        })
    }

    /// On condition that `attribute` is absent or compares with `bound` as `comparison` says (`<`, `<=`, `>`): under
    /// a limit, at most a ceiling, over a floor.
    pub(crate) fn if_absent_or(
        self,
        attribute: &str,
        comparison: &str,
        bound: AttributeValue,
    ) -> Self {
        self.term(Clause::Condition, attribute, Some(bound), |n, v| {
            format!("(attribute_not_exists({n}) OR {n} {comparison} {v})")
        })
    }

    /// The update expression: its `SET`, `ADD` and `REMOVE` clauses.
    fn update_expression(&mut self) -> String {
        let removes: Vec<Vec<String>> = std::mem::take(&mut self.removes)
            .into_iter()
            .filter(|path| !self.written.contains(&path[0]))
            .collect();
        let removes: Vec<String> = removes
            .iter()
            .map(|path| {
                let path: Vec<&str> = path.iter().map(String::as_str).collect();
                self.path(&path)
            })
            .collect();
        let mut clauses = Vec::new();
        if !removes.is_empty() {
            clauses.push(format!("REMOVE {}", removes.join(", ")));
        }
        if !self.sets.is_empty() {
            clauses.push(format!("SET {}", self.sets.join(", ")));
        }
        if !self.adds.is_empty() {
            clauses.push(format!("ADD {}", self.adds.join(", ")));
        }
        clauses.join(" ")
    }

    /// The condition expression, when the write has one.
    fn condition_expression(&self) -> Option<String> {
        (!self.conditions.is_empty()).then(|| self.conditions.join(" AND "))
    }

    /// The names and the values, each `None` when empty (DynamoDB refuses an empty map).
    fn placeholders(self) -> Placeholders {
        Placeholders {
            names: (!self.names.is_empty()).then_some(self.names),
            values: (!self.values.is_empty()).then_some(self.values),
        }
    }

    /// The update of the item at `key` in a transaction.
    pub(crate) fn update(mut self, table: &str, key: Item) -> TransactWriteItem {
        let (update, condition) = (self.update_expression(), self.condition_expression());
        let Placeholders { names, values } = self.placeholders();
        let update = Update::builder()
            .table_name(table)
            .set_key(Some(key))
            .update_expression(update)
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .build()
            .expect("an update has its table, key and expression");
        TransactWriteItem::builder().update(update).build()
    }

    /// The same update as one `UpdateItem` call (`call`, with its table and return values).
    pub(crate) fn update_item(
        mut self,
        call: UpdateItemFluentBuilder,
        key: Item,
    ) -> UpdateItemFluentBuilder {
        let (update, condition) = (self.update_expression(), self.condition_expression());
        let Placeholders { names, values } = self.placeholders();
        call.set_key(Some(key))
            .update_expression(update)
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
    }

    /// A check of the item at `key`, changing nothing, that holds a transaction to the conditions.
    pub(crate) fn check(self, table: &str, key: Item) -> ConditionCheck {
        let condition = self.condition_expression().unwrap_or_default();
        let Placeholders { names, values } = self.placeholders();
        ConditionCheck::builder()
            .table_name(table)
            .set_key(Some(key))
            .condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .build()
            .expect("a condition check has its table, key and condition")
    }

    /// `item` put whole, on the conditions.
    pub(crate) fn put(self, table: &str, item: Item) -> TransactWriteItem {
        let condition = self.condition_expression();
        let Placeholders { names, values } = self.placeholders();
        let put = Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .build()
            .expect("a put has its table and item");
        TransactWriteItem::builder().put(put).build()
    }

    /// The item at `key` deleted, on the conditions.
    pub(crate) fn delete(self, table: &str, key: Item) -> TransactWriteItem {
        let condition = self.condition_expression();
        let Placeholders { names, values } = self.placeholders();
        let delete = Delete::builder()
            .table_name(table)
            .set_key(Some(key))
            .set_condition_expression(condition)
            .set_expression_attribute_names(names)
            .set_expression_attribute_values(values)
            .build()
            .expect("a delete has its table and key");
        TransactWriteItem::builder().delete(delete).build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::{n, s};

    #[test]
    fn an_attribute_named_twice_has_one_placeholder_and_clauses_come_in_order() {
        let mut e = Expression::new()
            .add("turns", n(1))
            .set("title", s("t"))
            .set("expiresAt", n(9))
            .if_absent_or("turns", "<", n(5))
            .if_equals("version", n(3));
        assert_eq!(
            e.update_expression(),
            "SET #n1 = :v1, #n2 = :v2 ADD #n0 :v0"
        );
        assert_eq!(
            e.condition_expression().as_deref(),
            Some("(attribute_not_exists(#n0) OR #n0 < :v3) AND #n3 = :v4")
        );
        let Placeholders { names, values } = e.placeholders();
        let names = names.unwrap();
        assert_eq!(names.len(), 4);
        assert_eq!(names["#n0"], "turns");
        assert_eq!(names["#n2"], "expiresAt");
        assert_eq!(values.unwrap()[":v4"], n(3));
    }

    #[test]
    fn a_remove_of_what_the_same_write_sets_or_adds_is_dropped() {
        let mut e = Expression::new()
            .remove("DAY#1#turns")
            .remove("HOLD#a")
            .remove("RATE#1")
            .remove("RATE#1")
            .add("DAY#1#turns", n(1))
            .set_at(&["HOLD#a", "version"], n(2))
            .if_equals_at(&["HOLD#a", "version"], n(1));
        assert_eq!(
            e.update_expression(),
            "REMOVE #n3 SET #n1.#n2 = :v1 ADD #n0 :v0"
        );
        assert_eq!(e.condition_expression().as_deref(), Some("#n1.#n2 = :v2"));
        assert_eq!(e.names["#n3"], "RATE#1");
    }

    #[test]
    fn a_write_without_values_sends_no_empty_map() {
        let Placeholders { names, values } = Expression::new().if_absent("pk").placeholders();
        assert_eq!(names.unwrap()["#n0"], "pk");
        assert!(values.is_none());
        let Placeholders { names, values } = Expression::new().placeholders();
        assert!(names.is_none() && values.is_none());
    }
}
