//! Connections: at most [`ServerConfig::max_connections`] at once (beyond,
//! a JSON 503 and the connection is closed), each closed when a client
//! takes longer than [`ServerConfig::header_timeout`] to send a request's
//! head (from its first byte, or from the connection's opening) or pauses
//! that long within a body, or leaves it idle between requests for
//! [`ServerConfig::idle_timeout`]. HTTP/1.1 through hyper, as `axum::serve`
//! does, which has none of these limits.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::Router;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;

use crate::ServerConfig;

/// File descriptors kept for the index (segments, the log, refreshes) when
/// the connection limit is fitted under the process's descriptor limit.
pub const FD_RESERVE: u64 = 256;

/// Connections being refused at once (the 503 written, the request drained);
/// beyond that an extra connection is closed without an answer.
const REFUSING: usize = 64;

/// The limits a connection lives under.
#[derive(Debug, Clone, Copy)]
struct Limits {
    header: Duration,
    idle: Duration,
}

/// Where a connection is: waiting for a request (since a response ended),
/// receiving a request's head (since its first byte), or serving requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Head,
    Busy,
}

struct Activity {
    state: Mutex<(Phase, Instant, usize)>,
    changed: Notify,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new((Phase::Head, Instant::now(), 0)),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Phase, Instant, usize)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn read(&self) {
        let mut st = self.lock();
        if st.0 == Phase::Idle {
            *st = (Phase::Head, Instant::now(), st.2);
            drop(st);
            self.changed.notify_one();
        }
    }

    fn wrote(&self) {
        let mut st = self.lock();
        if st.0 == Phase::Idle {
            st.1 = Instant::now();
        }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        {
            let mut st = self.lock();
            *st = (Phase::Busy, Instant::now(), st.2 + 1);
        }
        self.changed.notify_one();
        Busy(self.clone())
    }

    /// When the connection is to be closed unless something happens.
    fn deadline(&self, limits: Limits) -> Option<Instant> {
        let st = self.lock();
        match st.0 {
            Phase::Idle => st.1.checked_add(limits.idle),
            Phase::Head => st.1.checked_add(limits.header),
            Phase::Busy => None,
        }
    }
}

/// A request in progress on its connection.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        {
            let mut st = self.0.lock();
            st.2 -= 1;
            if st.2 == 0 {
                *st = (Phase::Idle, Instant::now(), 0);
            }
        }
        self.0.changed.notify_one();
    }
}

/// A socket that reports its reads and writes to its connection's
/// activity, and turns hyper's own answers to requests it cannot parse
/// (a bare 400, 414 or 431) into JSON errors.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
    /// An answer being written in place of hyper's: the bytes, how many are
    /// written, and the length of the buffer they stand for.
    replacing: Option<(Vec<u8>, usize, usize)>,
}

/// The JSON answer standing for `buf` when `buf` is exactly one of hyper's
/// automatic error answers: a 4xx head with `content-length: 0` and
/// nothing after it (every answer of the router with a 4xx status has a
/// JSON body, see `json_errors`).
fn replacement(buf: &[u8]) -> Option<Vec<u8>> {
    if !buf.starts_with(b"HTTP/1.1 4") || !buf.ends_with(b"\r\n\r\n") {
        return None;
    }
    let head = std::str::from_utf8(buf).ok()?;
    if head.matches("\r\n\r\n").count() != 1 || !head.to_ascii_lowercase().contains("\r\ncontent-length: 0\r\n") {
        return None;
    }
    let status_line = head.split("\r\n").next()?;
    let status: u16 = status_line.get(9..12)?.parse().ok()?;
    let (kind, what) = match status {
        431 => ("header_too_large", "its headers are too large"),
        414 => ("uri_too_long", "its URI is too long"),
        _ => ("bad_request", "it is not valid HTTP/1.1"),
    };
    let body = serde_json::json!({
        "error": { "type": kind, "reason": format!("the request could not be read: {what}") },
        "status": status,
    })
    .to_string();
    Some(
        format!(
            "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(r, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.read();
        }
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.replacing.is_none() {
            this.replacing = replacement(buf).map(|r| (r, 0, buf.len()));
        }
        if let Some((bytes, written, stands_for)) = &mut this.replacing {
            while *written < bytes.len() {
                match Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *written += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            let n = *stands_for;
            this.replacing = None;
            return Poll::Ready(Ok(n));
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.wrote();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// A request body that fails when the client pauses longer than `gap`
/// between two pieces of it (the handler answers 400 and the connection
/// closes).
pub struct PacedBody {
    inner: Incoming,
    gap: Duration,
    timer: Pin<Box<tokio::time::Sleep>>,
}

impl PacedBody {
    fn new(inner: Incoming, gap: Duration) -> PacedBody {
        PacedBody {
            inner,
            gap,
            timer: Box::pin(tokio::time::sleep(gap)),
        }
    }
}

impl Body for PacedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(r) => {
                let next = Instant::now() + this.gap;
                this.timer.as_mut().reset(next);
                Poll::Ready(r.map(|f| f.map_err(Into::into)))
            }
            Poll::Pending => match this.timer.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(format!(
                    "the request body paused for more than {} ms",
                    this.gap.as_millis()
                )
                .into()))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The connection limit fitted under the process's file-descriptor limit
/// (raising its soft limit towards the hard one first), keeping
/// [`FD_RESERVE`] descriptors for the index.
pub fn fit_connections(wanted: usize) -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the rlimit it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return wanted;
    }
    let need = (wanted as u64).saturating_add(FD_RESERVE);
    if lim.rlim_cur != libc::RLIM_INFINITY && lim.rlim_cur < need {
        let raised = libc::rlimit {
            rlim_cur: if lim.rlim_max == libc::RLIM_INFINITY {
                need
            } else {
                need.min(lim.rlim_max)
            },
            rlim_max: lim.rlim_max,
        };
        // SAFETY: setrlimit only reads the rlimit it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            lim.rlim_cur = raised.rlim_cur;
        }
    }
    fit_under(wanted, lim.rlim_cur)
}

/// `wanted` connections, at most `fd_limit` less [`FD_RESERVE`] (at least 1).
fn fit_under(wanted: usize, fd_limit: u64) -> usize {
    if fd_limit == libc::RLIM_INFINITY {
        return wanted;
    }
    let room = fd_limit.saturating_sub(FD_RESERVE).max(1);
    wanted.min(usize::try_from(room).unwrap_or(usize::MAX))
}

/// Serves `router` on `listener` until `shutdown`, then lets the requests
/// in flight finish and waits for every connection to close.
pub(crate) async fn serve(
    listener: TcpListener,
    router: Router,
    config: &ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let max = fit_connections(config.max_connections.max(1));
    if max < config.max_connections {
        tracing::warn!(
            "at most {max} connections (not {}): the file-descriptor limit is too low",
            config.max_connections
        );
    }
    let max = max.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
    let limits = Limits {
        header: config.header_timeout,
        idle: config.idle_timeout,
    };
    let open = Arc::new(Semaphore::new(max));
    let refusing = Arc::new(Semaphore::new(REFUSING));
    let (stop_tx, stop_rx) = watch::channel(false);
    let service = TowerToHyperService::new(router);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors or memory, or a connection that went
                // away while queued: wait a little rather than spin.
                if !matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted
                ) {
                    tracing::warn!("accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        match open.clone().try_acquire_owned() {
            Ok(permit) => {
                let service = service.clone();
                let stop = stop_rx.clone();
                tokio::spawn(async move {
                    connection(stream, service, limits, stop).await;
                    drop(permit);
                });
            }
            Err(_) => {
                if let Ok(permit) = refusing.clone().try_acquire_owned() {
                    tokio::spawn(async move {
                        refuse(stream, max).await;
                        drop(permit);
                    });
                }
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let _all_closed = open.acquire_many(max as u32).await;
    Ok(())
}

async fn connection(
    stream: TcpStream,
    router: TowerToHyperService<Router>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) {
    let activity = Arc::new(Activity::new());
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: activity.clone(),
        replacing: None,
    });
    let service = {
        let activity = activity.clone();
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            let busy = activity.begin();
            let req = req.map(|b| axum::body::Body::new(PacedBody::new(b, limits.header)));
            let answer = hyper::service::Service::call(&router, req);
            async move {
                let r = answer.await;
                drop(busy);
                r
            }
        })
    };
    // Heads and bodies are written flattened, one buffer at a time, so
    // that hyper's own error answers can be recognised (see `replacement`).
    let conn = hyper::server::conn::http1::Builder::new()
        .writev(false)
        .serve_connection(io, service);
    tokio::pin!(conn);
    let mut stopping = *stop.borrow();
    if stopping {
        conn.as_mut().graceful_shutdown();
    }
    loop {
        let deadline = activity.deadline(limits);
        let changed = activity.changed.notified();
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!("connection closed: {e}");
                }
                return;
            }
            _ = stop.changed(), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = changed => {}
            _ = tokio::time::sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {
                if activity.deadline(limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!("closing a connection idle or slow for too long");
                    return;
                }
            }
        }
    }
}

/// Answers a connection over the limit with a JSON 503 and closes it,
/// reading what the client sent first so that the answer is not lost to a
/// reset.
async fn refuse(mut stream: TcpStream, max: usize) {
    let body = serde_json::json!({
        "error": {
            "type": "too_many_connections",
            "reason": format!("the server already holds its maximum of {max} connections; retry later"),
        },
        "status": 503,
    })
    .to_string();
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        if stream.write_all(answer.as_bytes()).await.is_err() {
            return;
        }
        let _ = stream.shutdown().await;
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < 64 << 10 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_fits_under_the_descriptor_limit() {
        assert_eq!(fit_under(1024, 1024), 768);
        assert_eq!(fit_under(1024, 65536), 1024);
        assert_eq!(fit_under(1024, 100), 1);
        assert_eq!(fit_under(10, libc::RLIM_INFINITY), 10);
        assert!(fit_connections(1024) >= 1);
    }

    #[test]
    fn only_hypers_bare_error_answers_are_replaced() {
        let bare = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n";
        let r = String::from_utf8(replacement(bare).unwrap()).unwrap();
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(
            (v["status"].as_u64(), v["error"]["type"].as_str()),
            (Some(400), Some("bad_request"))
        );
        let big = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert!(String::from_utf8(replacement(big).unwrap())
            .unwrap()
            .contains("header_too_large"));
        for kept in [
            &b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"[..],
            b"HTTP/1.1 404 Not Found\r\ncontent-length: 12\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nHTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
            b"{\"title\": \"HTTP/1.1 400\"}",
        ] {
            assert_eq!(replacement(kept), None, "{}", String::from_utf8_lossy(kept));
        }
    }
}
