//! `manychat-agent catalog import <file.csv>`: a shop's product CSV export into `catalog.json`'s
//! offerings (`config::import`), all or nothing.
//!
//! Order: read the CSV (at most `MAX_CSV_BYTES`) and the current `catalog.json` (a new one needs
//! `--business-name` and `--currency`); convert every row, refusing the whole import on any bad
//! row (each printed by line and column); merge (an offering with an imported id is replaced in
//! place, new ones are added at the end, the others kept, or dropped with `--replace`); load the
//! folder as it would be with the new file, and refuse when that load finds a problem the
//! current files do not have (an offering `tools.json` names, dropped by `--replace`); only then
//! write `catalog.json` through a temporary file renamed over it, so a reader sees the old file
//! or the new one, never a part. Nothing is written on any refusal.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{CliResult, config_dir, context};
use crate::config::import::{Format, MAX_CSV_BYTES, import_csv};
use crate::config::load::CATALOG_FILE;
use crate::config::{Catalog, ConfigIssue, printable};

/// What `catalog import` was asked.
pub struct ImportArgs {
    pub file: PathBuf,
    /// `--config DIR`; else `CONFIG_DIR`, else `config`.
    pub config: Option<PathBuf>,
    pub format: Option<String>,
    /// Drop the offerings the file does not hold.
    pub replace: bool,
    /// For a new `catalog.json` only.
    pub business_name: Option<String>,
    pub currency: Option<String>,
}

/// The command: prints what it did, or every reason it wrote nothing (exit 1).
pub fn catalog_import(env: &HashMap<String, String>, args: &ImportArgs) -> CliResult {
    match run(env, args) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(lines) => {
            for line in lines {
                eprintln!("{line}");
            }
            eprintln!("catalog import: nothing was written");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn run(env: &HashMap<String, String>, args: &ImportArgs) -> Result<(), Vec<String>> {
    let dir = args
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(config_dir(env)));
    let csv_name = printable(&args.file.display().to_string()).into_owned();
    let one = |line: String| vec![line];
    let format = args
        .format
        .as_deref()
        .map(str::parse::<Format>)
        .transpose()
        .map_err(|rule| one(format!("--format: {rule}")))?;
    let bytes = read_csv(&args.file).map_err(|rule| one(format!("{csv_name}: {rule}")))?;

    let path = dir.join(CATALOG_FILE);
    let (schema, current) = current_catalog(&path, args)?;
    let imported = import_csv(&bytes, format, &current.currency).map_err(|issues| {
        let mut lines: Vec<String> = issues
            .iter()
            .map(|issue| format!("{csv_name}: {issue}"))
            .collect();
        lines.push(format!("{} problems in {csv_name}", issues.len()));
        lines
    })?;

    // The merge: replaced in place, added at the end, the rest kept unless --replace.
    let mut catalog = current.clone();
    let mut from_line: HashMap<String, u64> = HashMap::new();
    let imported_ids: HashSet<&str> = imported
        .offerings
        .iter()
        .map(|(_, o)| o.id.as_str())
        .collect();
    let kept_before = catalog.offerings.len();
    if args.replace {
        catalog
            .offerings
            .retain(|o| imported_ids.contains(o.id.as_str()));
    }
    let dropped = kept_before - catalog.offerings.len();
    let (mut added, mut replaced) = (0, 0);
    let mut at: HashMap<String, usize> = catalog
        .offerings
        .iter()
        .enumerate()
        .map(|(i, o)| (o.id.clone(), i))
        .collect();
    for (line, offering) in &imported.offerings {
        from_line.insert(offering.id.clone(), *line);
        match at.get(&offering.id) {
            Some(&i) => {
                catalog.offerings[i] = offering.clone();
                replaced += 1;
            }
            None => {
                at.insert(offering.id.clone(), catalog.offerings.len());
                catalog.offerings.push(offering.clone());
                added += 1;
            }
        }
    }
    let kept = catalog.offerings.len() - added - replaced;

    let written = serialize(schema.as_deref(), &catalog);
    let ctx = context(env);
    let before: HashSet<ConfigIssue> = crate::config::load_dir(&dir, &ctx)
        .err()
        .map(|e| e.0.into_iter().collect())
        .unwrap_or_default();
    if let Err(errors) = crate::config::load_dir_with_catalog(&dir, &ctx, &written) {
        let introduced: Vec<String> = errors
            .0
            .iter()
            .filter(|issue| !before.contains(issue))
            .map(|issue| {
                let line = source_line(issue, &catalog, &from_line)
                    .map_or(String::new(), |l| format!(" (from line {l} of {csv_name})"));
                format!("{issue}{line}")
            })
            .collect();
        if !introduced.is_empty() {
            return Err(introduced);
        }
    }
    write_atomically(&path, &written).map_err(|e| {
        one(format!(
            "{}: cannot be written ({})",
            path.display(),
            e.kind()
        ))
    })?;

    println!(
        "{}: {} offerings from {csv_name} ({} layout): {added} added, {replaced} replaced, \
         {kept} kept{}; {} offerings in all",
        printable(&path.display().to_string()),
        imported.offerings.len(),
        imported.format.name(),
        if args.replace {
            format!(", {dropped} dropped (--replace)")
        } else {
            String::new()
        },
        catalog.offerings.len()
    );
    for note in &imported.notes {
        println!("note: {note}");
    }
    if !before.is_empty() {
        println!("note: `config check` still reports problems that were there before the import");
    }
    println!("a running service uses it after a reload (SIGHUP) or a restart");
    Ok(())
}

/// The CSV's bytes, at most `MAX_CSV_BYTES`, or why not.
fn read_csv(path: &Path) -> Result<Vec<u8>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot be read ({})", e.kind()))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if !metadata.is_file() {
        return Err("is not a regular file".to_owned());
    }
    let too_large = || {
        format!(
            "is larger than the {} MiB limit for an import",
            MAX_CSV_BYTES >> 20
        )
    };
    if metadata.len() > MAX_CSV_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(MAX_CSV_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if bytes.len() as u64 > MAX_CSV_BYTES {
        return Err(too_large());
    }
    Ok(bytes)
}

/// The current catalog (and its `$schema` key, kept), or a new empty one from the flags.
fn current_catalog(
    path: &Path,
    args: &ImportArgs,
) -> Result<(Option<String>, Catalog), Vec<String>> {
    let shown = printable(&path.display().to_string()).into_owned();
    if !path.exists() {
        let (Some(name), Some(currency)) = (&args.business_name, &args.currency) else {
            return Err(vec![format!(
                "{shown}: does not exist: pass --business-name and --currency to start one"
            )]);
        };
        return Ok((
            None,
            Catalog {
                business_name: name.clone(),
                currency: currency.trim().to_ascii_uppercase(),
                offerings: Vec::new(),
                faq: Vec::new(),
                payment_options: Vec::new(),
            },
        ));
    }
    let unreadable = || {
        vec![format!(
            "{shown}: cannot be read as a catalog; run `manychat-agent config check` and fix it \
             first"
        )]
    };
    let bytes = std::fs::read(path).map_err(|_| unreadable())?;
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(|_| unreadable())?;
    let schema = value
        .as_object_mut()
        .and_then(|o| o.remove("$schema"))
        .and_then(|s| s.as_str().map(str::to_owned));
    let catalog: Catalog = serde_json::from_value(value).map_err(|_| unreadable())?;
    for (flag, given, has) in [
        ("--currency", &args.currency, &catalog.currency),
        (
            "--business-name",
            &args.business_name,
            &catalog.business_name,
        ),
    ] {
        if given.as_ref().is_some_and(|g| g.trim() != has.as_str()) {
            return Err(vec![format!(
                "{flag}: differs from {shown}'s; it only starts a new catalog (edit the file to \
                 change it)"
            )]);
        }
    }
    Ok((schema, catalog))
}

/// The catalog as written: `$schema` first when the file had one, then the catalog's keys in
/// their usual order, two-space indents, a final newline.
fn serialize(schema: Option<&str>, catalog: &Catalog) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Written<'a> {
        #[serde(rename = "$schema", skip_serializing_if = "Option::is_none")]
        schema: Option<&'a str>,
        #[serde(flatten)]
        catalog: &'a Catalog,
    }
    let mut bytes =
        serde_json::to_vec_pretty(&Written { schema, catalog }).expect("a catalog serializes");
    bytes.push(b'\n');
    bytes
}

/// The CSV line an issue about `$.offerings[i]` comes from, when that offering was imported.
fn source_line(issue: &ConfigIssue, catalog: &Catalog, from: &HashMap<String, u64>) -> Option<u64> {
    let rest = issue.path.strip_prefix("$.offerings[")?;
    let index: usize = rest.split(']').next()?.parse().ok()?;
    from.get(&catalog.offerings.get(index)?.id).copied()
}

/// Writes `bytes` to a temporary file beside `path`, flushed to disk, then renames it over
/// `path` (atomic on one file system) and syncs the folder. The old file's permissions are kept.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let temp = dir.join(format!(".{CATALOG_FILE}.import-{}.tmp", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        if let Ok(metadata) = std::fs::metadata(path) {
            file.set_permissions(metadata.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}
