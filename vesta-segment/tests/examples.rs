//! The example in `examples/` runs as a user would run it: a fresh SQLite file, then the same
//! file again (the tag exists; numbers go on after the tail given back).

#[path = "../examples/quickstart.rs"]
#[allow(dead_code)]
mod quickstart;

#[tokio::test]
async fn quickstart_numbers_are_dense_and_go_on_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("segments.db");
    assert_eq!(quickstart::run(&path, 3).await.unwrap(), vec![1, 2, 3]);
    assert_eq!(quickstart::run(&path, 2).await.unwrap(), vec![4, 5]);
}
