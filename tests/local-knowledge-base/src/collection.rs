//! A folder of documents cut into passages (chunks), each with the metadata Bedrock gives it.

use std::io;
use std::path::Path;

use serde_json::{Map, Value};

/// The bucket the collection pretends to be in: a document `X.md` has the source URI `s3://local-knowledge-base/X.md`.
pub const BUCKET: &str = "local-knowledge-base";
/// The id of the one data source every passage comes from.
pub const DATA_SOURCE_ID: &str = "LOCALDATA1";
/// Paragraphs join into one passage while it stays under this many characters.
pub const CHUNK_CHARS: usize = 600;

pub const SOURCE_URI_KEY: &str = "x-amz-bedrock-kb-source-uri";
pub const CHUNK_ID_KEY: &str = "x-amz-bedrock-kb-chunk-id";
pub const DATA_SOURCE_ID_KEY: &str = "x-amz-bedrock-kb-data-source-id";
pub const PAGE_NUMBER_KEY: &str = "x-amz-bedrock-kb-document-page-number";

/// One passage of a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub text: String,
    /// `s3://local-knowledge-base/X.md`.
    pub source_uri: String,
    /// The document's attributes and Bedrock's own (`x-amz-bedrock-kb-…`).
    pub metadata: Map<String, Value>,
}

/// Reads every `*.md` and `*.txt` of `dir` (not `README.md`, not sub-folders) with its `X.md.metadata.json`, in
/// file-name order, and cuts them into passages.
pub fn load(dir: &Path) -> io::Result<Vec<Chunk>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            (n.ends_with(".md") || n.ends_with(".txt")) && !n.eq_ignore_ascii_case("README.md")
        })
        .collect();
    names.sort();
    let mut chunks = Vec::new();
    for name in names {
        let text = std::fs::read_to_string(dir.join(&name))?;
        let attributes = attributes(&dir.join(format!("{name}.metadata.json")))?;
        chunks.extend(chunk_document(&name, &text, &attributes));
    }
    Ok(chunks)
}

/// The `metadataAttributes` of a side file, or none when there is no side file.
fn attributes(path: &Path) -> io::Result<Map<String, Value>> {
    let raw = match std::fs::read_to_string(path) {
        Ok(raw) => raw,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(e),
    };
    let invalid = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {why}", path.display()),
        )
    };
    let value: Value = serde_json::from_str(&raw).map_err(|e| invalid(e.to_string()))?;
    match value.get("metadataAttributes") {
        None => Ok(Map::new()),
        Some(Value::Object(attributes)) => Ok(attributes.clone()),
        Some(_) => Err(invalid("metadataAttributes must be an object".into())),
    }
}

/// The page a line starts, if it is a page marker: a line holding only `<!-- page N -->`.
fn page_marker(line: &str) -> Option<u64> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    inner.strip_prefix("page")?.trim().parse().ok()
}

/// Cuts one document into passages: pages at their markers, then paragraphs (split at blank lines) joined while the
/// passage stays under [`CHUNK_CHARS`]; a heading always stays with the paragraph after it.
pub fn chunk_document(name: &str, text: &str, attributes: &Map<String, Value>) -> Vec<Chunk> {
    let paged = text.lines().any(|l| page_marker(l).is_some());
    // (page, paragraphs) in order.
    let mut pages: Vec<(u64, Vec<String>)> = vec![(1, Vec::new())];
    let mut paragraph = String::new();
    let flush = |paragraph: &mut String, pages: &mut Vec<(u64, Vec<String>)>| {
        let p = paragraph.trim();
        if !p.is_empty() {
            pages.last_mut().expect("a page").1.push(p.to_string());
        }
        paragraph.clear();
    };
    for line in text.lines() {
        if let Some(page) = page_marker(line) {
            flush(&mut paragraph, &mut pages);
            pages.push((page, Vec::new()));
        } else if line.trim().is_empty() {
            flush(&mut paragraph, &mut pages);
        } else {
            if !paragraph.is_empty() {
                paragraph.push('\n');
            }
            paragraph.push_str(line.trim_end());
        }
    }
    flush(&mut paragraph, &mut pages);

    let source_uri = format!("s3://{BUCKET}/{name}");
    let mut chunks = Vec::new();
    for (page, paragraphs) in pages {
        let mut current = String::new();
        let mut emit = |current: &mut String| {
            if current.is_empty() {
                return;
            }
            let mut metadata = attributes.clone();
            metadata.insert(SOURCE_URI_KEY.into(), Value::String(source_uri.clone()));
            metadata.insert(
                CHUNK_ID_KEY.into(),
                Value::String(format!("{name}:{}", chunks.len() + 1)),
            );
            metadata.insert(
                DATA_SOURCE_ID_KEY.into(),
                Value::String(DATA_SOURCE_ID.into()),
            );
            if paged {
                metadata.insert(PAGE_NUMBER_KEY.into(), Value::from(page));
            }
            chunks.push(Chunk {
                text: std::mem::take(current),
                source_uri: source_uri.clone(),
                metadata,
            });
        };
        for p in paragraphs {
            let ends_in_heading = current.lines().last().is_some_and(|l| l.starts_with('#'));
            if !current.is_empty() && !ends_in_heading && current.len() + p.len() + 2 > CHUNK_CHARS
            {
                emit(&mut current);
            }
            if !current.is_empty() {
                current.push_str("\n\n");
            }
            current.push_str(&p);
        }
        emit(&mut current);
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pages_split_at_markers_and_passages_never_span_two() {
        let text = "<!-- page 1 -->\n# Title\n\nFirst page.\n<!-- page 2 -->\nSecond page.\n\n<!--  page 3  -->\nThird.";
        let attrs = json!({"category": "x"}).as_object().cloned().unwrap();
        let chunks = chunk_document("Doc.md", text, &attrs);
        let got: Vec<(String, Value)> = chunks
            .iter()
            .map(|c| (c.text.clone(), c.metadata[PAGE_NUMBER_KEY].clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("# Title\n\nFirst page.".to_string(), json!(1)),
                ("Second page.".to_string(), json!(2)),
                ("Third.".to_string(), json!(3)),
            ]
        );
        let first = &chunks[0].metadata;
        assert_eq!(first["category"], "x");
        assert_eq!(first[SOURCE_URI_KEY], "s3://local-knowledge-base/Doc.md");
        assert_eq!(first[CHUNK_ID_KEY], "Doc.md:1");
        assert_eq!(first[DATA_SOURCE_ID_KEY], DATA_SOURCE_ID);
        assert_eq!(chunks[0].source_uri, "s3://local-knowledge-base/Doc.md");
    }

    #[test]
    fn a_document_without_markers_has_no_page_numbers_and_long_text_makes_several_passages() {
        let paragraph = "word ".repeat(50);
        let text = format!("# Head\n\n{paragraph}\n\n{paragraph}\n\n{paragraph}\n");
        let chunks = chunk_document("Plain.txt", &text, &Map::new());
        assert!(chunks.len() >= 2, "{chunks:?}");
        assert!(
            chunks
                .iter()
                .all(|c| !c.metadata.contains_key(PAGE_NUMBER_KEY))
        );
        assert!(chunks.iter().all(|c| c.text.len() <= CHUNK_CHARS));
        assert!(chunks[0].text.starts_with("# Head\n\nword"));
    }

    #[test]
    fn the_sample_collection_loads_with_its_metadata_and_skips_the_readme() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples/knowledge-base");
        let chunks = load(&dir).unwrap();
        assert!(chunks.iter().all(|c| !c.source_uri.ends_with("README.md")));
        let alice = chunks
            .iter()
            .find(|c| c.source_uri.ends_with("/Salary_Review_Alice.md"))
            .unwrap();
        assert_eq!(alice.metadata["oids"], json!(["alice"]));
        assert_eq!(alice.metadata["category"], "compensation");
        let dental = chunks
            .iter()
            .find(|c| {
                c.source_uri.ends_with("/Benefit_Options.md") && c.text.contains("Dental coverage")
            })
            .unwrap();
        assert_eq!(dental.metadata[PAGE_NUMBER_KEY], json!(2));
    }
}
