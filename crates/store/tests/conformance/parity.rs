//! The two migration sets describe the same schema.

use std::collections::BTreeSet;
use std::path::Path;

use tern_store::testkit;

fn migration_files(backend: &str) -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(backend);
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect()
}

#[test]
fn migration_directories_hold_the_same_files() {
    let sqlite = migration_files("sqlite");
    let postgres = migration_files("postgres");
    assert!(!sqlite.is_empty());
    assert_eq!(sqlite, postgres);
}

#[tokio::test]
async fn migrated_schemas_have_the_same_tables_and_columns() {
    let (sqlite, _dir) = testkit::fresh_sqlite().await;
    let postgres = testkit::fresh_postgres().await;
    let s = testkit::schema_columns(&sqlite).await.unwrap();
    let p = testkit::schema_columns(&postgres).await.unwrap();
    postgres.drop_test_schema().await.unwrap();

    assert!(
        s.len() >= 22,
        "expected the whole product schema, got {:?}",
        s.keys()
    );
    let s_tables: BTreeSet<_> = s.keys().collect();
    let p_tables: BTreeSet<_> = p.keys().collect();
    assert_eq!(s_tables, p_tables, "tables differ");
    for (table, columns) in &s {
        assert_eq!(Some(columns), p.get(table), "columns of {table} differ");
    }
}
