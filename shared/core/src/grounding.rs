//! What a turn is grounded in (the passages its search found), below both the search that finds them and the prompt
//! and answer that carry them: their names, what an answer cites of them, and their text on one line.

use crate::{DataPoints, Passage};

/// What a turn is grounded in: the passages found, best first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Grounding {
    pub passages: Vec<Passage>,
}

impl Grounding {
    /// The passages as `context.data_points` carries them.
    pub fn data_points(&self) -> DataPoints {
        DataPoints {
            text: self
                .passages
                .iter()
                .map(|p| format!("{}: {}", p.citation(), one_line(&p.text)))
                .collect(),
            citations: self.citation_names(),
        }
    }

    /// Each passage's citation name, in order, without repeats.
    pub fn citation_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for p in &self.passages {
            let name = p.citation();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// The passages' names that `answer` cites in square brackets, in the order first cited.
    pub fn cited_in(&self, answer: &str) -> Vec<String> {
        let mut cited: Vec<(usize, String)> = self
            .citation_names()
            .into_iter()
            .filter_map(|name| answer.find(&format!("[{name}]")).map(|at| (at, name)))
            .collect();
        cited.sort();
        cited.into_iter().map(|(_, name)| name).collect()
    }
}

/// A passage's text on one line, as the prompt and the data points list it.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}
