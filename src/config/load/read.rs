//! Reading one file of the tenant's folder: which file stands for a name (the plain file, else
//! its `.example` when allowed), at most its limit (`max_bytes`), regular files only (opening
//! never blocks on a FIFO), a leading byte order mark dropped.

use super::*;

pub(super) enum Optional {
    Absent,
    Unreadable,
    Read(String, Vec<u8>),
}

/// Which file stands for `name`: the plain file, else its example when allowed.
pub(super) fn resolve(dir: &Path, name: &str, ctx: &ConfigContext) -> Option<(String, PathBuf)> {
    let plain = dir.join(name);
    if plain.exists() {
        return Some((name.to_owned(), plain));
    }
    let example_name = format!("{name}.example");
    let example = dir.join(&example_name);
    if ctx.allow_examples && example.exists() {
        return Some((example_name, example));
    }
    None
}

pub(super) fn read_required(
    dir: &Path,
    name: &str,
    ctx: &ConfigContext,
    issues: &mut Vec<ConfigIssue>,
) -> Option<(String, Vec<u8>)> {
    match read_optional(dir, name, ctx, issues) {
        Optional::Read(file, bytes) => Some((file, bytes)),
        Optional::Unreadable => None,
        Optional::Absent => {
            let rule = if dir.join(format!("{name}.example")).exists() {
                "required file is missing (its .example is used only when examples are allowed, as in the demo)"
            } else {
                "required file is missing"
            };
            issues.push(ConfigIssue::new(name, "$", rule));
            None
        }
    }
}

pub(super) fn read_optional(
    dir: &Path,
    name: &str,
    ctx: &ConfigContext,
    issues: &mut Vec<ConfigIssue>,
) -> Optional {
    let Some((file, path)) = resolve(dir, name, ctx) else {
        return Optional::Absent;
    };
    match read_bounded(&path, max_bytes(name), || too_large(name)) {
        Ok(bytes) => Optional::Read(file, bytes),
        Err(rule) => {
            issues.push(ConfigIssue::new(file, "$", rule));
            Optional::Unreadable
        }
    }
}

/// The rule a file over its limit breaks, naming the limit.
pub(super) fn too_large(name: &str) -> String {
    let limit = max_bytes(name);
    if limit == MAX_CATALOG_BYTES {
        format!(
            "is larger than the {} MiB limit for catalog.json",
            limit >> 20
        )
    } else {
        format!(
            "is larger than the {} MiB limit for a config file",
            limit >> 20
        )
    }
}

/// Reads at most `limit` bytes, else the rule `too_large` words; the `take` guards against a
/// file that grows between the size check and the read. The file is opened non-blocking and
/// checked to be a regular file on the open handle, so a FIFO swapped in at any moment is
/// refused instead of waited on.
pub(super) fn read_bounded(
    path: &Path,
    limit: u64,
    too_large: impl Fn() -> String,
) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    let metadata = file
        .metadata()
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if !metadata.is_file() {
        return Err(
            "is not a regular file (a FIFO, socket, device or folder is refused; use a plain file)"
                .to_owned(),
        );
    }
    let len = metadata.len();
    if len > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot be read ({})", e.kind()))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// A UTF-8 byte order mark, which some editors write at the start of a file.
pub(super) const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The file's bytes without a leading byte order mark: it is not part of the content.
pub(super) fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM).unwrap_or(bytes)
}
