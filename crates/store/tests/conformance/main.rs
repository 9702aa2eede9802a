#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Store conformance suite: every `Db` method, run on SQLite and on PostgreSQL.
//!
//! One integration binary (fast linking). Each module invokes [`store_tests!`] once, which
//! turns every `name => |db| async move { … }` into `<module>::sqlite::name` (temp-file
//! SQLite) and `<module>::postgres::name` (fresh PG schema, dropped afterwards, even when the
//! body panics). PostgreSQL tests fail, never skip, when the server is unreachable.

/// See the crate docs above.
macro_rules! store_tests {
    ($($name:ident => |$db:ident| $body:expr),* $(,)?) => {
        mod sqlite {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let (db, _dir) = tern_store::testkit::fresh_sqlite().await;
                    let $db = db.clone();
                    let outcome = tokio::spawn($body).await;
                    db.close().await;
                    if let Err(e) = outcome {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            )*
        }
        mod postgres {
            #[allow(unused_imports)]
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let db = tern_store::testkit::fresh_postgres().await;
                    let $db = db.clone();
                    let outcome = tokio::spawn($body).await;
                    db.drop_test_schema().await.expect("drop test schema");
                    if let Err(e) = outcome {
                        std::panic::resume_unwind(e.into_panic());
                    }
                }
            )*
        }
    };
}

mod api_keys;
mod campaigns;
mod connect;
mod contact_fields;
mod contacts;
mod conversations;
mod dispatch;
mod events;
mod fixtures;
mod identity;
mod media;
mod messages;
mod network_inbox;
mod orgs;
mod parity;
mod phone_numbers;
mod settings;
mod tags;
mod templates;
mod usage;
