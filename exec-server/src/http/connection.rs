//! Per-connection accounting for the fetch limit: every accepted connection gets a [`ConnectionId`]
//! in its requests' extensions ([`WithConnectionId`] wraps the hyper service), and [`FetchSlots`]
//! counts fetches in flight per id.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::error::HttpError;

/// Identifies one accepted client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId(u64);

impl ConnectionId {
    /// A process-unique id.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A hyper service that tags every request with its connection's [`ConnectionId`].
#[derive(Debug, Clone)]
pub struct WithConnectionId<S> {
    inner: S,
    id: ConnectionId,
}

impl<S> WithConnectionId<S> {
    /// Wraps the service of one new connection.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            id: ConnectionId::next(),
        }
    }
}

impl<S, B> hyper::service::Service<http::Request<B>> for WithConnectionId<S>
where
    S: hyper::service::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn call(&self, mut req: http::Request<B>) -> Self::Future {
        req.extensions_mut().insert(self.id);
        self.inner.call(req)
    }
}

/// Counts fetches in flight per connection.
#[derive(Debug, Clone)]
pub struct FetchSlots {
    limit: usize,
    in_flight: Arc<Mutex<HashMap<Option<ConnectionId>, usize>>>,
}

/// Held for the duration of one fetch; frees the slot on drop.
#[derive(Debug)]
pub struct FetchSlot {
    key: Option<ConnectionId>,
    in_flight: Arc<Mutex<HashMap<Option<ConnectionId>, usize>>>,
}

impl FetchSlots {
    /// At most `limit` fetches per connection.
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            in_flight: Arc::default(),
        }
    }

    /// Takes a slot for `connection` (requests without an id, e.g. from in-memory transports, share
    /// one bucket).
    ///
    /// # Errors
    /// [`HttpError::TooManyFetches`] when the connection is at the limit.
    pub fn acquire(&self, connection: Option<ConnectionId>) -> Result<FetchSlot, HttpError> {
        // The lock only guards counter updates; it is never held across an await.
        let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let count = map.entry(connection).or_insert(0);
        if *count >= self.limit {
            return Err(HttpError::TooManyFetches { limit: self.limit });
        }
        *count += 1;
        Ok(FetchSlot {
            key: connection,
            in_flight: self.in_flight.clone(),
        })
    }
}

impl Drop for FetchSlot {
    fn drop(&mut self) {
        let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(count) = map.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                map.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_per_connection_and_freed_on_drop() {
        let slots = FetchSlots::new(1);
        let (a, b) = (Some(ConnectionId::next()), Some(ConnectionId::next()));
        let held = slots.acquire(a).unwrap();
        assert!(matches!(
            slots.acquire(a),
            Err(HttpError::TooManyFetches { limit: 1 })
        ));
        let _other = slots.acquire(b).unwrap();
        drop(held);
        assert!(slots.acquire(a).is_ok());
    }
}
