//! Connection handling that is not per-method conformance.

use tern_store::{Backend, Db, StoreError};

tern_store::both_backends! { tern_store::testkit::TestDb;
    ping_and_backend_report => async |db| {
        db.ping().await.unwrap();
        // The macro's module name says which backend we are on; both must answer.
        assert!(matches!(db.backend(), Backend::Sqlite | Backend::Postgres));
    },

    migrate_is_idempotent => async |db| {
        db.migrate().await.unwrap();
        db.migrate().await.unwrap();
    },
}

#[tokio::test]
async fn sqlite_urls_create_the_file_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    for (i, form) in ["sqlite://", "sqlite:"].into_iter().enumerate() {
        let path = dir.path().join(format!("db{i}.sqlite"));
        let db = Db::connect(&format!("{form}{}", path.display()))
            .await
            .unwrap();
        assert_eq!(db.backend(), Backend::Sqlite);
        db.migrate().await.unwrap();
        db.close().await;
        assert!(path.exists(), "{form} did not create the file");

        // journal_mode=WAL is persistent in the file, so a fresh connection reports it.
        use sqlx::Connection as _;
        let mut conn = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(mode, "wal");
    }
}

#[tokio::test]
async fn sqlite_in_memory_keeps_its_data_across_calls() {
    let db = Db::connect("sqlite::memory:").await.unwrap();
    db.migrate().await.unwrap();
    let org = crate::fixtures::insert_org(&db).await;
    let (a, b) = tokio::join!(db.get_org(org.id), db.get_org(org.id));
    assert_eq!(a.unwrap(), Some(org.clone()));
    assert_eq!(b.unwrap(), Some(org));
    db.close().await;
}

#[tokio::test]
async fn postgres_url_connects() {
    let db = Db::connect(&tern_store::testkit::test_pg_url())
        .await
        .unwrap();
    assert_eq!(db.backend(), Backend::Postgres);
    db.ping().await.unwrap();
    db.close().await;
}

#[tokio::test]
async fn unknown_schemes_are_invalid() {
    for url in ["mysql://localhost/x", "", "file:/tmp/x.db", "postgres:/x"] {
        let err = Db::connect(url).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidUrl(_)), "{url}: {err:?}");
    }
}
