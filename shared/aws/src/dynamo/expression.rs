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

/// A write's update and condition expressions, with their names and values, built term by term.
#[derive(Debug, Default)]
pub(crate) struct Expression {
    sets: Vec<String>,
    adds: Vec<String>,
    conditions: Vec<String>,
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

    /// `:v…` for a value.
    fn value(&mut self, value: AttributeValue) -> String {
        let placeholder = format!(":v{}", self.values.len());
        self.values.insert(placeholder.clone(), value);
        placeholder
    }

    /// `term`, of the placeholders of `attribute` and `value` (when there is one), added to `clause`.
    fn term(
        mut self,
        clause: Clause,
        attribute: &str,
        value: Option<AttributeValue>,
        term: impl FnOnce(&str, &str) -> String,
    ) -> Self {
        let name = self.name(attribute);
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

    /// `SET attribute = value` only where the item has none yet (an expiry, set by the write that creates the item).
    pub(crate) fn set_if_absent(self, attribute: &str, value: AttributeValue) -> Self {
        self.term(Clause::Set, attribute, Some(value), |n, v| {
            format!("{n} = if_not_exists({n}, {v})")
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

    /// The update expression: its `SET` and `ADD` clauses.
    fn update_expression(&self) -> String {
        let mut clauses = Vec::new();
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
    pub(crate) fn update(self, table: &str, key: Item) -> TransactWriteItem {
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
        self,
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
        let e = Expression::new()
            .add("turns", n(1))
            .set("title", s("t"))
            .set_if_absent("expiresAt", n(9))
            .if_absent_or("turns", "<", n(5))
            .if_equals("version", n(3));
        assert_eq!(
            e.update_expression(),
            "SET #n1 = :v1, #n2 = if_not_exists(#n2, :v2) ADD #n0 :v0"
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
    fn a_write_without_values_sends_no_empty_map() {
        let Placeholders { names, values } = Expression::new().if_absent("pk").placeholders();
        assert_eq!(names.unwrap()["#n0"], "pk");
        assert!(values.is_none());
        let Placeholders { names, values } = Expression::new().placeholders();
        assert!(names.is_none() && values.is_none());
    }
}
