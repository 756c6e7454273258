//! Limits as data, so that a new per-user limit is a configuration entry rather than a field restated in every
//! layer: a limit is a resource counted over a period ([`LimitKind`]) and an amount, per user, and [`Limits`] is
//! the list of them in force. The configuration reads them, the ledgers count and check them, and `GET /usage`
//! shows them, each from this one list.
//!
//! Every resource spent is counted in its UTC calendar periods (the day; the ISO week, from Monday 00:00 UTC; the
//! month) and requests in the sliding minute of the rate limit too ([`crate::BUCKET_SECONDS`]); what is held, the
//! open watches of documents, is counted at once ([`Period::AtOnce`]). Turns (requests, tokens, cost), uploads
//! (documents, bytes) and watches are three families: each is counted only while one of its limits is configured.

use std::marker::PhantomData;

use serde::{Serialize, Serializer};

/// What a limit counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Resource {
    /// Requests to the model routes, counted when admitted.
    Requests,
    /// Tokens of model use: what was spent and what turns in progress hold.
    Tokens,
    /// US dollars of model use, likewise (needs the model's prices).
    Cost,
    /// Documents uploaded into the knowledge base (`POST /documents`).
    UploadedDocuments,
    /// Bytes of documents uploaded likewise.
    UploadedBytes,
    /// Watches of the caller's documents (`GET /documents/events`) open at once: each holds a streaming instance.
    OpenWatches,
}

/// Which limits are counted together: a family is counted only while one of its limits is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Requests, tokens and cost: counted when a turn is admitted and as it settles.
    Turns,
    /// Uploaded documents and bytes: counted when an upload is.
    Uploads,
    /// Open watches: each takes a place when it opens and gives it back when it ends.
    Watches,
}

impl Resource {
    /// The resource's name in `GET /usage` and in a limit's name (`uploaded_documents`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Requests => "requests",
            Resource::Tokens => "tokens",
            Resource::Cost => "cost",
            Resource::UploadedDocuments => "uploaded_documents",
            Resource::UploadedBytes => "uploaded_bytes",
            Resource::OpenWatches => "open_watches",
        }
    }

    pub fn family(self) -> Family {
        match self {
            Resource::Requests | Resource::Tokens | Resource::Cost => Family::Turns,
            Resource::UploadedDocuments | Resource::UploadedBytes => Family::Uploads,
            Resource::OpenWatches => Family::Watches,
        }
    }

    /// Whether its amounts are US dollars (else whole numbers).
    pub fn is_dollars(self) -> bool {
        self == Resource::Cost
    }
}

/// What a limit is counted over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Period {
    /// Any 60 seconds: the sliding window of the rate limit.
    Minute,
    /// The UTC day.
    Day,
    /// The ISO week, from Monday 00:00 UTC.
    Week,
    /// The UTC calendar month.
    Month,
    /// Now: what is held at once (open watches), not counted over time.
    AtOnce,
}

impl Period {
    /// The calendar periods, each with its own counter.
    pub const CALENDAR: [Period; 3] = [Period::Day, Period::Week, Period::Month];

    /// The period's name in `GET /usage` and in a limit's name.
    pub fn name(self) -> &'static str {
        match self {
            Period::Minute => "minute",
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::AtOnce => "at_once",
        }
    }
}

/// Which limit: a resource counted over a period. Its name, `{resource}_per_{period}` (`tokens_per_day`), is how
/// `GET /usage` and a refusal's log name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LimitKind {
    pub resource: Resource,
    pub period: Period,
}

impl LimitKind {
    pub const REQUESTS_PER_MINUTE: LimitKind = LimitKind::new(Resource::Requests, Period::Minute);
    pub const TOKENS_PER_DAY: LimitKind = LimitKind::new(Resource::Tokens, Period::Day);
    pub const TOKENS_PER_MONTH: LimitKind = LimitKind::new(Resource::Tokens, Period::Month);
    pub const COST_PER_DAY: LimitKind = LimitKind::new(Resource::Cost, Period::Day);
    pub const COST_PER_MONTH: LimitKind = LimitKind::new(Resource::Cost, Period::Month);
    pub const UPLOADED_DOCUMENTS_PER_DAY: LimitKind =
        LimitKind::new(Resource::UploadedDocuments, Period::Day);
    pub const UPLOADED_BYTES_PER_DAY: LimitKind =
        LimitKind::new(Resource::UploadedBytes, Period::Day);
    pub const OPEN_WATCHES: LimitKind = LimitKind::new(Resource::OpenWatches, Period::AtOnce);

    /// Every limit there is: each resource per calendar period, requests per sliding minute (the one resource the
    /// minute's window counts), and the watches open at once.
    pub const ALL: [LimitKind; 17] = {
        use Period::*;
        use Resource::*;
        [
            LimitKind::new(Requests, Minute),
            LimitKind::new(Requests, Day),
            LimitKind::new(Requests, Week),
            LimitKind::new(Requests, Month),
            LimitKind::new(Tokens, Day),
            LimitKind::new(Tokens, Week),
            LimitKind::new(Tokens, Month),
            LimitKind::new(Cost, Day),
            LimitKind::new(Cost, Week),
            LimitKind::new(Cost, Month),
            LimitKind::new(UploadedDocuments, Day),
            LimitKind::new(UploadedDocuments, Week),
            LimitKind::new(UploadedDocuments, Month),
            LimitKind::new(UploadedBytes, Day),
            LimitKind::new(UploadedBytes, Week),
            LimitKind::new(UploadedBytes, Month),
            LimitKind::new(OpenWatches, AtOnce),
        ]
    };

    pub const fn new(resource: Resource, period: Period) -> Self {
        Self { resource, period }
    }

    /// `tokens_per_day`; what is held at once, by its resource alone (`open_watches`).
    pub fn name(self) -> String {
        match self.period {
            Period::AtOnce => self.resource.name().to_string(),
            period => format!("{}_per_{}", self.resource.name(), period.name()),
        }
    }

    /// The variable that configures it: `QUOTA_{RESOURCE}_PER_{PERIOD}` (requests per minute is also
    /// `RATE_LIMIT_PER_MINUTE`, its older name), `QUOTA_OPEN_WATCHES` for the watches open at once; `None` for a
    /// limit that is not counted (a minute of anything but requests, any other resource at once, watches over time).
    /// Spelled out, so that each is found where the code reads it.
    pub fn setting(self) -> Option<&'static str> {
        use Period::*;
        use Resource::*;
        Some(match (self.resource, self.period) {
            (Requests, Minute) => "QUOTA_REQUESTS_PER_MINUTE",
            (Requests, Day) => "QUOTA_REQUESTS_PER_DAY",
            (Requests, Week) => "QUOTA_REQUESTS_PER_WEEK",
            (Requests, Month) => "QUOTA_REQUESTS_PER_MONTH",
            (Tokens, Day) => "QUOTA_TOKENS_PER_DAY",
            (Tokens, Week) => "QUOTA_TOKENS_PER_WEEK",
            (Tokens, Month) => "QUOTA_TOKENS_PER_MONTH",
            (Cost, Day) => "QUOTA_COST_PER_DAY",
            (Cost, Week) => "QUOTA_COST_PER_WEEK",
            (Cost, Month) => "QUOTA_COST_PER_MONTH",
            (UploadedDocuments, Day) => "QUOTA_UPLOADED_DOCUMENTS_PER_DAY",
            (UploadedDocuments, Week) => "QUOTA_UPLOADED_DOCUMENTS_PER_WEEK",
            (UploadedDocuments, Month) => "QUOTA_UPLOADED_DOCUMENTS_PER_MONTH",
            (UploadedBytes, Day) => "QUOTA_UPLOADED_BYTES_PER_DAY",
            (UploadedBytes, Week) => "QUOTA_UPLOADED_BYTES_PER_WEEK",
            (UploadedBytes, Month) => "QUOTA_UPLOADED_BYTES_PER_MONTH",
            (OpenWatches, AtOnce) => "QUOTA_OPEN_WATCHES",
            (_, Minute | AtOnce) | (OpenWatches, _) => return None,
        })
    }

    /// Where it sits in [`LimitKind::ALL`]; `None` for one that is not counted.
    fn index(self) -> Option<usize> {
        LimitKind::ALL.iter().position(|k| *k == self)
    }
}

impl Serialize for LimitKind {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.name())
    }
}

/// An amount for each limit of [`LimitKind::ALL`] (`None`: none set), of one use `M`: the limits in force
/// ([`Limits`]) or a user's own ([`LimitOverrides`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitAmounts<M> {
    amounts: [Option<f64>; LimitKind::ALL.len()],
    of: PhantomData<M>,
}

/// What [`Limits`] hold: the limits in force.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct InForce;

/// What [`LimitOverrides`] hold: a user's own limits.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct UsersOwn;

/// The limits in force: an amount per [`LimitKind`] (US dollars for cost, whole numbers else). Empty (the default):
/// nothing is checked before a turn or an upload.
pub type Limits = LimitAmounts<InForce>;

/// One user's own limits, set by the operator in the store (see docs/operations.md); each one set replaces the
/// configured limit of its kind, 0 lifts it.
pub type LimitOverrides = LimitAmounts<UsersOwn>;

impl<M> LimitAmounts<M> {
    /// These amounts and `kind` at `amount` (a user's own 0: no limit for the user).
    pub fn with(mut self, kind: LimitKind, amount: f64) -> Self {
        self.set(kind, Some(amount));
        self
    }

    /// Sets `kind` to `amount` (`None`: no limit, or none of the user's own); a kind that is not counted is ignored
    /// (the configuration refuses it before).
    pub fn set(&mut self, kind: LimitKind, amount: Option<f64>) {
        if let Some(i) = kind.index() {
            self.amounts[i] = amount;
        }
    }

    /// The amount of `kind`, `None` when it is not limited (or the user's item does not name it).
    pub fn get(&self, kind: LimitKind) -> Option<f64> {
        kind.index().and_then(|i| self.amounts[i])
    }

    /// Every amount set, in the order of [`LimitKind::ALL`].
    pub fn iter(&self) -> impl Iterator<Item = (LimitKind, f64)> + '_ {
        LimitKind::ALL
            .iter()
            .zip(self.amounts.iter())
            .filter_map(|(kind, amount)| amount.map(|a| (*kind, a)))
    }
}

impl Limits {
    /// The limits in force of `family`.
    pub fn of(&self, family: Family) -> impl Iterator<Item = (LimitKind, f64)> + '_ {
        self.iter()
            .filter(move |(k, _)| k.resource.family() == family)
    }

    /// Whether any limit is set.
    pub fn any(&self) -> bool {
        self.iter().next().is_some()
    }

    /// Whether a limit of `family` is set: then that family is counted.
    pub fn counts(&self, family: Family) -> bool {
        self.of(family).next().is_some()
    }

    /// Whether a limit of `period` is set.
    pub fn has_period(&self, period: Period) -> bool {
        self.iter().any(|(k, _)| k.period == period)
    }

    /// The limits for one user: the operator's item replaces each configured limit it names (0 there: none), and
    /// sets one it names that is not configured where its family is counted. Where no limit of a family is
    /// configured, nothing of it is counted, so an item changes nothing of it either.
    pub fn for_user(&self, raised: &LimitOverrides) -> Limits {
        let mut user = Limits::default();
        for kind in LimitKind::ALL {
            if !self.counts(kind.resource.family()) {
                continue;
            }
            let amount = match raised.get(kind) {
                // What is held at once is the same for everyone (the watches' places are counted without the item).
                _ if kind.period == Period::AtOnce => self.get(kind),
                None => self.get(kind),
                Some(0.0) => None,
                Some(v) => Some(v),
            };
            user.set(kind, amount);
        }
        user
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_named_by_its_resource_and_period() {
        assert_eq!(LimitKind::TOKENS_PER_DAY.name(), "tokens_per_day");
        assert_eq!(
            LimitKind::UPLOADED_BYTES_PER_DAY.setting(),
            Some("QUOTA_UPLOADED_BYTES_PER_DAY")
        );
        assert_eq!(
            serde_json::to_value(LimitKind::new(Resource::Requests, Period::Week)).unwrap(),
            "requests_per_week"
        );
        // Each counted limit has a setting of its own.
        let settings: std::collections::BTreeSet<_> =
            LimitKind::ALL.iter().filter_map(|k| k.setting()).collect();
        assert_eq!(settings.len(), LimitKind::ALL.len());
    }

    #[test]
    fn only_requests_are_counted_per_minute() {
        let tokens_per_minute = LimitKind::new(Resource::Tokens, Period::Minute);
        let limits = Limits::default().with(tokens_per_minute, 5.0);
        assert_eq!(limits.get(tokens_per_minute), None);
        assert_eq!(tokens_per_minute.setting(), None);
        assert!(!limits.any());
    }

    #[test]
    fn a_family_is_counted_only_while_one_of_its_limits_is_configured() {
        let limits = Limits::default().with(LimitKind::TOKENS_PER_DAY, 10.0);
        let item = LimitOverrides::default()
            .with(LimitKind::new(Resource::Requests, Period::Day), 3.0)
            .with(LimitKind::UPLOADED_DOCUMENTS_PER_DAY, 3.0);
        let user = limits.for_user(&item);
        assert_eq!(
            user.get(LimitKind::new(Resource::Requests, Period::Day)),
            Some(3.0)
        );
        assert_eq!(user.get(LimitKind::UPLOADED_DOCUMENTS_PER_DAY), None);
        assert!(user.counts(Family::Turns) && !user.counts(Family::Uploads));
    }
}
