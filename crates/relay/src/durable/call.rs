//! The one way a request reaches a Durable Object's `fetch` protocol: the
//! Rust client, the alarm's target calls, the reference Worker's front door,
//! directory and benchmark, and the embedded example all build their stub
//! calls here, so the URL form, the method, the body and the headers are
//! written once.
//!
//! The URL's host is never read by the objects (they route on the path), so
//! every call uses the same one. Every call says which protocol version
//! its sender speaks ([`PROTOCOL_HEADER`]), as every object's reply does
//! ([`announce`]), so a peer of a later release knows what it may send.

use worker::{Headers, Method, ObjectNamespace, Request, RequestInit, Response, Stub};

use crate::protocol::{PROTOCOL_HEADER, PROTOCOL_VERSION};
use crate::routes::{SourceOp, TargetOp};

/// The origin of every stub call's URL; objects route on the path alone.
const STUB_ORIGIN: &str = "https://relay";

/// One request to one Durable Object: method, path (with its query), body
/// and headers.
#[derive(Debug)]
pub struct StubCall {
    /// The HTTP method.
    method: Method,
    /// The path in the object's protocol, with its query, starting `/`.
    path: String,
    /// The body (JSON text), if any.
    body: Option<String>,
    /// Extra headers, in order.
    headers: Vec<(String, String)>,
}

/// A stub call's answer, read whole.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StubReply {
    /// The HTTP status.
    pub status: u16,
    /// `Retry-After` in seconds, when the object sent one.
    pub retry_after_s: Option<u32>,
    /// The body as text.
    pub text: String,
}

impl StubCall {
    /// A call of `method` on `path` (with its query), without a body.
    pub fn new(method: Method, path: impl Into<String>) -> StubCall {
        let path = path.into();
        debug_assert!(path.starts_with('/'), "a stub path starts with /: {path}");
        StubCall { method, path, body: None, headers: Vec::new() }
    }

    /// The call a source's protocol defines for `op`.
    pub fn source(op: &SourceOp) -> StubCall {
        StubCall::new(Method::from(op.method().to_owned()), op.path())
    }

    /// The call a target's protocol defines for `op`.
    pub fn target(op: &TargetOp) -> StubCall {
        StubCall::new(Method::from(op.method().to_owned()), op.path())
    }

    /// With this body (JSON text); `None` leaves it empty.
    pub fn body(mut self, body: Option<String>) -> StubCall {
        self.body = body;
        self
    }

    /// With this header.
    pub fn header(mut self, name: &str, value: impl Into<String>) -> StubCall {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// The path (with its query) the call is for.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sends the call to `stub`.
    pub async fn send(self, stub: &Stub) -> worker::Result<Response> {
        crate::work::stub_call();
        crate::work::body_out(self.body.as_ref().map_or(0, String::len));
        let mut init = RequestInit::new();
        init.with_method(self.method).with_body(self.body.map(Into::into));
        let set = Headers::new();
        set.set(PROTOCOL_HEADER, &PROTOCOL_VERSION.to_string())?;
        for (name, value) in &self.headers {
            set.set(name, value)?;
        }
        init.with_headers(set);
        let req = Request::new_with_init(&format!("{STUB_ORIGIN}{}", self.path), &init)?;
        stub.fetch_with_request(req).await
    }

    /// Sends the call to the object named `object` in `namespace`.
    pub async fn send_to(self, namespace: &ObjectNamespace, object: &str) -> worker::Result<Response> {
        let stub = namespace.id_from_name(object)?.get_stub()?;
        self.send(&stub).await
    }

    /// Sends the call to `stub` and reads the answer whole.
    pub async fn read(self, stub: &Stub) -> worker::Result<StubReply> {
        let mut resp = self.send(stub).await?;
        StubReply::read(&mut resp).await
    }

    /// Sends the call to the object named `object` in `namespace` and reads
    /// the answer whole.
    pub async fn read_from(self, namespace: &ObjectNamespace, object: &str) -> worker::Result<StubReply> {
        let mut resp = self.send_to(namespace, object).await?;
        StubReply::read(&mut resp).await
    }
}

/// `resp` (a reply of an object's protocol) saying which protocol version
/// this build speaks, in [`PROTOCOL_HEADER`]. A response whose headers are
/// immutable (one passed through from elsewhere) is answered unchanged.
pub fn announce(mut resp: Response) -> Response {
    let _ = resp.headers_mut().set(PROTOCOL_HEADER, &PROTOCOL_VERSION.to_string());
    resp
}

impl StubReply {
    /// Reads `resp` whole.
    pub async fn read(resp: &mut Response) -> worker::Result<StubReply> {
        let status = resp.status_code();
        let retry_after_s =
            resp.headers().get("retry-after").ok().flatten().and_then(|v| v.trim().parse().ok());
        let text = resp.text().await?;
        crate::work::body_in(text.len());
        Ok(StubReply { status, retry_after_s, text })
    }
}
