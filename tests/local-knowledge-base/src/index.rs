//! The full-text index over a collection's passages: tantivy's BM25, in RAM.

use std::collections::BTreeSet;
use std::io;
use std::sync::Arc;

use tantivy::collector::{FilterCollector, TopDocs};
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TEXT};
use tantivy::{Index, IndexReader, TantivyDocument, Term};

use crate::collection::Chunk;
use crate::filter::Filter;

/// Words too common to say anything about a passage; left out of the index and of queries.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "has",
    "have", "how", "i", "in", "is", "it", "its", "my", "of", "on", "or", "our", "so", "that",
    "the", "their", "there", "this", "to", "we", "what", "when", "where", "which", "who", "will",
    "with", "you", "your",
];

/// A light English stemmer, the same for passages and queries: `policies` → `policy`, `benefits` → `benefit`,
/// `employee's` → `employee`.
fn stem(word: &str) -> String {
    let word = word.strip_suffix("'s").unwrap_or(word);
    if word.len() > 4
        && let Some(stem) = word.strip_suffix("ies")
    {
        return format!("{stem}y");
    }
    if word.len() > 3
        && word.ends_with('s')
        && !["ss", "us", "is"].iter().any(|end| word.ends_with(end))
    {
        return word[..word.len() - 1].to_string();
    }
    word.to_string()
}

/// The terms of a text: lower-cased words (letters and digits), stop words left out, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .map(|w| w.trim_matches('\''))
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .map(stem)
        .collect()
}

/// A BM25 score mapped into (0, 1], as Bedrock's scores are: `bm25 / (bm25 + 1)`. Monotonic, so it keeps the order,
/// and the same passage and query always score the same.
pub fn normalise(bm25: f32) -> f64 {
    let bm25 = f64::from(bm25.max(0.0));
    bm25 / (bm25 + 1.0)
}

/// One passage found.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The passage's position in the collection.
    pub chunk: usize,
    /// [`normalise`]d.
    pub score: f64,
}

pub struct TextIndex {
    chunks: Vec<Chunk>,
    reader: IndexReader,
    text: Field,
}

/// The fast field holding a passage's position in the collection (filters read it).
const ORDINAL: &str = "ordinal";

fn io_error(e: tantivy::TantivyError) -> io::Error {
    io::Error::other(e.to_string())
}

impl TextIndex {
    /// Indexes the passages (in RAM, one segment).
    pub fn build(chunks: Vec<Chunk>) -> io::Result<Self> {
        let mut schema = Schema::builder();
        let text = schema.add_text_field("text", TEXT);
        let ordinal = schema.add_u64_field(ORDINAL, FAST);
        let index = Index::create_in_ram(schema.build());
        // One thread and tantivy's smallest budget: a collection is a few dozen passages.
        let mut writer = index
            .writer_with_num_threads::<TantivyDocument>(1, 15_000_000)
            .map_err(io_error)?;
        for (i, chunk) in chunks.iter().enumerate() {
            let mut doc = TantivyDocument::default();
            doc.add_text(text, terms(&chunk.text).join(" "));
            doc.add_u64(ordinal, i as u64);
            writer.add_document(doc).map_err(io_error)?;
        }
        writer.commit().map_err(io_error)?;
        let reader = index.reader().map_err(io_error)?;
        Ok(Self {
            chunks,
            reader,
            text,
        })
    }

    pub fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    /// The `top` passages that match `filter` (when there is one) and best match `query`, best first (ties: the
    /// earlier passage first). The filter is applied while collecting, so a passage it excludes never takes a place
    /// in the top.
    pub fn search(&self, query: &str, top: usize, filter: Option<&Filter>) -> io::Result<Vec<Hit>> {
        let unique: BTreeSet<String> = terms(query).into_iter().collect();
        if unique.is_empty() || top == 0 {
            return Ok(Vec::new());
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = unique
            .into_iter()
            .map(|t| {
                let term = TermQuery::new(
                    Term::from_field_text(self.text, &t),
                    IndexRecordOption::WithFreqs,
                );
                (Occur::Should, Box::new(term) as Box<dyn Query>)
            })
            .collect();
        let query = BooleanQuery::new(clauses);
        let allowed: Arc<Vec<bool>> = Arc::new(
            self.chunks
                .iter()
                .map(|c| filter.is_none_or(|f| f.matches(&c.metadata)))
                .collect(),
        );
        let collector = FilterCollector::new(
            ORDINAL.to_string(),
            move |ordinal: u64| allowed.get(ordinal as usize).copied().unwrap_or(false),
            TopDocs::with_limit(top).order_by_score(),
        );
        let searcher = self.reader.searcher();
        let found = searcher.search(&query, &collector).map_err(io_error)?;
        let mut hits = Vec::with_capacity(found.len());
        for (score, address) in found {
            let ordinals = searcher
                .segment_reader(address.segment_ord)
                .fast_fields()
                .u64(ORDINAL)
                .map_err(io_error)?;
            if let Some(chunk) = ordinals.first(address.doc_id) {
                hits.push((score, chunk as usize));
            }
        }
        hits.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(hits
            .into_iter()
            .map(|(score, chunk)| Hit {
                chunk,
                score: normalise(score),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collection::{PAGE_NUMBER_KEY, chunk_document};
    use crate::filter::parse;
    use serde_json::json;

    fn index(docs: &[(&str, &str, serde_json::Value)]) -> TextIndex {
        let chunks = docs
            .iter()
            .flat_map(|(name, text, meta)| chunk_document(name, text, meta.as_object().unwrap()))
            .collect();
        TextIndex::build(chunks).unwrap()
    }

    fn names(index: &TextIndex, hits: &[Hit]) -> Vec<String> {
        hits.iter()
            .map(|h| {
                index.chunks()[h.chunk]
                    .source_uri
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn terms_are_lower_cased_stemmed_and_without_stop_words() {
        assert_eq!(
            terms("What are the Benefits of the policies?"),
            ["benefit", "policy"]
        );
        assert_eq!(
            terms("The employee's 401(k) class"),
            ["employee", "401", "k", "class"]
        );
    }

    #[test]
    fn the_best_match_comes_first_with_a_score_in_0_1() {
        let idx = index(&[
            (
                "Tents.md",
                "Dry your tent before storing it. A wet tent grows mildew.",
                json!({}),
            ),
            (
                "Leave.md",
                "Vacation days and sick days are paid.",
                json!({}),
            ),
            (
                "Mixed.md",
                "Store staff take vacation in winter; the store sells a tent.",
                json!({}),
            ),
        ]);
        let hits = idx.search("how do I dry a wet tent?", 5, None).unwrap();
        assert_eq!(names(&idx, &hits), ["Tents.md", "Mixed.md"]);
        assert!(hits.iter().all(|h| h.score > 0.0 && h.score <= 1.0));
        assert!(hits[0].score > hits[1].score);
        // Deterministic: the same search scores the same.
        assert_eq!(
            idx.search("how do I dry a wet tent?", 5, None).unwrap(),
            hits
        );
        assert_eq!(idx.search("tent", 1, None).unwrap().len(), 1);
        assert!(idx.search("the of and", 5, None).unwrap().is_empty());
        assert!(idx.search("kayak", 5, None).unwrap().is_empty());
    }

    #[test]
    fn a_filter_applies_before_the_top_is_taken() {
        // The private passage matches best; with the filter it must not take the only place.
        let idx = index(&[
            (
                "Private.md",
                "salary salary salary review",
                json!({"category": "private"}),
            ),
            ("Public.md", "the salary review happens in March", json!({})),
        ]);
        let unfiltered = idx.search("salary review", 1, None).unwrap();
        assert_eq!(names(&idx, &unfiltered), ["Private.md"]);
        let public = parse(
            &json!({"notEquals": {"key": "category", "value": "private"}}),
            "filter",
        )
        .unwrap();
        let filtered = idx.search("salary review", 1, Some(&public)).unwrap();
        assert_eq!(names(&idx, &filtered), ["Public.md"]);
        let alice = parse(
            &json!({"listContains": {"key": "oids", "value": "alice"}}),
            "filter",
        )
        .unwrap();
        assert!(
            idx.search("salary review", 5, Some(&alice))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_sample_collection_answers_from_the_right_page() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base");
        let started = std::time::Instant::now();
        let idx = TextIndex::build(crate::collection::load(&dir).unwrap()).unwrap();
        let built = started.elapsed();
        assert!(
            built < std::time::Duration::from_secs(2),
            "index built in {built:?}"
        );
        let hits = idx.search("dental and vision coverage", 3, None).unwrap();
        let best = &idx.chunks()[hits[0].chunk];
        assert!(best.source_uri.ends_with("/Benefit_Options.md"), "{best:?}");
        assert_eq!(best.metadata[PAGE_NUMBER_KEY], json!(2));
    }
}
