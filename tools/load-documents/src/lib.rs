//! The operator's bulk load, so that a folder of documents gets into the knowledge base with the access lists the
//! operator means, in one command that can run again: each file is loaded through the documents service the routes
//! use ([`chat_core::Documents::load`]), which compares its content digest and access list with its record and
//! stores and ingests only what changed. This crate is the command's work (the folder, the access rules, the
//! outcomes, the wait and the summary); `main.rs` builds the adapters from the settings and prints.
//!
//! Who may find a file, by the first of these that speaks for it:
//!
//! 1. the manifest (`--manifest FILE`, JSON): an object whose keys are paths relative to the folder (a key ending in
//!    `/` is a folder: every file under it), each to `{"groups": [...], "oids": [...], "everyone": true}` (any of
//!    them); the longest key that matches wins;
//! 2. the folder's layout: `public/...` is for everyone (the everyone group), `groups/<name>/...` for the group
//!    `<name>`, `users/<oid>/...` for that oid alone;
//! 3. nothing: the file is refused (`failed`), never made public.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use chat_core::{
    AccessList, DocumentError, DocumentRecord, DocumentStatus, Documents, LoadAccess, LoadOutcome,
};
use futures_util::StreamExt;
use serde::Deserialize;

/// How many files are in flight at once when `--concurrency` does not say.
pub const DEFAULT_CONCURRENCY: usize = 6;
/// The most files in flight at once.
pub const MAX_CONCURRENCY: usize = 16;
/// How long `--wait` waits for the ingested documents to settle when `--wait-seconds` does not say.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(600);
/// How often `--wait` asks the knowledge base.
const POLL: Duration = Duration::from_millis(500);
/// How many documents one status request asks about (the adapter asks 10 a call within the service's timeout).
const STATUS_BATCH: usize = 50;

/// Why the load could not start (a file that fails is an outcome, not this).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("the folder {0} cannot be read: {1}")]
    Folder(PathBuf, std::io::Error),
    #[error("the manifest {0} cannot be read: {1}")]
    ManifestRead(PathBuf, std::io::Error),
    #[error("the manifest {0} is not a JSON object of path → {{groups, oids, everyone}}: {1}")]
    ManifestFormat(PathBuf, String),
    #[error("the manifest's rule {0:?}: {1}")]
    ManifestRule(String, DocumentError),
    #[error("the owner's records could not be read: {0}")]
    Records(DocumentError),
}

/// What the operator asked for.
#[derive(Debug, Clone)]
pub struct Options {
    pub folder: PathBuf,
    pub manifest: Option<PathBuf>,
    /// The owner id the documents are kept under (`--owner`, default `operator`).
    pub owner: String,
    /// Delete the documents whose files are gone from the folder.
    pub delete_missing: bool,
    /// Wait, at most this long, until each document ingested is indexed or failed.
    pub wait: Option<Duration>,
    pub concurrency: usize,
}

/// One access rule of the manifest, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    oids: Vec<String>,
    #[serde(default)]
    everyone: bool,
}

/// The access rules: the manifest's (checked), then the layout's.
#[derive(Debug, Default)]
pub struct Rules {
    /// Key (a path, or a folder ending in `/`) → its access list.
    manifest: BTreeMap<String, AccessList>,
}

impl Rules {
    /// The manifest's rules, each checked by the service (`documents.load_access`).
    pub fn from_manifest(path: &Path, documents: &Documents) -> Result<Self, LoadError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| LoadError::ManifestRead(path.to_path_buf(), e))?;
        Self::from_json(&text, documents).map_err(|e| match e {
            LoadError::ManifestFormat(_, why) => LoadError::ManifestFormat(path.into(), why),
            other => other,
        })
    }

    /// The rules of a manifest's text.
    pub fn from_json(text: &str, documents: &Documents) -> Result<Self, LoadError> {
        let raw: BTreeMap<String, Rule> = serde_json::from_str(text)
            .map_err(|e| LoadError::ManifestFormat(PathBuf::new(), e.to_string()))?;
        let mut manifest = BTreeMap::new();
        for (key, rule) in raw {
            let normal = key.trim().trim_start_matches("./").to_string();
            let path = normal.trim_end_matches('/');
            if !chat_core::is_source_path(path) {
                return Err(LoadError::ManifestFormat(
                    PathBuf::new(),
                    format!("{key:?} is not a path relative to the folder"),
                ));
            }
            let access = documents
                .load_access(&LoadAccess {
                    groups: rule.groups,
                    oids: rule.oids,
                    everyone: rule.everyone,
                })
                .map_err(|e| LoadError::ManifestRule(key.clone(), e))?;
            manifest.insert(normal, access);
        }
        Ok(Self { manifest })
    }

    /// Who may find the file at `source`, or why nobody was said.
    pub fn access_of(&self, source: &str, documents: &Documents) -> Result<AccessList, String> {
        let from_manifest = self
            .manifest
            .iter()
            .filter(|(key, _)| {
                if key.ends_with('/') {
                    source.starts_with(key.as_str())
                } else {
                    source == key.as_str()
                        || source
                            .strip_prefix(key.as_str())
                            .is_some_and(|rest| rest.starts_with('/'))
                }
            })
            .max_by_key(|(key, _)| key.len());
        if let Some((_, access)) = from_manifest {
            return Ok(access.clone());
        }
        let segments: Vec<&str> = source.split('/').collect();
        let access = match segments.as_slice() {
            ["public", _, ..] => LoadAccess {
                everyone: true,
                ..LoadAccess::default()
            },
            ["groups", group, _, ..] => LoadAccess {
                groups: vec![group.to_string()],
                ..LoadAccess::default()
            },
            ["users", oid, _, ..] => LoadAccess {
                oids: vec![oid.to_string()],
                ..LoadAccess::default()
            },
            _ => {
                return Err(
                    "no access rule: put it under public/, groups/<name>/ or users/<oid>/, or name it in the \
                     manifest"
                        .into(),
                );
            }
        };
        documents.load_access(&access).map_err(|e| e.to_string())
    }
}

/// The files of `folder`, as source paths (relative, `/`-separated), sorted. Hidden files and folders (a name
/// starting with `.`) and `skip` (the manifest, when it is inside) are left out; symbolic links to folders are not
/// followed.
pub fn files_of(folder: &Path, skip: Option<&Path>) -> Result<Vec<String>, LoadError> {
    let skip = skip.and_then(|p| p.canonicalize().ok());
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let dir = folder.join(&relative);
        let entries = std::fs::read_dir(&dir).map_err(|e| LoadError::Folder(dir.clone(), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| LoadError::Folder(dir.clone(), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let kind = entry
                .file_type()
                .map_err(|e| LoadError::Folder(entry.path(), e))?;
            let path = relative.join(&name);
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() || (kind.is_symlink() && entry.path().is_file()) {
                if skip.is_some() && entry.path().canonicalize().ok() == skip {
                    continue;
                }
                let source: Vec<String> = path
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                out.push(source.join("/"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// What became of one document.
#[derive(Debug, Clone)]
pub struct Line {
    pub source: String,
    /// The outcome, or why it failed (for a person).
    pub outcome: Result<LoadOutcome, String>,
    /// Its record as the load left it (none when it failed before one was made).
    pub record: Option<DocumentRecord>,
}

impl Line {
    /// As the command prints it: `added public/Handbook.md`, `failed notes.md: …`.
    pub fn text(&self) -> String {
        match &self.outcome {
            Ok(outcome) => {
                let status = self
                    .record
                    .as_ref()
                    .filter(|r| {
                        *outcome == LoadOutcome::Unchanged && r.status != DocumentStatus::Indexed
                    })
                    .map(|r| format!(" ({})", r.status.as_str()))
                    .unwrap_or_default();
                format!("{} {}{status}", outcome.as_str(), self.source)
            }
            Err(reason) => format!("failed {}: {reason}", self.source),
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub lines: Vec<Line>,
    /// With `--wait`: each ingested document's end (`indexed`, `failed: …`, or still unsettled when the wait ended).
    pub settled: Vec<(String, DocumentStatus, Option<String>)>,
    pub elapsed: Duration,
}

impl Report {
    pub fn count(&self, outcome: LoadOutcome) -> usize {
        self.lines
            .iter()
            .filter(|l| l.outcome.as_ref().ok() == Some(&outcome))
            .count()
    }

    /// Files that failed to load, and, with `--wait`, ingested documents that failed or did not settle in time.
    pub fn failed(&self) -> usize {
        self.lines.iter().filter(|l| l.outcome.is_err()).count()
            + self
                .settled
                .iter()
                .filter(|(_, status, _)| *status != DocumentStatus::Indexed)
                .count()
    }

    /// Documents handled (every outcome but a failure) per minute of the whole run, the wait included.
    pub fn per_minute(&self) -> f64 {
        let done = self.lines.iter().filter(|l| l.outcome.is_ok()).count();
        done as f64 * 60.0 / self.elapsed.as_secs_f64().max(0.001)
    }

    /// The last line the command prints.
    pub fn summary(&self) -> String {
        format!(
            "{} documents: {} added, {} updated, {} unchanged, {} deleted, {} failed; {:.1} s, {:.0} documents per minute",
            self.lines.len(),
            self.count(LoadOutcome::Added),
            self.count(LoadOutcome::Updated),
            self.count(LoadOutcome::Unchanged),
            self.count(LoadOutcome::Deleted),
            self.failed(),
            self.elapsed.as_secs_f64(),
            self.per_minute()
        )
    }
}

/// Loads the folder as `options` say, calling `print` with each line as it is known; the [`Report`] holds them
/// all. Only what keeps the load from starting is an error (an unreadable folder or manifest, the owner's records
/// unreadable); each file's failure is its line.
pub async fn run(
    documents: &Documents,
    options: &Options,
    mut print: impl FnMut(&str),
) -> Result<Report, LoadError> {
    let started = Instant::now();
    let rules = match &options.manifest {
        Some(path) => Rules::from_manifest(path, documents)?,
        None => Rules::default(),
    };
    let sources = files_of(&options.folder, options.manifest.as_deref())?;
    let existing = documents
        .loaded(&options.owner)
        .await
        .map_err(LoadError::Records)?;
    let present: HashSet<&str> = sources.iter().map(String::as_str).collect();
    let mut report = Report::default();

    let loads = futures_util::stream::iter(sources.iter().map(|source| {
        let existing = &existing;
        let rules = &rules;
        async move {
            let failed = |reason: String| Line {
                source: source.clone(),
                outcome: Err(reason),
                record: None,
            };
            let access = match rules.access_of(source, documents) {
                Ok(access) => access,
                Err(reason) => return failed(reason),
            };
            let bytes = match std::fs::read(options.folder.join(source)) {
                Ok(bytes) => Bytes::from(bytes),
                Err(e) => return failed(format!("it cannot be read: {e}")),
            };
            match documents
                .load(&options.owner, source, bytes, &access, existing.get(source))
                .await
            {
                Ok((outcome, record)) => Line {
                    source: source.clone(),
                    outcome: Ok(outcome),
                    record: Some(record),
                },
                Err(e) => failed(e.to_string()),
            }
        }
    }))
    .buffer_unordered(options.concurrency.clamp(1, MAX_CONCURRENCY));
    futures_util::pin_mut!(loads);
    while let Some(line) = loads.next().await {
        print(&line.text());
        report.lines.push(line);
    }

    if options.delete_missing {
        let mut gone: Vec<&DocumentRecord> = existing
            .iter()
            .filter(|(source, _)| !present.contains(source.as_str()))
            .map(|(_, record)| record)
            .collect();
        gone.sort_by(|a, b| a.source.cmp(&b.source));
        for record in gone {
            let source = record.source.clone().unwrap_or_default();
            let line = match documents.unload(record).await {
                Ok(()) => Line {
                    source,
                    outcome: Ok(LoadOutcome::Deleted),
                    record: Some(record.clone()),
                },
                Err(e) => Line {
                    source,
                    outcome: Err(format!("it could not be deleted: {e}")),
                    record: Some(record.clone()),
                },
            };
            print(&line.text());
            report.lines.push(line);
        }
    }

    if let Some(limit) = options.wait {
        report.settled = wait(documents, &report.lines, limit, &mut print).await;
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// Waits, at most `limit`, until each document added or updated is indexed or failed, printing each as it settles
/// (and those still unsettled when the time is up).
async fn wait(
    documents: &Documents,
    lines: &[Line],
    limit: Duration,
    print: &mut impl FnMut(&str),
) -> Vec<(String, DocumentStatus, Option<String>)> {
    let deadline = Instant::now() + limit;
    let mut waiting: Vec<DocumentRecord> = lines
        .iter()
        .filter(|l| matches!(l.outcome, Ok(LoadOutcome::Added | LoadOutcome::Updated)))
        .filter_map(|l| l.record.clone())
        .collect();
    let mut done = Vec::new();
    let mut last_error: HashMap<String, String> = HashMap::new();
    loop {
        let mut still = Vec::new();
        for mut batch in waiting.chunks(STATUS_BATCH).map(<[DocumentRecord]>::to_vec) {
            if let Err(e) = documents.refresh_statuses(&mut batch).await {
                // Asked again at the next round; said if the wait ends on it.
                for r in &batch {
                    last_error.insert(r.id.clone(), e.to_string());
                }
            }
            for record in batch {
                let source = record.source.clone().unwrap_or_default();
                match record.status {
                    DocumentStatus::Indexed => print(&format!("indexed {source}")),
                    DocumentStatus::Failed => print(&format!(
                        "failed {source}: {}",
                        record
                            .reason
                            .as_deref()
                            .unwrap_or("the knowledge base did not say why")
                    )),
                    _ => {
                        still.push(record);
                        continue;
                    }
                }
                done.push((source, record.status, record.reason));
            }
        }
        waiting = still;
        if waiting.is_empty() {
            return done;
        }
        if Instant::now() >= deadline {
            for record in waiting {
                let source = record.source.clone().unwrap_or_default();
                let why = match last_error.get(&record.id) {
                    Some(e) => {
                        format!("still {} when the wait ended ({e})", record.status.as_str())
                    }
                    None => format!("still {} when the wait ended", record.status.as_str()),
                };
                print(&format!("failed {source}: {why}"));
                done.push((source, record.status, Some(why)));
            }
            return done;
        }
        tokio::time::sleep(POLL).await;
    }
}
