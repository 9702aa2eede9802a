//! SQL fragments and helpers shared by the repository modules.

/// The statement as is on SQLite (the caller holds `BEGIN IMMEDIATE`, so nobody else can
/// write), with ` FOR NO KEY UPDATE` appended on PostgreSQL: a row lock until the transaction
/// ends that serialises writers of the row but, unlike `FOR UPDATE`, does not block inserts of
/// rows referencing it (foreign-key checks take `KEY SHARE`). For read-then-write transactions
/// that never change the row's key. Expands to a `&'static str` of `concat!`-able pieces.
macro_rules! lock_for_write {
    ($db:expr, $($sql:expr),+ $(,)?) => {
        match $db.backend() {
            $crate::db::Backend::Sqlite => concat!($($sql),+),
            $crate::db::Backend::Postgres => concat!($($sql),+, " FOR NO KEY UPDATE"),
        }
    };
}
pub(crate) use lock_for_write;

/// The new `updated_at` of `$table` for a change made at the placeholder `$at` (e.g. `"$5"`):
/// `$at`, or one millisecond past the stored value when `$at` is not later. `updated_at`
/// therefore strictly increases on every change, even with clock skew between processes, so
/// incremental sync (`updated_at > since`) sees every change.
macro_rules! bump_updated_at {
    ($table:literal, $at:literal) => {
        concat!(
            "CASE WHEN ",
            $at,
            " > ",
            $table,
            ".updated_at THEN ",
            $at,
            " ELSE ",
            $table,
            ".updated_at + 1 END"
        )
    };
}
pub(crate) use bump_updated_at;

/// The escape character of every `LIKE … ESCAPE '!'` pattern built by [`like_contains`].
/// (Not a backslash: its meaning in string literals depends on PostgreSQL settings.)
const LIKE_ESCAPE: char = '!';

/// A `LIKE` pattern matching values that contain `needle` literally (`%`, `_` and the escape
/// character are escaped). Use with `ESCAPE '!'`.
pub(crate) fn like_contains(needle: &str) -> String {
    let mut pattern = String::with_capacity(needle.len() + 2);
    pattern.push('%');
    for c in needle.chars() {
        if matches!(c, '%' | '_' | LIKE_ESCAPE) {
            pattern.push(LIKE_ESCAPE);
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Splits an optional keyset position into its two bind values.
pub(crate) fn split_after<T: Copy, U: Copy>(after: Option<(T, U)>) -> (Option<T>, Option<U>) {
    (after.map(|a| a.0), after.map(|a| a.1))
}

/// Appends `(…)` with each of `ids` bound: the list of an `IN`. Keep lists to
/// [`ROWS_PER_STATEMENT`] (SQLite binds at most 32,766 parameters a statement).
pub(crate) fn push_id_list<DB>(
    q: &mut sqlx::QueryBuilder<DB>,
    ids: impl IntoIterator<Item = uuid::Uuid>,
) where
    DB: sqlx::Database,
    for<'t> uuid::Uuid: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    q.push("(");
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id);
    }
    q.push(")");
}

/// Rows (or ids) per multi-row statement: well under SQLite's 32,766 bound parameters with
/// ten columns a row.
pub(crate) const ROWS_PER_STATEMENT: usize = 1000;

/// Whether a statement built for `rows` rows (or ids) is worth keeping prepared: only one
/// row and a full chunk recur. Every other count is another statement in each connection's
/// cache (sqlx keeps 100), and on SQLite a prepared statement of a few hundred rows holds
/// tens of KB of Tern's own memory: kept for each count, they grew the resident set by tens
/// of MB over a campaign (docs/performance.md, fifth session).
pub(crate) fn recurs(rows: usize) -> bool {
    rows == 1 || rows == ROWS_PER_STATEMENT
}

#[cfg(test)]
mod tests {
    use super::like_contains;

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_contains("ann"), "%ann%");
        assert_eq!(like_contains("50%_off!"), "%50!%!_off!!%");
        assert_eq!(like_contains(""), "%%");
    }
}

/// A row of a batched read tagged with the 1-based position (`i`, from `WITH ORDINALITY`)
/// of the input it answers.
#[derive(sqlx::FromRow)]
pub(crate) struct Numbered<T> {
    pub i: i64,
    #[sqlx(flatten)]
    pub row: T,
}
