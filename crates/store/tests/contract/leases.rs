//! The contract's terms taken in turn: `acquire` wins only a free term,
//! `resign` frees one at once and only its own, a campaign takes whatever
//! is held.

use super::Pair;
use drover_spi::StoreError;

pub(super) async fn leases((a, b): Pair) {
    let e1 = a.acquire("ext-a").await.unwrap();
    assert!(e1.is_some_and(|e| e > 0), "a free term is won: {e1:?}");
    let e1 = e1.unwrap();
    assert_eq!(
        b.acquire("ext-b").await.unwrap(),
        None,
        "a held term is not"
    );
    assert_eq!(b.leader().await.unwrap(), Some((e1, "ext-a".into())));

    a.resign(e1).await.unwrap();
    assert_eq!(b.leader().await.unwrap(), None, "resigned: no holder");
    let e2 = b.acquire("ext-b").await.unwrap().expect("free again");
    assert!(e2 > e1, "epochs never go back: {e1} then {e2}");
    assert!(matches!(
        a.check_epoch(e1).await,
        Err(StoreError::Fenced { .. })
    ));

    // A stale term resigns nothing (refused, or nothing of it is left to
    // give up): the current holder keeps its term.
    let stale = a.resign(e1).await;
    assert!(
        matches!(stale, Ok(()) | Err(StoreError::Fenced { .. })),
        "{stale:?}"
    );
    assert_eq!(a.leader().await.unwrap(), Some((e2, "ext-b".into())));

    // A campaign takes a held term.
    let e3 = a.campaign("mgr-a").await.unwrap();
    assert!(e3 > e2);
    assert_eq!(b.leader().await.unwrap(), Some((e3, "mgr-a".into())));
    assert_eq!(b.acquire("ext-b").await.unwrap(), None);
}
