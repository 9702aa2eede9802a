tern_store::both_backends! { tern_store::testkit::TestDb;
    secret_first_write_wins => async |db| {
        let first = db.secret_get_or_insert("cursor_key", b"first").await.unwrap();
        assert_eq!(first, b"first");
        let again = db.secret_get_or_insert("cursor_key", b"second").await.unwrap();
        assert_eq!(again, b"first");
    },

    secret_names_are_independent => async |db| {
        let a = db.secret_get_or_insert("a", &[0u8; 32]).await.unwrap();
        let b = db.secret_get_or_insert("b", &[1u8; 32]).await.unwrap();
        assert_eq!(a, vec![0u8; 32]);
        assert_eq!(b, vec![1u8; 32]);
    },

    secret_concurrent_callers_agree => async |db| {
        let tasks: Vec<_> = (0u8..16)
            .map(|i| {
                let db = db.clone();
                tokio::spawn(async move { db.secret_get_or_insert("race", &[i; 32]).await })
            })
            .collect();
        let mut values = Vec::new();
        for t in tasks {
            values.push(t.await.unwrap().unwrap());
        }
        let first = values[0].clone();
        assert!(values.iter().all(|v| *v == first), "callers saw different secrets");
        assert!(first.len() == 32 && first.iter().all(|b| *b == first[0]));
        assert_eq!(db.secret_get_or_insert("race", b"late").await.unwrap(), first);
    },
}
