//! Tidy checks of the whole workspace, run as ordinary tests: the layering
//! a reviewer would otherwise have to remember.
//!
//! * **Crates point down.** Each crate may depend only on the crates of the
//!   layers below it (`LAYERS`); a new crate must be given its place.
//! * **The protocol core does no I/O.** Its dependencies, and theirs, are
//!   pure: no tokio, no sockets, no files (`PURE`); its code names no
//!   clock, thread, socket, file or random source.
//! * **Modules point down.** Inside a crate, sibling modules never import
//!   each other in a circle. Every `use` tree and every `crate::`/`super::`
//!   path is parsed (with `syn`), lifted to the siblings under the nearest
//!   common parent, and the graph of each parent's children must be
//!   acyclic. A parent re-exporting its children, and a child using its
//!   parent, are the nesting itself, not edges; but a name the parent
//!   re-exports leads to the sibling it comes from.
//! * **The map is whole.** `docs/ARCHITECTURE.md` names every crate.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Each workspace crate and the workspace crates it may depend on.
const LAYERS: &[(&str, &[&str])] = &[
    ("causeway-protocol", &[]),
    ("causeway-transport", &[]),
    ("causeway-storage", &[]),
    ("causeway-history", &["causeway-protocol"]),
    ("causeway-workload", &["causeway-protocol"]),
    ("causeway-wire", &["causeway-protocol"]),
    ("causeway-client", &["causeway-wire"]),
    ("causeway-sim", &["causeway-protocol", "causeway-history", "causeway-workload"]),
    (
        "causeway-runtime",
        &["causeway-protocol", "causeway-wire", "causeway-transport", "causeway-storage", "causeway-workload"],
    ),
    ("causeway-load", &["causeway-client", "causeway-history", "causeway-protocol", "causeway-workload"]),
    (
        "causeway-bench",
        &[
            "causeway-client",
            "causeway-wire",
            "causeway-history",
            "causeway-load",
            "causeway-protocol",
            "causeway-runtime",
            "causeway-workload",
        ],
    ),
    (
        "causeway",
        &[
            "causeway-protocol",
            "causeway-history",
            "causeway-sim",
            "causeway-runtime",
            "causeway-client",
            "causeway-wire",
            "causeway-load",
            "causeway-bench",
            "causeway-workload",
        ],
    ),
];

/// The crates that must stay pure (no I/O, no clock, no threads), and every
/// dependency they may have.
const PURE: &[(&str, &[&str])] = &[
    // postcard: the encoded size of the groups a replica keeps for its
    // peers, which bounds them in memory (pure: no I/O, no allocation).
    ("causeway-protocol", &["bytes", "serde", "postcard", "rustc-hash", "thiserror"]),
    ("causeway-history", &["causeway-protocol", "serde", "serde_json", "rustc-hash", "thiserror"]),
];

/// The names in a manifest's `[dependencies]` (not dev or build).
fn dependencies(krate: &str) -> BTreeSet<String> {
    let path = crates_dir().join(krate).join("Cargo.toml");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let manifest: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    manifest.get("dependencies").and_then(|d| d.as_table()).map(|d| d.keys().cloned().collect()).unwrap_or_default()
}

fn workspace_crates() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(crates_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let layers: BTreeMap<&str, &[&str]> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    for krate in workspace_crates() {
        let Some(allowed) = layers.get(krate.as_str()) else {
            problems.push(format!("{krate} has no place in LAYERS (tests/binary/tidy.rs): give it one"));
            continue;
        };
        for dep in dependencies(&krate).into_iter().filter(|d| d.starts_with("causeway")) {
            if !allowed.contains(&dep.as_str()) {
                problems.push(format!("{krate} depends on {dep}, which is not below it"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_protocol_core_depends_on_nothing_that_does_io() {
    let mut problems = Vec::new();
    for (krate, allowed) in PURE {
        for dep in dependencies(krate) {
            if !allowed.contains(&dep.as_str()) {
                problems.push(format!("{krate} depends on {dep}: the pure crates take no new dependency unchecked"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A module of a crate, by its path from the crate root.
type ModPath = Vec<String>;

/// Collects the paths a file refers to through `crate::`, `super::` and
/// `self::`, each from the inline module it appears in.
struct Refs {
    /// The module being visited (the file's, then inline modules inside).
    at: ModPath,
    /// Inline modules seen.
    inline: Vec<ModPath>,
    /// (from module, absolute path referred to).
    refs: Vec<(ModPath, Vec<String>)>,
    /// `pub use` re-exports: (module, name it exports) → the absolute path
    /// it stands for, so `use super::X` of a re-exported sibling's item
    /// counts as an edge to that sibling.
    reexports: BTreeMap<(ModPath, String), Vec<String>>,
    /// Set while visiting a `pub use` item.
    in_pub_use: bool,
}

impl Refs {
    /// The absolute form of a path that starts at `crate`, `super` or
    /// `self`; `None` for a path into another crate.
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let mut base = self.at.clone();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn note(&mut self, segments: Vec<String>) {
        if let Some(abs) = self.absolute(&segments) {
            self.refs.push((self.at.clone(), abs));
        }
    }

    /// A name a `pub use` makes this module export, and what it stands for.
    /// A path that does not start at `crate`, `self` or `super` starts at
    /// this module (a child's item); if it names another crate instead, it
    /// leads to no module here and changes nothing.
    fn export(&mut self, name: String, segments: &[String]) {
        if !self.in_pub_use {
            return;
        }
        let abs = self.absolute(segments).unwrap_or_else(|| {
            let mut path = self.at.clone();
            path.extend(segments.iter().cloned());
            path
        });
        self.reexports.insert((self.at.clone(), name), abs);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut full = prefix.clone();
                full.push(n.ident.to_string());
                self.export(n.ident.to_string(), &full);
                self.note(full);
            }
            syn::UseTree::Rename(r) => {
                let mut full = prefix.clone();
                full.push(r.ident.to_string());
                self.export(r.rename.to_string(), &full);
                self.note(full);
            }
            syn::UseTree::Glob(_) => self.note(prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Refs {
    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.in_pub_use = !matches!(item.vis, syn::Visibility::Inherited);
        self.use_tree(&mut Vec::new(), &item.tree);
        self.in_pub_use = false;
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.note(segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.at.push(item.ident.to_string());
            self.inline.push(self.at.clone());
            syn::visit::visit_item_mod(self, item);
            self.at.pop();
        }
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module a source file is, from the crate root.
fn module_of(src: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().unwrap();
    match last.as_str() {
        "lib.rs" | "main.rs" | "mod.rs" => {}
        name => parts.push(name.trim_end_matches(".rs").to_string()),
    }
    parts
}

/// The circles among sibling modules of one crate, each as `parent: a → b → a`.
fn module_cycles(krate: &str) -> Vec<String> {
    cycles_in(krate, &crates_dir().join(krate).join("src"))
}

/// [`module_cycles`] of the crate whose sources are under `src`.
fn cycles_in(krate: &str, src: &Path) -> Vec<String> {
    let src = src.to_path_buf();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules: BTreeSet<ModPath> = BTreeSet::new();
    let mut refs = Vec::new();
    let mut reexports = BTreeMap::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let at = module_of(&src, file);
        modules.insert(at.clone());
        let mut visitor =
            Refs { at, inline: Vec::new(), refs: Vec::new(), reexports: BTreeMap::new(), in_pub_use: false };
        visitor.visit_file(&ast);
        modules.extend(visitor.inline);
        refs.extend(visitor.refs);
        reexports.extend(visitor.reexports);
    }
    // Sibling edges under each parent.
    let mut edges: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, mut path) in refs {
        // A name a module re-exports stands for what it re-exports (a few
        // hops at most: re-exports of re-exports).
        for _ in 0..4 {
            let hop = (1..=path.len()).rev().find_map(|n| {
                let (module, name) = (path[..n - 1].to_vec(), path[n - 1].clone());
                reexports.get(&(module, name)).map(|target: &Vec<String>| (n, target.clone()))
            });
            match hop {
                Some((n, mut target)) if target != path[..n] => {
                    target.extend(path[n..].iter().cloned());
                    path = target;
                }
                _ => break,
            }
        }
        // The module the path names: its longest prefix that is a module.
        let Some(to) = (0..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p)) else {
            continue;
        };
        if to.starts_with(&from) || from.starts_with(&to) {
            continue; // nesting, not a dependency between siblings
        }
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        let (a, b) = (from[common].clone(), to[common].clone());
        edges.entry(from[..common].to_vec()).or_default().entry(a).or_default().insert(b);
    }
    let mut cycles = Vec::new();
    for (parent, graph) in &edges {
        let where_ = if parent.is_empty() { krate.to_string() } else { format!("{krate}::{}", parent.join("::")) };
        for cycle in find_cycles(graph) {
            cycles.push(format!("{where_}: {}", cycle.join(" → ")));
        }
    }
    cycles
}

/// One cycle per strongly connected group of the graph, as a closed walk.
fn find_cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    fn walk(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut Vec<Vec<String>>,
    ) {
        if let Some(i) = stack.iter().position(|n| n == node) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(node.to_string());
            found.push(cycle);
            return;
        }
        if done.contains(node) {
            return;
        }
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            walk(next, graph, stack, done, found);
        }
        stack.pop();
        done.insert(node.to_string());
    }
    let (mut done, mut found) = (BTreeSet::new(), Vec::new());
    for node in graph.keys() {
        walk(node, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn no_two_modules_of_a_crate_import_each_other_in_a_circle() {
    let cycles: Vec<String> = workspace_crates().iter().flat_map(|k| module_cycles(k)).collect();
    assert!(cycles.is_empty(), "modules that import each other in a circle:\n{}", cycles.join("\n"));
}

/// The checker of the check: a circle it must see, and nesting it must not
/// take for one.
#[test]
fn the_cycle_finder_sees_a_circle_and_ignores_nesting() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), BTreeSet::from(["b".to_string()])),
        ("b".to_string(), BTreeSet::from(["c".to_string()])),
        ("c".to_string(), BTreeSet::from(["a".to_string()])),
        ("d".to_string(), BTreeSet::from(["a".to_string()])),
    ]
    .into_iter()
    .collect();
    assert_eq!(find_cycles(&graph), vec![vec!["a", "b", "c", "a"]]);
    let acyclic: BTreeMap<String, BTreeSet<String>> =
        [("a".to_string(), BTreeSet::from(["b".to_string()]))].into_iter().collect();
    assert!(find_cycles(&acyclic).is_empty());

    let refs = Refs {
        at: vec!["wren".into(), "replica".into()],
        inline: Vec::new(),
        refs: Vec::new(),
        reexports: BTreeMap::new(),
        in_pub_use: false,
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    assert_eq!(refs.absolute(&s(&["super", "messages", "X"])), Some(s(&["wren", "messages", "X"])));
    assert_eq!(refs.absolute(&s(&["crate", "twopc", "Y"])), Some(s(&["twopc", "Y"])));
    assert_eq!(refs.absolute(&s(&["std", "sync"])), None);
}

/// The whole pass on a crate written for the purpose: a circle through a
/// parent's re-export is seen, nesting is not taken for one.
#[test]
fn module_cycles_are_found_through_re_exports_and_not_in_nesting() {
    let dir = std::env::temp_dir().join(format!("causeway-tidy-{}", std::process::id()));
    let write = |path: &str, text: &str| {
        let file = dir.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, text).unwrap();
    };
    write("src/lib.rs", "pub mod a;\npub mod b;\npub mod nest;\n");
    write("src/a.rs", "use crate::b::Thing;\npub struct Other;\n");
    write("src/b.rs", "pub struct Thing;\n");
    write("src/nest/mod.rs", "mod x;\nmod y;\npub use y::Exported;\nuse self::x::Inner;\n");
    write("src/nest/x.rs", "pub struct Inner;\nuse super::super::nest::Exported;\n");
    write("src/nest/y.rs", "pub struct Exported;\n");
    assert!(cycles_in("sample", &dir.join("src")).is_empty(), "a → b, nest → x, x → y through nest's re-export");
    // b uses a: a circle between siblings.
    write("src/b.rs", "pub struct Thing;\nuse super::a::Other;\n");
    assert_eq!(cycles_in("sample", &dir.join("src")), vec!["sample: a → b → a"]);
    // y uses x, which reaches y only through nest's re-export.
    write("src/b.rs", "pub struct Thing;\n");
    write("src/nest/y.rs", "pub struct Exported;\nuse super::x::Inner;\n");
    assert_eq!(cycles_in("sample", &dir.join("src")), vec!["sample::nest: x → y → x"]);
    let _ = fs::remove_dir_all(&dir);
}

/// The protocol core is sans-IO and deterministic: no clocks, threads,
/// sockets, files, random sources, or randomly seeded hash maps.
#[test]
fn protocol_core_does_no_io_and_reads_no_clock() {
    let forbidden = [
        "std::time",
        "SystemTime",
        "Instant::",
        "std::thread",
        "std::net",
        "std::fs",
        "tokio",
        "rand::",
        "thread_rng",
        "std::collections::HashMap",
        "std::collections::HashSet",
        "RandomState",
        "println!",
    ];
    let mut files = Vec::new();
    rust_files(&crates_dir().join("causeway-protocol/src"), &mut files);
    assert!(files.len() > 5);
    let mut offences = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for f in forbidden {
                if code.contains(f) {
                    offences.push(format!("{}:{}: {f}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(offences.is_empty(), "the protocol core must stay sans-IO and deterministic:\n{}", offences.join("\n"));
}

/// docs/ARCHITECTURE.md is the map of the code: every crate is on it.
#[test]
fn architecture_doc_names_every_crate() {
    let root = crates_dir().join("..");
    let doc = fs::read_to_string(root.join("docs/ARCHITECTURE.md")).expect("docs/ARCHITECTURE.md exists");
    for entry in fs::read_dir(root.join("crates")).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(doc.contains(&format!("crates/{name}")), "docs/ARCHITECTURE.md does not mention crates/{name}");
    }
}
