//! Cutting `<<question>>` lines out of an answer, as a whole or while it streams, with the same result both ways.

/// Feeds on the answer's text as it arrives and gives back what may be shown at once. Text from the first `<<` on is
/// held back and parsed into questions; trailing white space is held until more text shows it is not the end, so
/// the shown answer never ends in the blank lines that precede the questions.
#[derive(Debug, Default)]
pub struct FollowupSplitter {
    /// Text received but not yet shown: trailing white space, or a lone `<` that may start `<<`.
    pending: String,
    /// Everything from the first `<<` on.
    questions: Option<String>,
}

impl FollowupSplitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes the next piece of the answer; returns the text that can be shown now (possibly empty).
    pub fn push(&mut self, piece: &str) -> String {
        if let Some(q) = &mut self.questions {
            q.push_str(piece);
            return String::new();
        }
        self.pending.push_str(piece);
        if let Some(at) = self.pending.find("<<") {
            let rest = self.pending.split_off(at);
            self.questions = Some(rest);
            let shown = self.pending.trim_end().to_string();
            self.pending.clear();
            return shown;
        }
        // Hold back a trailing '<' (it may be half of "<<") and trailing white space.
        let mut keep_from = self.pending.trim_end().len();
        if self.pending[..keep_from].ends_with('<') {
            keep_from = self.pending[..keep_from - 1].trim_end().len();
        }
        let held = self.pending.split_off(keep_from);
        std::mem::replace(&mut self.pending, held)
    }

    /// Ends the answer: the text still to show, and the questions found.
    pub fn finish(self) -> (String, Vec<String>) {
        let rest = self.pending.trim_end().to_string();
        let questions = self.questions.map(|q| parse(&q)).unwrap_or_default();
        (rest, questions)
    }

    /// Splits a whole answer at once.
    pub fn split(text: &str) -> (String, Vec<String>) {
        let mut splitter = Self::new();
        let mut shown = splitter.push(text);
        let (rest, questions) = splitter.finish();
        shown.push_str(&rest);
        (shown, questions)
    }
}

fn parse(text: &str) -> Vec<String> {
    let mut questions = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("<<") {
        let after = &rest[start + 2..];
        let (question, next) = match after.find(">>") {
            Some(end) => (&after[..end], &after[end + 2..]),
            // A last question cut short (e.g. by max_tokens) still counts, up to its line's end.
            None => (after.lines().next().unwrap_or(""), ""),
        };
        let question = question.trim();
        if !question.is_empty() {
            questions.push(question.to_string());
        }
        rest = next;
    }
    questions
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWER: &str = "The plan covers it [a.pdf].\n\n<<What is excluded?>>\n<<How do I claim?>>\n<<Which pharmacies?>>";

    #[test]
    fn splits_a_whole_answer() {
        let (text, qs) = FollowupSplitter::split(ANSWER);
        assert_eq!(text, "The plan covers it [a.pdf].");
        assert_eq!(
            qs,
            ["What is excluded?", "How do I claim?", "Which pharmacies?"]
        );
    }

    #[test]
    fn streaming_in_any_pieces_gives_the_same_result() {
        let whole = FollowupSplitter::split(ANSWER);
        for size in 1..ANSWER.len() {
            let mut s = FollowupSplitter::new();
            let mut shown = String::new();
            let chars: Vec<char> = ANSWER.chars().collect();
            for chunk in chars.chunks(size) {
                shown.push_str(&s.push(&chunk.iter().collect::<String>()));
            }
            let (rest, qs) = s.finish();
            shown.push_str(&rest);
            assert_eq!((shown, qs), whole, "pieces of {size}");
        }
    }

    #[test]
    fn text_before_the_questions_is_shown_at_once() {
        let mut s = FollowupSplitter::new();
        assert_eq!(s.push("Hello "), "Hello");
        assert_eq!(s.push("world"), " world");
        assert_eq!(s.push(" <"), "");
        assert_eq!(s.push("< q1 >>"), "");
        assert_eq!(s.finish(), (String::new(), vec!["q1".to_string()]));
    }

    #[test]
    fn a_single_angle_bracket_is_text() {
        let mut s = FollowupSplitter::new();
        assert_eq!(s.push("a <"), "a");
        assert_eq!(s.push(" b"), " < b");
        assert_eq!(s.finish(), (String::new(), vec![]));
    }

    #[test]
    fn an_unterminated_last_question_is_kept() {
        let (text, qs) = FollowupSplitter::split("Answer.\n<<One?>>\n<<Two");
        assert_eq!(text, "Answer.");
        assert_eq!(qs, ["One?", "Two"]);
    }
}
