//! `docs/errors.md`, rendered from the catalog (a test keeps the file equal to this).

use super::{CATALOG, ConflictReason, ErrorCode};

/// The catalog as Markdown: every code with its status, meaning, fix and `details` keys, and
/// the reasons of `conflict`.
pub fn catalog_markdown() -> String {
    let mut out = String::from(
        "# Errors\n\n\
         <!-- Generated from crates/domain/src/error: do not edit. Regenerate with\n     \
         TERN_BLESS=1 cargo test -p tern-domain errors_md -->\n\n\
         Every error answer has the body `{code, message, request_id, details, fix, docs_url}`.\n\
         Switch on `code` (stable); `message` may change. `request_id` equals the\n\
         `X-Request-Id` header. Each code also has a page at `/docs/errors/{code}` on a running\n\
         Tern.\n\n\
         | code | status | meaning |\n|---|---|---|\n",
    );
    for e in CATALOG.iter() {
        out.push_str(&format!(
            "| [`{c}`](#{c}) | {} | {} |\n",
            e.status,
            e.title,
            c = e.code.as_str()
        ));
    }
    for e in CATALOG.iter() {
        out.push_str(&format!(
            "\n## {}\n\nHTTP {} — {}. {}\n\n**Fix:** {}\n",
            e.code.as_str(),
            e.status,
            e.title,
            e.description,
            e.fix
        ));
        if !e.details.is_empty() {
            let keys: Vec<String> = e.details.iter().map(|d| format!("`{d}`")).collect();
            out.push_str(&format!("\n**details:** {}\n", keys.join(", ")));
        }
        if e.code == ErrorCode::Conflict {
            out.push_str("\n| `details.reason` | meaning |\n|---|---|\n");
            for r in ConflictReason::ALL {
                out.push_str(&format!("| `{}` | {} |\n", r.as_str(), r.description()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/errors.md` is the catalog's rendering; `TERN_BLESS=1` rewrites it.
    #[test]
    fn errors_md_is_generated_from_the_catalog() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/errors.md");
        let want = catalog_markdown();
        if std::env::var_os("TERN_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let got = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            got == want,
            "docs/errors.md is stale: run TERN_BLESS=1 cargo test -p tern-domain errors_md"
        );
    }
}
