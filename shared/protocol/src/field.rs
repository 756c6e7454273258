//! A JSON field that can be absent, `null`, or hold a value, so that what a client sent survives a round trip.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Absent, explicitly `null`, or a value. Use with
/// `#[serde(default, skip_serializing_if = "Field::is_missing")]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Field<T> {
    #[default]
    Missing,
    Null,
    Value(T),
}

impl<T> Field<T> {
    pub fn is_missing(&self) -> bool {
        matches!(self, Field::Missing)
    }

    pub fn as_ref(&self) -> Option<&T> {
        match self {
            Field::Value(v) => Some(v),
            _ => None,
        }
    }

    pub fn into_option(self) -> Option<T> {
        match self {
            Field::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<T> From<Option<T>> for Field<T> {
    /// `None` becomes an explicit `null`: the field is present in the output.
    fn from(value: Option<T>) -> Self {
        value.map_or(Field::Null, Field::Value)
    }
}

impl<T: Serialize> Serialize for Field<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Value(v) => v.serialize(serializer),
            Field::Missing | Field::Null => serializer.serialize_none(),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(Option::<T>::deserialize(deserializer)?.into())
    }
}

/// Whether a count is zero: counts that only some answers have are left out when zero.
pub(crate) fn is_zero(n: &u64) -> bool {
    *n == 0
}
