//! When a queue worker looks for jobs. Every push from this process wakes the worker of its queue at once.
//! A queue that other processes push to too (`Pushers::AnyProcess`: a cluster's Redis, or `wagate-worker`
//! beside API nodes) is also polled every `poll`, since their pushes reach us only through storage. A queue
//! only this process pushes to (`Pushers::ThisProcess`: an embedded node's SQLite file) is not polled: its
//! worker also wakes when a delayed job it pushed falls due, and else sleeps until apalis' heartbeat. An idle
//! embedded node then runs no queue query between heartbeats (measured: 645 SQLite reads and 240 writes per
//! 30 s with the polls, 19 and 8 without).
//!
//! apalis ignores what this stream yields: it fetches whenever its worker task is polled with no fetch
//! under way, and the stream only has to wake that task. Two consequences shape it. The stream must stay
//! armed after it yields (`KeepArmed`): apalis polls it again only on the next poll of the task, and when a
//! fetch finishes within the poll that started it, nothing else would ever wake the task. And a wake that
//! lands while a fetch is under way only completes that fetch, which may have read the queue before the
//! push committed, so after every push or due time the worker looks again a few times (`FOLLOW_UPS`).
//! Without polls, either would leave a job waiting for the heartbeat.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::Notify;
use tokio::time::Instant;

/// apalis stores a delayed job's run time in whole seconds rounded down, so the job is due by `push + delay`;
/// the margin covers the two clocks (wall and monotonic) disagreeing by a little.
const DUE_MARGIN: Duration = Duration::from_millis(100);

/// The looks after the last push or due time, measured from it. A fetch takes milliseconds; the later looks
/// cover one slowed by a busy machine or a locked SQLite file (its busy timeout is 5 s).
const FOLLOW_UPS: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_secs(1),
    Duration::from_secs(6),
];

/// The wake-ups of one queue's worker in this process.
#[derive(Debug, Default)]
pub(crate) struct Wake {
    pushed: Notify,
    timeline: Mutex<Timeline>,
}

#[derive(Debug, Default)]
struct Timeline {
    /// When delayed jobs pushed from here fall due, earliest first.
    due: BinaryHeap<Reverse<Instant>>,
    /// The last push, or the last due time woken for.
    last_event: Option<Instant>,
}

impl Wake {
    /// A job was pushed, runnable after `delay`: the worker looks now (for an undelayed job, or to sleep
    /// until the new earliest due time) and again once it is due.
    pub(crate) fn pushed(&self, delay: Option<Duration>) {
        let now = Instant::now();
        {
            let mut timeline = self.timeline();
            if let Some(delay) = delay {
                timeline.due.push(Reverse(now + delay + DUE_MARGIN));
            }
            timeline.last_event = Some(now);
        }
        self.pushed.notify_one();
    }

    /// When to look next, short of a push: the earliest due time not yet woken for (it may have passed while
    /// the worker was busy) or the next follow-up of an event after `looked` (the last look).
    fn next_look(&self, looked: Instant) -> Option<Instant> {
        let timeline = self.timeline();
        let due = timeline.due.peek().map(|Reverse(at)| *at);
        let follow_up = timeline.last_event.and_then(|event| {
            FOLLOW_UPS
                .iter()
                .map(|after| event + *after)
                .find(|at| *at > looked)
        });
        due.into_iter().chain(follow_up).min()
    }

    /// Forgets the due times a look at `now` covers; a due time passed is an event to follow up.
    fn looked(&self, now: Instant) {
        let mut timeline = self.timeline();
        let mut fell_due = false;
        while timeline.due.peek().is_some_and(|Reverse(at)| *at <= now) {
            timeline.due.pop();
            fell_due = true;
        }
        if fell_due {
            timeline.last_event = Some(now);
        }
    }

    fn timeline(&self) -> MutexGuard<'_, Timeline> {
        // The timeline is valid whatever a panicking holder left half done: its fields are plain values.
        self.timeline
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Whom a process's workers must expect jobs from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Pushers {
    /// Other processes too: workers poll storage every `QueueConfig::poll_interval_ms`.
    #[default]
    AnyProcess,
    /// Only this process: workers wake on its pushes and their due times, and poll only at the heartbeat.
    ThisProcess,
}

/// The two queues' wake-ups, shared by a `QueueClient` and its clones.
#[derive(Debug, Default)]
pub(crate) struct Wakes {
    pub(crate) webhook: Arc<Wake>,
    pub(crate) ingress: Arc<Wake>,
}

/// A worker's poll strategy: an item whenever it should look for jobs. `poll` is `None` when only this
/// process pushes to the queue.
pub(crate) fn stream(
    wake: Arc<Wake>,
    poll: Option<Duration>,
) -> Pin<Box<dyn Stream<Item = ()> + Send>> {
    let start = (wake, Instant::now());
    let looks = futures::stream::unfold(start, move |(wake, looked)| async move {
        let polled = poll.map(|every| Instant::now() + every);
        match wake.next_look(looked).into_iter().chain(polled).min() {
            Some(at) => tokio::select! {
                _ = wake.pushed.notified() => {}
                _ = tokio::time::sleep_until(at) => {}
            },
            None => wake.pushed.notified().await,
        }
        let now = Instant::now();
        wake.looked(now);
        Some(((), (wake, now)))
    });
    Box::pin(KeepArmed {
        looks: Box::pin(looks),
    })
}

/// Yields once for any number of looks due since the last poll, and leaves the next look waiting (its timer
/// and the push notification holding this task's waker) even when it yields.
struct KeepArmed<S> {
    looks: Pin<Box<S>>,
}

impl<S: Stream<Item = ()>> Stream for KeepArmed<S> {
    type Item = ();

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<()>> {
        let mut due = false;
        // Ends: a look consumes the push permit and the due times up to now, so the next one waits.
        loop {
            match self.looks.poll_next_unpin(cx) {
                Poll::Ready(Some(())) => due = true,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending if due => return Poll::Ready(Some(())),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    /// The times (ms from `start`) at which the stream wakes before `until_ms`.
    async fn wakes_until(
        stream: &mut Pin<Box<dyn Stream<Item = ()> + Send>>,
        start: Instant,
        until_ms: u64,
    ) -> Vec<u128> {
        let end = start + Duration::from_millis(until_ms);
        let mut at = Vec::new();
        while tokio::time::timeout_at(end, stream.next()).await.is_ok() {
            at.push((Instant::now() - start).as_millis());
        }
        at
    }

    #[tokio::test(start_paused = true)]
    async fn a_sole_pusher_queue_sleeps_until_a_push_and_follows_it_up() {
        let wake = Arc::new(Wake::default());
        let mut wakes = stream(wake.clone(), None);
        let start = Instant::now();
        assert!(wakes_until(&mut wakes, start, 3_600_000).await.is_empty());
        let start = Instant::now();
        wake.pushed(None);
        let expected: Vec<u128> = vec![0, 100, 1_000, 6_000];
        assert_eq!(wakes_until(&mut wakes, start, 3_600_000).await, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_push_wakes_again_once_due() {
        let wake = Arc::new(Wake::default());
        let mut wakes = stream(wake.clone(), None);
        let start = Instant::now();
        wake.pushed(Some(Duration::from_secs(5)));
        wake.pushed(Some(Duration::from_secs(2)));
        // The pushes (one permit for both) and their follow-ups, then each due time and its follow-ups; a
        // later event replaces the follow-ups of an earlier one.
        let expected: Vec<u128> = vec![
            0, 100, 1_000, 2_100, 2_200, 3_100, 5_100, 5_200, 6_100, 11_100,
        ];
        assert_eq!(wakes_until(&mut wakes, start, 3_600_000).await, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn a_push_in_a_burst_moves_the_follow_ups() {
        let wake = Arc::new(Wake::default());
        let mut wakes = stream(wake.clone(), None);
        let start = Instant::now();
        wake.pushed(None);
        assert_eq!(wakes_until(&mut wakes, start, 50).await, vec![0]);
        wake.pushed(None);
        let expected: Vec<u128> = vec![50, 150, 1_050, 6_050];
        assert_eq!(wakes_until(&mut wakes, start, 3_600_000).await, expected);
    }

    /// apalis polls the stream only when its task is polled, and may not poll it again after an item: the
    /// next look must wake the task by itself.
    #[tokio::test(start_paused = true)]
    async fn the_next_look_is_armed_when_a_look_is_yielded() {
        struct Count(std::sync::atomic::AtomicUsize);
        impl futures::task::ArcWake for Count {
            fn wake_by_ref(arc_self: &Arc<Self>) {
                arc_self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let count = Arc::new(Count(Default::default()));
        let waker = futures::task::waker(count.clone());
        let mut cx = Context::from_waker(&waker);
        let wake = Arc::new(Wake::default());
        let mut wakes = stream(wake.clone(), None);
        assert!(wakes.as_mut().poll_next(&mut cx).is_pending());
        wake.pushed(None);
        assert_eq!(wakes.as_mut().poll_next(&mut cx), Poll::Ready(Some(())));
        let woken = count.0.load(std::sync::atomic::Ordering::SeqCst);
        tokio::time::advance(Duration::from_millis(150)).await;
        assert!(count.0.load(std::sync::atomic::Ordering::SeqCst) > woken);
    }

    #[tokio::test(start_paused = true)]
    async fn a_shared_queue_is_also_polled() {
        let wake = Arc::new(Wake::default());
        let mut wakes = stream(wake, Some(Duration::from_millis(150)));
        let start = Instant::now();
        assert_eq!(
            wakes_until(&mut wakes, start, 500).await,
            vec![150, 300, 450]
        );
    }
}
