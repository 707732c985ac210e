//! Layers point down (docs/ARCHITECTURE.md, "Layers"): a top-level module of `src/` imports only
//! modules on a floor below its own, so the modules form no import cycle, and the few imports that
//! run upward are listed here and in the code map, each with its reason.
//!
//! The check reads the source with std only: every `use crate::…` (grouped trees included) and
//! every `crate::…` path in code, outside comments, strings and `#[cfg(test)]` modules (a test
//! may reach any module). Files of one module are checked the same way (with `super::` and
//! `self::` paths) for cycles between them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The floors, lowest first. A module imports only modules on lower floors; modules on one floor
/// do not import each other. Mirrored in docs/ARCHITECTURE.md ("Layers").
const FLOORS: &[&[&str]] = &[
    &[
        "ids",
        "clock",
        "observability",
        "metrics",
        "channel",
        "fence",
        "escalation",
        "config",
        "search",
    ],
    &["store", "manychat", "model", "burst", "words", "knowledge"],
    &["actions", "handoff", "tokens", "media", "retention"],
    &["agent", "sales", "plugins"],
    &["tools", "outbox"],
    &["evals"],
    &["learning"],
    &["turn", "report"],
    &["nudge", "http"],
    &["console"],
    &["settings"],
    &["startup"],
    &["cli"],
];

/// The imports allowed to run upward: (importing module, imported path, why). At most ten, each
/// named in docs/ARCHITECTURE.md. An import matches when its path starts with the listed one.
const UPWARD: &[(&str, &str, &str)] = &[];

/// The most imports allowed to run upward.
const UPWARD_CAP: usize = 10;

#[test]
fn layers_top_level_modules_form_no_import_cycle() {
    let tree = Tree::read();
    let graph = tree.module_graph();
    let cycles: Vec<_> = strongly_connected(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    let described: Vec<String> = cycles
        .iter()
        .map(|cycle| {
            let inside: Vec<String> = tree
                .imports
                .iter()
                .filter(|i| cycle.contains(&i.from_module) && cycle.contains(&i.to_module()))
                .filter(|i| i.from_module != i.to_module())
                .map(|i| format!("{} -> crate::{}", i.file, i.path))
                .collect();
            format!("{cycle:?} through {} imports: {inside:#?}", inside.len())
        })
        .collect();
    assert!(
        cycles.is_empty(),
        "top-level modules import each other in a cycle: {described:#?}"
    );
}

#[test]
fn layers_top_level_modules_import_only_modules_below_them() {
    let tree = Tree::read();
    let floor_of = floor_of();
    let modules = tree.top_level_modules();
    let unplaced: Vec<_> = modules
        .iter()
        .filter(|m| !floor_of.contains_key(m.as_str()))
        .collect();
    assert!(unplaced.is_empty(), "modules on no floor: {unplaced:?}");
    let gone: Vec<_> = floor_of.keys().filter(|m| !modules.contains(**m)).collect();
    assert!(gone.is_empty(), "floors name modules src/ lacks: {gone:?}");
    assert!(
        UPWARD.len() <= UPWARD_CAP,
        "at most {UPWARD_CAP} upward imports"
    );

    let mut upward = Vec::new();
    let mut used = BTreeSet::new();
    for import in &tree.imports {
        let to = import.to_module();
        if to == import.from_module || !floor_of.contains_key(to.as_str()) {
            continue;
        }
        if floor_of[to.as_str()] < floor_of[import.from_module.as_str()] {
            continue;
        }
        match UPWARD
            .iter()
            .position(|(from, path, _)| *from == import.from_module && is_under(&import.path, path))
        {
            Some(listed) => {
                used.insert(listed);
            }
            None => upward.push(format!(
                "{} (floor {}) -> crate::{} (floor {})",
                import.file,
                floor_of[import.from_module.as_str()],
                import.path,
                floor_of[to.as_str()]
            )),
        }
    }
    assert!(
        upward.is_empty(),
        "imports that run upward or sideways (move the shared type down, or pass the value as \
         data): {upward:#?}"
    );
    let stale: Vec<_> = (0..UPWARD.len())
        .filter(|i| !used.contains(i))
        .map(|i| UPWARD[i])
        .collect();
    assert!(
        stale.is_empty(),
        "listed upward imports no longer made: {stale:?}"
    );
}

#[test]
fn layers_architecture_doc_lists_the_floors_and_the_upward_imports() {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    for (number, floor) in FLOORS.iter().enumerate() {
        let line = doc
            .lines()
            .find(|l| l.starts_with(&format!("| {number} |")))
            .unwrap_or_else(|| panic!("docs/ARCHITECTURE.md has no line for floor {number}"));
        for module in *floor {
            assert!(
                line.contains(&format!("`{module}`")),
                "docs/ARCHITECTURE.md's floor {number} lacks `{module}`"
            );
        }
    }
    for (from, path, _) in UPWARD {
        let named = format!("`{from}` → `{path}`");
        assert!(
            doc.contains(&named),
            "docs/ARCHITECTURE.md does not name the upward import {named}"
        );
    }
}

#[test]
fn layers_files_of_a_module_import_each_other_without_cycles() {
    let tree = Tree::read();
    let cycles: Vec<_> = strongly_connected(&tree.file_graph())
        .into_iter()
        .filter(|c| c.len() > 1)
        .collect();
    assert!(
        cycles.is_empty(),
        "files that import each other in a cycle (move the shared item to the file that owns \
         its question): {cycles:#?}"
    );
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn floor_of() -> BTreeMap<&'static str, usize> {
    let mut floors = BTreeMap::new();
    for (number, floor) in FLOORS.iter().enumerate() {
        for module in *floor {
            assert!(
                floors.insert(*module, number).is_none(),
                "{module} is on two floors"
            );
        }
    }
    floors
}

fn is_under(path: &str, prefix: &str) -> bool {
    path == prefix || path.starts_with(&format!("{prefix}::"))
}

/// One `crate::` (or `super::`/`self::`) path named in a file.
struct Import {
    /// The file, relative to `src/`.
    file: String,
    /// The file's top-level module.
    from_module: String,
    /// The path below `crate::`, resolved for `super::` and `self::`.
    path: String,
}

impl Import {
    fn to_module(&self) -> String {
        self.path.split("::").next().unwrap_or_default().to_owned()
    }
}

struct Tree {
    /// Each non-test file of `src/` (relative path) and its module path.
    files: BTreeMap<String, Vec<String>>,
    imports: Vec<Import>,
}

impl Tree {
    fn read() -> Tree {
        let src = root().join("src");
        let mut texts = BTreeMap::new();
        read_dir(&src, &src, &mut texts);
        let mut tests = BTreeSet::new();
        for (file, text) in &texts {
            for name in test_module_files(&strip_comments_and_strings(text)) {
                let base = module_dir(file);
                tests.insert(format!("{base}{name}.rs"));
                tests.insert(format!("{base}{name}/"));
            }
        }
        let is_test = |file: &str| {
            tests
                .iter()
                .any(|t| file == t || (t.ends_with('/') && file.starts_with(t.as_str())))
        };
        let mut files = BTreeMap::new();
        let mut imports = Vec::new();
        for (file, text) in &texts {
            if is_test(file) {
                continue;
            }
            let module = module_path(file);
            files.insert(file.clone(), module.clone());
            if module.is_empty() {
                continue; // lib.rs and main.rs sit above every module
            }
            let code = drop_test_blocks(&strip_comments_and_strings(text));
            for (root, path) in paths(&code) {
                let mut base: Vec<String> = if root == "crate" {
                    Vec::new()
                } else {
                    module.clone()
                };
                for _ in root.split("::").filter(|p| *p == "super") {
                    base.pop();
                }
                let full: Vec<String> = base
                    .into_iter()
                    .chain(path.split("::").map(str::to_owned))
                    .collect();
                imports.push(Import {
                    file: file.clone(),
                    from_module: module[0].clone(),
                    path: full.join("::"),
                });
            }
        }
        Tree { files, imports }
    }

    fn top_level_modules(&self) -> BTreeSet<String> {
        self.files
            .values()
            .filter_map(|m| m.first().cloned())
            .collect()
    }

    fn module_graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let modules = self.top_level_modules();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for import in &self.imports {
            let to = import.to_module();
            if to != import.from_module && modules.contains(&to) {
                graph
                    .entry(import.from_module.clone())
                    .or_default()
                    .insert(to);
            }
        }
        graph
    }

    /// Files and the files they import from (the deepest file an imported path names).
    fn file_graph(&self) -> BTreeMap<String, BTreeSet<String>> {
        let by_module: BTreeMap<&[String], &String> = self
            .files
            .iter()
            .map(|(file, module)| (module.as_slice(), file))
            .collect();
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for import in &self.imports {
            let parts: Vec<String> = import.path.split("::").map(str::to_owned).collect();
            let target = (1..=parts.len())
                .rev()
                .find_map(|n| by_module.get(&parts[..n]));
            if let Some(target) = target
                && **target != import.file
            {
                graph
                    .entry(import.file.clone())
                    .or_default()
                    .insert((*target).clone());
            }
        }
        graph
    }
}

fn read_dir(dir: &Path, src: &Path, texts: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_dir(&path, src, texts);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let relative = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            texts.insert(relative, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// `agent/mod.rs` → `[agent]`, `agent/prompt.rs` → `[agent, prompt]`, `lib.rs` → `[]`.
fn module_path(file: &str) -> Vec<String> {
    let stem = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if parts.last().is_some_and(|p| p == "mod") || stem == "lib" || stem == "main" {
        parts.pop();
    }
    parts
}

/// Where a file's child modules live: `agent/mod.rs` → `agent/`, `agent/prompt.rs` →
/// `agent/prompt/`, `lib.rs` → ``.
fn module_dir(file: &str) -> String {
    match file.rsplit_once('/') {
        Some((dir, "mod.rs")) => format!("{dir}/"),
        _ if file == "lib.rs" || file == "main.rs" => String::new(),
        _ => format!("{}/", file.trim_end_matches(".rs")),
    }
}

/// Blanks comments, string and char literals (keeping the quotes), so only code is read.
fn strip_comments_and_strings(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let at = |i: usize, s: &str| s.chars().enumerate().all(|(k, c)| b.get(i + k) == Some(&c));
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        if at(i, "//") {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if at(i, "/*") {
            let mut depth = 0;
            while i < b.len() {
                if at(i, "/*") {
                    depth += 1;
                    i += 2;
                } else if at(i, "*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && b.get(i + 1) == Some(&'r')))
            && (i == 0 || !ident(b[i - 1]))
            && {
                let start = if c == 'b' { i + 2 } else { i + 1 };
                let hashes = b[start..].iter().take_while(|c| **c == '#').count();
                b.get(start + hashes) == Some(&'"')
            }
        {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = b[start..].iter().take_while(|c| **c == '#').count();
            let close: String = std::iter::once('"')
                .chain(std::iter::repeat_n('#', hashes))
                .collect();
            i = start + hashes + 1;
            while i < b.len() && !at(i, &close) {
                i += 1;
            }
            i += close.len();
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && (b.get(i + 2) == Some(&'\'') || b.get(i + 1) == Some(&'\\')) {
            // A char literal ('a', '\n', '\u{7f}'); a lifetime has no closing quote.
            i += 1;
            while i < b.len() && b[i] != '\'' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The names of `#[cfg(test)] mod name;` declarations.
fn test_module_files(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        rest = &rest[at + "#[cfg(test)]".len()..];
        let item = skip_attributes(rest);
        let item = item.strip_prefix("pub(crate) ").unwrap_or(item);
        let item = item.strip_prefix("pub ").unwrap_or(item);
        if let Some(declared) = item.strip_prefix("mod ") {
            let name: String = declared
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if declared[name.len()..].trim_start().starts_with(';') {
                names.push(name);
            }
        }
    }
    names
}

fn skip_attributes(mut item: &str) -> &str {
    loop {
        item = item.trim_start();
        if item.starts_with("#[") {
            let end = item.find(']').map_or(item.len(), |e| e + 1);
            item = &item[end..];
        } else {
            return item;
        }
    }
}

/// Removes `#[cfg(test)] mod name { … }` blocks.
fn drop_test_blocks(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let item = skip_attributes(after);
        let item_body = item.strip_prefix("pub(crate) ").unwrap_or(item);
        let item_body = item_body.strip_prefix("pub ").unwrap_or(item_body);
        let is_block = item_body.starts_with("mod ")
            && item_body
                .find(['{', ';'])
                .is_some_and(|e| item_body.as_bytes()[e] == b'{');
        if !is_block {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        let open = item.find('{').unwrap();
        let mut depth = 0;
        let mut end = item.len();
        for (k, c) in item[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// Every path a file names from `crate`, `super` or `self`: `use` trees expanded, then paths in
/// code. Each comes as (root, path below the root), e.g. ("super::super", "model::Message").
fn paths(code: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut rest = String::new();
    let mut remaining = code;
    while let Some(at) = find_word(remaining, "use") {
        rest.push_str(&remaining[..at]);
        let statement = &remaining[at + 3..];
        let end = statement.find(';').unwrap_or(statement.len());
        let tree: String = without_renames(&statement[..end])
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        for path in expand(&tree) {
            if let Some((root, below)) = split_root(&path) {
                found.push((root, below));
            }
        }
        remaining = &statement[end.min(statement.len())..];
    }
    rest.push_str(remaining);
    for root in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = find_word(&rest[from..], root.trim_end_matches(':')) {
            let start = from + at;
            let path: String = rest[start..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = path.trim_end_matches(':');
            if path.starts_with(root)
                && let Some(split) = split_root(path)
            {
                found.push(split);
            }
            from = start + path.len().max(1);
        }
    }
    found
}

/// A `use` tree without its renames: `a::B as C` → `a::B`.
fn without_renames(tree: &str) -> String {
    let words: Vec<&str> = tree
        .split_inclusive(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    let mut out = String::new();
    let mut skip = false;
    for word in words {
        let name = word.trim_end_matches(|c: char| !(c.is_alphanumeric() || c == '_'));
        if skip && !name.is_empty() {
            skip = false;
            out.push_str(&word[name.len()..]);
        } else if name == "as" {
            skip = true;
            out.push_str(&word[name.len()..]);
        } else {
            out.push_str(word);
        }
    }
    out
}

/// Splits `crate::a::b` into ("crate", "a::b"), `super::super::a` into ("super::super", "a"),
/// `self::a` into ("self", "a"); other roots (std, external crates) give None.
fn split_root(path: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = path.split("::").collect();
    let roots = parts
        .iter()
        .take_while(|p| matches!(**p, "crate" | "super" | "self"))
        .count();
    if roots == 0 || roots == parts.len() {
        return None;
    }
    let below: Vec<&str> = parts[roots..]
        .iter()
        .copied()
        .filter(|p| *p != "self" && *p != "*")
        .collect();
    if below.is_empty() {
        return None;
    }
    let root = parts[..roots]
        .iter()
        .filter(|p| **p != "self")
        .copied()
        .collect::<Vec<_>>()
        .join("::");
    let root = if root.is_empty() {
        "self".to_owned()
    } else {
        root
    };
    Some((root, below.join("::")))
}

/// A `use` tree (whitespace removed) as its leaf paths: `crate::{a,b::{c,d}}` → `crate::a`,
/// `crate::b::c`, `crate::b::d`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim_start_matches("::");
    let Some(open) = tree.find('{') else {
        return vec![tree.to_owned()];
    };
    let head = tree[..open].trim_end_matches("::");
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(expand)
        .map(|p| {
            if head.is_empty() {
                p
            } else {
                format!("{head}::{p}")
            }
        })
        .collect()
}

/// The byte offset of `word` standing alone (not inside a longer identifier).
fn find_word(text: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = text[from..].find(word) {
        let start = from + at;
        let end = start + word.len();
        let before = text[..start].chars().next_back();
        let after = text[end..].chars().next();
        if !before.is_some_and(ident) && !after.is_some_and(ident) {
            return Some(start);
        }
        from = end;
    }
    None
}

/// Tarjan's strongly connected components.
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(targets) = s.graph.get(v) {
            for w in targets {
                if !s.index.contains_key(w.as_str()) {
                    visit(s, w);
                    let low = s.low[v].min(s.low[w.as_str()]);
                    s.low.insert(v, low);
                } else if s.on_stack.contains(w.as_str()) {
                    let low = s.low[v].min(s.index[w.as_str()]);
                    s.low.insert(v, low);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.insert(w.to_owned());
                if w == v {
                    break;
                }
            }
            s.found.push(component);
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    let nodes: BTreeSet<&str> = graph
        .iter()
        .flat_map(|(k, v)| std::iter::once(k.as_str()).chain(v.iter().map(String::as_str)))
        .collect();
    for node in nodes {
        if !state.index.contains_key(node) {
            visit(&mut state, node);
        }
    }
    state.found
}
