//! A collection window, shared by the DescribeInstances and TerminateInstances batchers:
//! the first request opens it and the window is flushed, with every request that arrived
//! meanwhile, a fixed time later on a task of its own.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct Window<T> {
    /// The requests of the open window; `None` while none is open.
    open: Arc<Mutex<Option<Vec<T>>>>,
}

impl<T> Default for Window<T> {
    fn default() -> Self {
        Window { open: Arc::default() }
    }
}

impl<T: Send + 'static> Window<T> {
    /// Adds `item` to the open window, or opens one that `flush` takes `wait` from now.
    pub fn add<F, Fut>(&self, item: T, wait: Duration, flush: F)
    where
        F: FnOnce(Vec<T>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let opened = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            match open.as_mut() {
                Some(items) => {
                    items.push(item);
                    false
                }
                None => {
                    *open = Some(vec![item]);
                    true
                }
            }
        };
        if opened {
            let open = self.open.clone();
            tokio::spawn(async move {
                tokio::time::sleep(wait).await;
                let items = open.lock().unwrap_or_else(|e| e.into_inner()).take().unwrap_or_default();
                flush(items).await;
            });
        }
    }
}
