//! Whose log a directory holds: the `IDENTITY` file.
//!
//! ```text
//! causeway-storage
//! format: 2
//! cluster: <cluster name>
//! node: <node name>
//! ```
//!
//! A replica that opened another node's directory (a wrong path in a
//! config, a disk moved between machines) would replay records that are not
//! its own; the identity file makes that an error at `open`.

use crate::format::FORMAT_VERSION;

/// The name of the identity file in a log directory.
pub const IDENTITY_FILE: &str = "IDENTITY";

const FIRST_LINE: &str = "causeway-storage";

/// The cluster and node a log belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub cluster: String,
    pub node: String,
}

impl Identity {
    pub fn new(cluster: impl Into<String>, node: impl Into<String>) -> Identity {
        Identity { cluster: cluster.into(), node: node.into() }
    }

    /// Whether the names can be written and read back unchanged.
    pub(crate) fn validate(&self) -> Result<(), String> {
        for (what, name) in [("cluster", &self.cluster), ("node", &self.node)] {
            if name.is_empty() || name.chars().any(char::is_control) || name.trim() != name {
                return Err(format!(
                    "{what} name {name:?} must be non-empty, without control characters or surrounding spaces"
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn render(&self) -> String {
        format!("{FIRST_LINE}\nformat: {FORMAT_VERSION}\ncluster: {}\nnode: {}\n", self.cluster, self.node)
    }
}

pub(crate) fn parse(bytes: &[u8]) -> Result<Identity, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "identity file is not UTF-8".to_string())?;
    let mut lines = text.lines();
    if lines.next() != Some(FIRST_LINE) {
        return Err(format!("not a causeway-storage identity file (first line is not {FIRST_LINE:?})"));
    }
    let mut field = |key: &str| -> Result<String, String> {
        lines
            .next()
            .and_then(|l| l.strip_prefix(key))
            .and_then(|l| l.strip_prefix(": "))
            .map(str::to_string)
            .ok_or_else(|| format!("identity file lacks its {key:?} line"))
    };
    let format = field("format")?;
    if format != FORMAT_VERSION.to_string() {
        return Err(format!("log format version {format}, this build reads {FORMAT_VERSION}"));
    }
    let cluster = field("cluster")?;
    let node = field("node")?;
    Ok(Identity { cluster, node })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_reads_back() {
        let id = Identity::new("prod-eu", "node-3");
        assert_eq!(parse(id.render().as_bytes()), Ok(id));
    }

    #[test]
    fn a_damaged_or_foreign_identity_file_is_refused_with_its_reason() {
        for (bytes, needle) in [
            (&b"\xff\xfe"[..], "UTF-8"),
            (b"hello\n", "not a causeway-storage identity"),
            (b"causeway-storage\nformat: 1\ncluster: a\nnode: b\n", "format version 1"),
            (b"causeway-storage\nformat: 2\ncluster: a\n", "\"node\""),
            (b"", "not a causeway-storage identity"),
        ] {
            let err = parse(bytes).unwrap_err();
            assert!(err.contains(needle), "{err}");
        }
    }

    #[test]
    fn names_that_would_not_read_back_are_refused() {
        for (cluster, node) in [("", "n"), ("c", "a\nb"), ("c", " n")] {
            assert!(Identity::new(cluster, node).validate().is_err(), "{cluster:?} {node:?}");
        }
    }
}
