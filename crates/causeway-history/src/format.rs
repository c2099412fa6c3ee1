//! The history format: JSON Lines, an optional `meta` line, one object per
//! finished transaction, then one `final` line per DC. Part of Causeway's
//! public interface; see `docs/HISTORY.md`.

// From the contract itself, not through `checker`, which depends on this module.
use causeway_protocol::Guarantee;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Write};
use thiserror::Error;

/// Outcome of a transaction, as its client learned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Committed,
    Aborted,
    /// The client does not know whether the transaction committed (its
    /// coordinator died mid-commit, or it gave up waiting for the answer):
    /// it may have. Its reads are what it observed; its writes may or may
    /// not have taken effect; it has no `commit_ts`.
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OpKind {
    #[serde(rename = "r")]
    Read,
    #[serde(rename = "w")]
    Write,
    /// A delete: a write that leaves the key without a value.
    #[serde(rename = "d")]
    Delete,
}

/// One read, write or delete, in program order. A read of a key with no
/// value (never written, or deleted) has `value: null`; a delete has none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub op: OpKind,
    pub key: String,
    /// Absent on a delete; `null` on a read that found no value.
    #[serde(default)]
    pub value: Option<String>,
}

impl Op {
    pub fn read(key: impl Into<String>, value: Option<String>) -> Self {
        Op { op: OpKind::Read, key: key.into(), value }
    }

    pub fn write(key: impl Into<String>, value: impl Into<String>) -> Self {
        Op { op: OpKind::Write, key: key.into(), value: Some(value.into()) }
    }

    pub fn delete(key: impl Into<String>) -> Self {
        Op { op: OpKind::Delete, key: key.into(), value: None }
    }
}

/// One element of a commit timestamp: a number or a string.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StampElem {
    Int(u64),
    Str(String),
}

impl PartialOrd for StampElem {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for StampElem {
    /// Numbers compare as numbers, strings as strings; a number sorts before
    /// a string (histories should not mix them at one position).
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (StampElem::Int(a), StampElem::Int(b)) => a.cmp(b),
            (StampElem::Str(a), StampElem::Str(b)) => a.cmp(b),
            (StampElem::Int(_), StampElem::Str(_)) => Ordering::Less,
            (StampElem::Str(_), StampElem::Int(_)) => Ordering::Greater,
        }
    }
}

impl fmt::Display for StampElem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StampElem::Int(n) => write!(f, "{n}"),
            StampElem::Str(s) => write!(f, "{s:?}"),
        }
    }
}

/// The last-writer-wins order of update transactions, compared element by
/// element (lexicographically).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommitTs(pub Vec<StampElem>);

impl fmt::Display for CommitTs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[")?;
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{e}")?;
        }
        write!(f, "]")
    }
}

/// A finished transaction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnRecord {
    pub txid: String,
    pub session: String,
    pub seq: u64,
    /// Informational; 0 when absent.
    #[serde(default)]
    pub dc: u16,
    pub status: Status,
    pub ops: Vec<Op>,
    /// Present on committed update transactions; absent on unknown ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_ts: Option<CommitTs>,
    /// Informational; 0 when absent.
    #[serde(default)]
    pub start_us: u64,
    #[serde(default)]
    pub end_us: u64,
}

/// The state of one DC after the run quiesced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalState {
    pub dc: u16,
    pub state: BTreeMap<String, String>,
    /// True when the DC holds only some partitions (partial replication), so
    /// a key it does not list is not a lost key.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub partial: bool,
}

#[derive(Serialize)]
struct FinalLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    state: &'a FinalState,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    pub txns: Vec<TxnRecord>,
    pub finals: Vec<FinalState>,
}

/// What a history file may say about itself on its `meta` line: the
/// protocol that ran, and the guarantee it promises — the model `causeway
/// check` judges the history against unless told otherwise.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryMeta {
    /// Informational, e.g. `"sdur"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Written `"eventual"`, `"tcc"` or `"serializable"`.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "guarantee_word")]
    pub guarantee: Option<Guarantee>,
}

/// The words the format uses for guarantees: the names of `causeway check
/// --model`.
pub mod guarantee_word {
    use super::*;

    /// Every guarantee with its word.
    pub const ALL: [(Guarantee, &str); 3] =
        [(Guarantee::Eventual, "eventual"), (Guarantee::Causal, "tcc"), (Guarantee::Serializable, "serializable")];

    /// The word for `guarantee`.
    pub fn of(guarantee: Guarantee) -> &'static str {
        ALL.iter().find(|(g, _)| *g == guarantee).expect("every guarantee has a word").1
    }

    /// The guarantee `word` names, if it names one.
    pub fn parse(word: &str) -> Option<Guarantee> {
        ALL.iter().find(|(_, w)| *w == word).map(|(g, _)| *g)
    }

    pub(super) fn serialize<S: Serializer>(guarantee: &Option<Guarantee>, s: S) -> Result<S::Ok, S::Error> {
        match guarantee {
            Some(g) => s.serialize_str(of(*g)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Guarantee>, D::Error> {
        let Some(word) = Option::<String>::deserialize(d)? else { return Ok(None) };
        parse(&word).map(Some).ok_or_else(|| {
            serde::de::Error::custom(format!("unknown guarantee {word:?}: expected eventual, tcc or serializable"))
        })
    }
}

/// A history file: its optional `meta` line and the history. (The meta is
/// kept apart from [`History`] so that code that builds histories field by
/// field is not broken by it.)
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistoryFile {
    pub meta: Option<HistoryMeta>,
    pub history: History,
}

#[derive(Serialize)]
struct MetaLine<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(flatten)]
    meta: &'a HistoryMeta,
}

#[derive(Debug, Error)]
pub enum ParseError {
    /// The I/O error is the source, not part of the text: a chain printer
    /// (`anyhow`'s `{:#}`) shows it once.
    #[error("cannot read the history")]
    Io(#[from] io::Error),
    #[error("line {line}: {message}")]
    Line { line: usize, message: String },
}

impl HistoryFile {
    /// Writes the file as JSON Lines: the meta line when there is one, then
    /// the history.
    pub fn write_jsonl(&self, w: impl Write) -> io::Result<()> {
        Self::write_parts(self.meta.as_ref(), &self.history, w)
    }

    /// Writes a file of `history` headed by `meta`, without making a
    /// `HistoryFile` of them (a history can be large).
    pub fn write_parts(meta: Option<&HistoryMeta>, history: &History, mut w: impl Write) -> io::Result<()> {
        if let Some(meta) = meta {
            serde_json::to_writer(&mut w, &MetaLine { kind: "meta", meta })?;
            w.write_all(b"\n")?;
        }
        history.write_jsonl(w)
    }

    pub fn to_jsonl_string(&self) -> String {
        let mut buf = Vec::new();
        self.write_jsonl(&mut buf).expect("writing to memory cannot fail");
        String::from_utf8(buf).expect("JSON is UTF-8")
    }

    /// Reads a history file. Blank lines are skipped; a `meta` line may come
    /// anywhere before the first transaction, once; any other line that is
    /// not a transaction or a `final` object is an error naming its line.
    pub fn read_jsonl(r: impl BufRead) -> Result<HistoryFile, ParseError> {
        let mut file = HistoryFile::default();
        let history = &mut file.history;
        let mut meta_line = 0;
        for (i, line) in r.lines().enumerate() {
            let line = line?;
            let lineno = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let value: serde_json::Value = serde_json::from_str(&line)
                .map_err(|e| ParseError::Line { line: lineno, message: format!("not JSON: {e}") })?;
            let kind = value.get("type").and_then(|t| t.as_str()).map(str::to_owned);
            match kind.as_deref() {
                Some("meta") => {
                    let message = if meta_line > 0 {
                        Some(format!("a second meta line; the first is line {meta_line}"))
                    } else if !history.txns.is_empty() {
                        Some("a meta line after the first transaction; it must come before them".to_string())
                    } else {
                        None
                    };
                    if let Some(message) = message {
                        return Err(ParseError::Line { line: lineno, message });
                    }
                    let meta: HistoryMeta = serde_json::from_value(value)
                        .map_err(|e| ParseError::Line { line: lineno, message: format!("bad meta line: {e}") })?;
                    file.meta = Some(meta);
                    meta_line = lineno;
                }
                Some("final") => {
                    let f: FinalState = serde_json::from_value(value)
                        .map_err(|e| ParseError::Line { line: lineno, message: format!("bad final line: {e}") })?;
                    history.finals.push(f);
                }
                None | Some("txn") => {
                    let t: TxnRecord = serde_json::from_value(value)
                        .map_err(|e| ParseError::Line { line: lineno, message: format!("bad transaction: {e}") })?;
                    history.txns.push(t);
                }
                Some(other) => {
                    return Err(ParseError::Line { line: lineno, message: format!("unknown line type {other:?}") })
                }
            }
        }
        Ok(file)
    }
}

impl History {
    /// Writes the history as JSON Lines: transactions, then finals (no meta
    /// line: see [`HistoryFile`]).
    pub fn write_jsonl(&self, mut w: impl Write) -> io::Result<()> {
        for t in &self.txns {
            serde_json::to_writer(&mut w, t)?;
            w.write_all(b"\n")?;
        }
        for f in &self.finals {
            serde_json::to_writer(&mut w, &FinalLine { kind: "final", state: f })?;
            w.write_all(b"\n")?;
        }
        Ok(())
    }

    pub fn to_jsonl_string(&self) -> String {
        let mut buf = Vec::new();
        self.write_jsonl(&mut buf).expect("writing to memory cannot fail");
        String::from_utf8(buf).expect("JSON is UTF-8")
    }

    /// Reads a history, as [`HistoryFile::read_jsonl`] does, and drops its
    /// meta line if it has one.
    pub fn read_jsonl(r: impl BufRead) -> Result<History, ParseError> {
        HistoryFile::read_jsonl(r).map(|file| file.history)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn design_example_round_trips() {
        let line = r#"{"txid": "dc0-c3-17", "session": "dc0-c3", "seq": 17, "dc": 0,
 "status": "committed",
 "ops": [{"op": "r", "key": "k12", "value": "dc0-c1-4:k12"},
         {"op": "r", "key": "k40", "value": null},
         {"op": "w", "key": "k12", "value": "dc0-c3-17:k12"}],
 "commit_ts": [172633, 0, "dc0-c3-17"],
 "start_us": 1200, "end_us": 1790}"#
            .replace('\n', " ");
        let text = format!("{line}\n{{\"type\": \"final\", \"dc\": 0, \"state\": {{\"k12\": \"dc0-c3-17:k12\"}}}}\n");
        let h = History::read_jsonl(text.as_bytes()).unwrap();
        assert_eq!(h.txns.len(), 1);
        assert_eq!(h.finals.len(), 1);
        let t = &h.txns[0];
        assert_eq!(t.ops[1], Op::read("k40", None));
        assert_eq!(
            t.commit_ts,
            Some(CommitTs(vec![StampElem::Int(172633), StampElem::Int(0), StampElem::Str("dc0-c3-17".into())]))
        );
        let again = History::read_jsonl(h.to_jsonl_string().as_bytes()).unwrap();
        assert_eq!(again, h);
        assert!(h.to_jsonl_string().contains(r#"{"type":"final","dc":0,"state":{"k12":"dc0-c3-17:k12"}}"#));
    }

    #[test]
    fn statuses_are_lowercase_words() {
        for (status, word) in
            [(Status::Committed, "committed"), (Status::Aborted, "aborted"), (Status::Unknown, "unknown")]
        {
            assert_eq!(serde_json::to_string(&status).unwrap(), format!("{word:?}"));
            assert_eq!(serde_json::from_str::<Status>(&format!("{word:?}")).unwrap(), status);
        }
    }

    #[test]
    fn commit_ts_compares_element_by_element() {
        let a = CommitTs(vec![StampElem::Int(10), StampElem::Int(1)]);
        let b = CommitTs(vec![StampElem::Int(10), StampElem::Int(2)]);
        let c = CommitTs(vec![StampElem::Int(9), StampElem::Int(5)]);
        assert!(c < a && a < b);
    }

    #[test]
    fn a_meta_line_round_trips_and_is_optional() {
        let txn = r#"{"txid":"a","session":"s","seq":1,"status":"committed","ops":[]}"#;
        let text =
            format!("\n{{\"type\": \"meta\", \"protocol\": \"sdur\", \"guarantee\": \"serializable\"}}\n{txn}\n");
        let file = HistoryFile::read_jsonl(text.as_bytes()).unwrap();
        let meta = HistoryMeta { protocol: Some("sdur".into()), guarantee: Some(Guarantee::Serializable) };
        assert_eq!(file.meta.as_ref(), Some(&meta));
        assert_eq!(file.history.txns.len(), 1);
        let written = file.to_jsonl_string();
        assert!(written.starts_with(r#"{"type":"meta","protocol":"sdur","guarantee":"serializable"}"#), "{written}");
        assert_eq!(HistoryFile::read_jsonl(written.as_bytes()).unwrap(), file);
        // A reader of plain histories skips it; a history without one reads
        // as before, and writes none.
        assert_eq!(History::read_jsonl(text.as_bytes()).unwrap(), file.history);
        let plain = HistoryFile::read_jsonl(file.history.to_jsonl_string().as_bytes()).unwrap();
        assert_eq!(plain, HistoryFile { meta: None, history: file.history.clone() });
        assert_eq!(plain.to_jsonl_string(), file.history.to_jsonl_string());
        // Every word, and a meta line that names no guarantee.
        for (g, word) in guarantee_word::ALL {
            let line = format!("{{\"type\":\"meta\",\"guarantee\":\"{word}\"}}\n");
            assert_eq!(HistoryFile::read_jsonl(line.as_bytes()).unwrap().meta.unwrap().guarantee, Some(g));
        }
        let bare = HistoryFile::read_jsonl(r#"{"type":"meta"}"#.as_bytes()).unwrap();
        assert_eq!(bare.meta, Some(HistoryMeta::default()));
    }

    #[test]
    fn a_misplaced_second_or_bad_meta_line_names_its_line() {
        let meta = r#"{"type":"meta","guarantee":"tcc"}"#;
        let txn = r#"{"txid":"a","session":"s","seq":1,"status":"committed","ops":[]}"#;
        let err = HistoryFile::read_jsonl(format!("{meta}\n\n{meta}\n").as_bytes()).unwrap_err();
        assert_eq!(err.to_string(), "line 3: a second meta line; the first is line 1");
        let err = HistoryFile::read_jsonl(format!("{txn}\n{meta}\n").as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("line 2: a meta line after the first transaction"), "{err}");
        let err = History::read_jsonl(r#"{"type":"meta","guarantee":"snapshot"}"#.as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("line 1: bad meta line: unknown guarantee \"snapshot\""), "{err}");
    }

    #[test]
    fn errors_name_the_line() {
        let err = History::read_jsonl("\n{\"txid\": 3}\n".as_bytes()).unwrap_err();
        assert!(err.to_string().starts_with("line 2:"), "{err}");
        let err = History::read_jsonl("{nope\n".as_bytes()).unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
    }
}
