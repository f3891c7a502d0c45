//! The per-process event log: one sequence counter over output chunks, exit and close, retained in a
//! bounded ring. The producer (the pipe reader) waits when the ring is full of events nobody has
//! released yet, so a slow or absent reader applies backpressure to the child instead of growing the
//! executor's memory. Events are released by acknowledgement (`require_ack` readers, via `Ack`) or,
//! while no reader asks for acknowledgements, once delivered. A reader asking for events that were
//! already discarded gets an explicit gap.

use std::collections::VecDeque;
use std::sync::Mutex;

use outpost_proto::pb;
use pb::process_event::Event;
use tokio::sync::{Notify, watch};

/// A retained event.
#[derive(Debug)]
struct Stored {
    seq: u64,
    event: Event,
    /// Output bytes before this event (for gap byte counts).
    offset: u64,
    bytes: usize,
}

#[derive(Debug)]
struct State {
    events: VecDeque<Stored>,
    bytes: usize,
    cap: usize,
    next_seq: u64,
    total_output: u64,
    /// Events with seq <= released may be discarded when space is needed.
    released: u64,
    /// Some reader asked for acknowledgement: only acks release events.
    ack_mode: bool,
    closed: bool,
    /// (seq, offset) of recently discarded events, consecutive, oldest first.
    discarded: VecDeque<(u64, u64)>,
}

/// How many discarded events are remembered for exact gap byte counts.
const DISCARD_HISTORY: usize = 4096;

/// What a reader gets from one [`OutputLog::read_after`].
#[derive(Debug, Default)]
pub(crate) struct Batch {
    /// Events to send, in order (a gap first when events were lost).
    pub(crate) events: Vec<pb::ProcessEvent>,
    /// The closed event is among `events`: the stream ends after them.
    pub(crate) finished: bool,
}

/// The event log of one process.
#[derive(Debug)]
pub(crate) struct OutputLog {
    state: Mutex<State>,
    appended: watch::Sender<u64>,
    space: Notify,
}

impl OutputLog {
    /// A log that retains up to `cap` bytes of output.
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            state: Mutex::new(State {
                events: VecDeque::new(),
                bytes: 0,
                cap: cap.max(1),
                next_seq: 1,
                total_output: 0,
                released: 0,
                ack_mode: false,
                closed: false,
                discarded: VecDeque::new(),
            }),
            appended: watch::channel(0).0,
            space: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock is a bug elsewhere; the log's data stays consistent because
        // every mutation completes before the guard drops, so keep serving.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Appends an output chunk, waiting for space while the ring is full of unreleased events.
    pub(crate) async fn push_output(&self, stream: pb::OutputStream, data: bytes::Bytes) {
        let len = data.len();
        let mut data = Some(data);
        loop {
            let notified = self.space.notified();
            {
                let mut st = self.lock();
                evict(&mut st, len);
                if st.bytes == 0 || st.bytes + len <= st.cap {
                    let data = data.take().unwrap_or_default();
                    let event = Event::Output(pb::Output {
                        stream: stream.into(),
                        data,
                    });
                    let seq = append(&mut st, event, len);
                    st.total_output += len as u64;
                    drop(st);
                    self.appended.send_replace(seq);
                    return;
                }
            }
            notified.await;
        }
    }

    /// Appends the exit event (never waits; it is small and must not be lost).
    pub(crate) fn push_exit(&self, exit: pb::Exit) {
        let seq = append(&mut self.lock(), Event::Exit(exit), 0);
        self.appended.send_replace(seq);
    }

    /// Appends the closed event; nothing follows it.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        if st.closed {
            return;
        }
        st.closed = true;
        let seq = append(&mut st, Event::Closed(pb::Closed {}), 0);
        drop(st);
        self.appended.send_replace(seq);
    }

    /// Highest sequence number appended so far.
    pub(crate) fn last_seq(&self) -> u64 {
        self.lock().next_seq - 1
    }

    /// Subscribes to appends (the value is the last seq).
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.appended.subscribe()
    }

    /// Switches the log to acknowledgement mode (a `require_ack` reader appeared).
    pub(crate) fn require_ack(&self) {
        self.lock().ack_mode = true;
    }

    /// Releases events up to `seq` (an Ack, or a delivery while not in ack mode).
    pub(crate) fn release(&self, seq: u64, is_ack: bool) {
        let mut st = self.lock();
        if is_ack || !st.ack_mode {
            st.released = st.released.max(seq);
        }
        drop(st);
        self.space.notify_waiters();
    }

    /// Up to `max` events after `cursor`, preceded by a gap when events after it were discarded.
    pub(crate) fn read_after(&self, cursor: u64, max: usize) -> Batch {
        let st = self.lock();
        let mut batch = Batch::default();
        let first = st.events.front().map_or(st.next_seq, |e| e.seq);
        if first > cursor + 1 {
            let (lost_from_offset, retained_offset) =
                (offset_after(&st, cursor), first_offset(&st));
            batch.events.push(pb::ProcessEvent {
                seq: first - 1,
                event: Some(Event::Gap(pb::Gap {
                    first_seq: cursor + 1,
                    last_seq: first - 1,
                    bytes_lost: retained_offset.saturating_sub(lost_from_offset),
                })),
            });
        }
        for stored in st.events.iter().filter(|e| e.seq > cursor).take(max) {
            batch.finished |= matches!(stored.event, Event::Closed(_));
            batch.events.push(pb::ProcessEvent {
                seq: stored.seq,
                event: Some(stored.event.clone()),
            });
        }
        batch
    }
}

fn append(st: &mut State, event: Event, bytes: usize) -> u64 {
    let seq = st.next_seq;
    st.next_seq += 1;
    st.events.push_back(Stored {
        seq,
        event,
        offset: st.total_output,
        bytes,
    });
    st.bytes += bytes;
    seq
}

/// Discards released events from the front until `incoming` more bytes fit.
fn evict(st: &mut State, incoming: usize) {
    while st.bytes + incoming > st.cap {
        match st.events.front() {
            Some(front) if front.seq <= st.released => {
                let (seq, offset, bytes) = (front.seq, front.offset, front.bytes);
                st.bytes -= bytes;
                st.events.pop_front();
                if st.discarded.len() == DISCARD_HISTORY {
                    st.discarded.pop_front();
                }
                st.discarded.push_back((seq, offset));
            }
            _ => return,
        }
    }
}

/// Output offset where the range lost by a reader at `cursor` began: exact while the discarded
/// event is still in the bounded history, otherwise the oldest offset we remember (the gap then
/// reports a lower bound of the bytes lost).
fn offset_after(st: &State, cursor: u64) -> u64 {
    let lost_first = cursor + 1;
    match st.discarded.front() {
        Some(&(oldest_seq, _)) if lost_first >= oldest_seq => {
            let index = usize::try_from(lost_first - oldest_seq).unwrap_or(usize::MAX);
            st.discarded
                .get(index)
                .map_or(first_offset(st), |&(_, offset)| offset)
        }
        Some(&(_, oldest_offset)) => oldest_offset,
        None => first_offset(st),
    }
}

fn first_offset(st: &State) -> u64 {
    st.events.front().map_or(st.total_output, |e| e.offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_of(e: &pb::ProcessEvent) -> Vec<u8> {
        match &e.event {
            Some(Event::Output(o)) => o.data.to_vec(),
            other => panic!("not output: {other:?}"),
        }
    }

    #[tokio::test]
    async fn events_share_one_counter_and_close_finishes() {
        let log = OutputLog::new(1024);
        log.push_output(pb::OutputStream::Stdout, bytes::Bytes::from_static(b"a"))
            .await;
        log.push_output(pb::OutputStream::Stderr, bytes::Bytes::from_static(b"b"))
            .await;
        log.push_exit(pb::Exit {
            code: Some(0),
            ..Default::default()
        });
        log.close();
        let batch = log.read_after(0, 100);
        let seqs: Vec<_> = batch.events.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4]);
        assert!(batch.finished);
        assert_eq!(log.read_after(2, 100).events.len(), 2, "resume after seq 2");
    }

    #[tokio::test(start_paused = true)]
    async fn full_ring_blocks_the_producer_until_released() {
        let log = std::sync::Arc::new(OutputLog::new(10));
        log.push_output(pb::OutputStream::Stdout, bytes::Bytes::from(vec![1; 6]))
            .await;
        let producer = {
            let log = log.clone();
            tokio::spawn(async move {
                log.push_output(pb::OutputStream::Stdout, bytes::Bytes::from(vec![2; 6]))
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(
            !producer.is_finished(),
            "no space and nothing released: the producer waits"
        );
        assert_eq!(log.last_seq(), 1);
        log.release(1, false);
        producer.await.unwrap();
        let batch = log.read_after(0, 10);
        // Seq 1 was released and evicted: a reader from the start sees a gap, then seq 2.
        assert!(matches!(
            batch.events[0].event,
            Some(Event::Gap(pb::Gap {
                first_seq: 1,
                last_seq: 1,
                bytes_lost: 6
            }))
        ));
        assert_eq!(data_of(&batch.events[1]), vec![2; 6]);
    }

    #[tokio::test(start_paused = true)]
    async fn ack_mode_ignores_plain_deliveries() {
        let log = std::sync::Arc::new(OutputLog::new(10));
        log.require_ack();
        log.push_output(pb::OutputStream::Stdout, bytes::Bytes::from(vec![1; 6]))
            .await;
        log.release(1, false); // an observer stream delivered it; not an ack
        let producer = {
            let log = log.clone();
            tokio::spawn(async move {
                log.push_output(pb::OutputStream::Stdout, bytes::Bytes::from(vec![2; 6]))
                    .await
            })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!producer.is_finished());
        log.release(1, true);
        producer.await.unwrap();
    }
}
