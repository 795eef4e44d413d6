//! The core reaches its parts only through their methods. A part is state the core holds whose
//! type is defined, with methods, in one of the parts' folders (`safety/`, `liveness/`, `sync/`,
//! `payload/`, `commit/`) or in `aggregator.rs`: what it decides and keeps is then tested without
//! a core, and no handler can move it past its rules. (A plain value a part hands the core, such
//! as `sync::adoption::Adopted`, has no methods and its fields are its face.) Privacy makes the
//! compiler hold the wall; this test keeps it from being opened again by a field made visible
//! for the core's convenience.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const PART_FOLDERS: [&str; 5] = ["safety", "liveness", "sync", "payload", "commit"];
const PART_FILES: [&str; 1] = ["aggregator.rs"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `text` without its comments, with each chained call joined to its line (`self.a\n  .b` reads
/// `self.a.b`).
fn code(text: &str) -> String {
    let mut joined = String::new();
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let trimmed = line.trim_start();
        if trimmed.starts_with('.') {
            joined.push_str(trimmed);
        } else {
            joined.push('\n');
            joined.push_str(line);
        }
    }
    joined
}

/// The fields of `struct name { .. }` in `text`: each name, and whether it is visible outside
/// its module (`pub`, `pub(crate)`, `pub(super)`, ...).
fn fields(text: &str, name: &str) -> Option<Vec<(String, bool)>> {
    let start = text.find(&format!("struct {name} {{"))?;
    let body = &text[start..];
    let end = body.find("\n}")?;
    let fields = body[..end]
        .lines()
        .skip(1)
        .map(str::trim)
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| {
            let (declared, _) = line.split_once(':')?;
            let visible = declared.starts_with("pub");
            let name = declared.rsplit(' ').next()?.to_string();
            Some((name, visible))
        })
        .collect();
    Some(fields)
}

/// Every identifier in a type (`Arc<ConsensusMetrics>`: `Arc`, `ConsensusMetrics`).
fn type_names(ty: &str) -> Vec<String> {
    ty.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| word.starts_with(char::is_uppercase))
        .map(String::from)
        .collect()
}

/// A part the core holds.
struct Part {
    /// The core's field that holds it.
    held_as: String,
    /// Its type.
    name: String,
    /// Its fields (see `fields`).
    fields: Vec<(String, bool)>,
}

fn parts() -> Vec<Part> {
    let src = src();
    let mut part_files = Vec::new();
    for folder in PART_FOLDERS {
        rust_files(&src.join(folder), &mut part_files);
    }
    part_files.extend(PART_FILES.iter().map(|file| src.join(file)));
    let part_texts: Vec<String> = part_files.iter().map(|path| code(&read(path))).collect();
    let core = code(&read(&src.join("core.rs")));
    let core_fields = core
        .split_once("pub struct Core {")
        .and_then(|(_, body)| body.split_once("\n}"))
        .expect("struct Core")
        .0;
    let mut parts = Vec::new();
    for line in core_fields.lines().map(str::trim) {
        let Some((field, ty)) = line.split_once(':') else {
            continue;
        };
        for name in type_names(ty) {
            let has_methods = part_texts
                .iter()
                .any(|text| text.contains(&format!("impl {name} {{")));
            if !has_methods {
                continue;
            }
            if let Some(part_fields) = part_texts.iter().find_map(|text| fields(text, &name)) {
                parts.push(Part {
                    held_as: field.trim().to_string(),
                    name,
                    fields: part_fields,
                });
            }
        }
    }
    parts
}

#[test]
fn the_core_reaches_its_parts_through_their_methods() {
    let parts = parts();
    let held: Vec<&str> = parts.iter().map(|part| part.name.as_str()).collect();
    for expected in [
        "Voting",
        "Pacemaker",
        "Committed",
        "Adoption",
        "BlockPruning",
    ] {
        assert!(held.contains(&expected), "{expected} is not among {held:?}");
    }
    let visible: Vec<String> = parts
        .iter()
        .flat_map(|part| {
            part.fields
                .iter()
                .filter(|(_, visible)| *visible)
                .map(move |(field, _)| format!("{}::{field}", part.name))
        })
        .collect();
    assert!(
        visible.is_empty(),
        "fields of the core's parts visible outside their modules: {visible:?}"
    );

    let mut files = vec![src().join("core.rs")];
    rust_files(&src().join("core"), &mut files);
    let mut named: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for path in &files {
        let text = code(&read(path));
        for part in &parts {
            for (field, _) in &part.fields {
                let reach = format!(".{}.{field}", part.held_as);
                let reaches = text.match_indices(&reach).any(|(at, _)| {
                    let after = text[at + reach.len()..].chars().next();
                    !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '(')
                });
                if reaches {
                    let file = path.strip_prefix(src()).unwrap_or(path).display();
                    named
                        .entry(file.to_string())
                        .or_default()
                        .push(format!("{}::{field}", part.name));
                }
            }
        }
    }
    assert!(
        named.is_empty(),
        "files under core/ that name a part's field: {named:?}"
    );
}
