//! Who may do what: authentication (API keys and basic-auth users, each
//! with a role, from a JSON file), the refusal of cross-origin browser
//! requests unless CORS allows them, and the content type a write must
//! declare.
//!
//! Routes fall into four classes ([`Access`]): `/health` is open; searches,
//! counts, `/stats`, `GET /` and `HEAD /{index}` need the `read` role;
//! document writes and refreshes need `write`; everything else (`/flush`,
//! `PUT /{index}`, `/metrics`, and any route added later) needs `admin`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::{self, HeaderName, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::{ApiError, AppState};

/// What a principal may do; each role includes the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Searches, counts, `/stats`, `GET /`, `HEAD /{index}`.
    Read,
    /// Read, plus document writes and refreshes.
    Write,
    /// Everything: flushes, index creation, `/metrics`.
    Admin,
}

impl Role {
    /// `read`, `write` or `admin`.
    pub fn name(self) -> &'static str {
        match self {
            Role::Read => "read",
            Role::Write => "write",
            Role::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "read" => Ok(Role::Read),
            "write" => Ok(Role::Write),
            "admin" => Ok(Role::Admin),
            other => Err(format!("unknown role `{other}` (read, write, admin)")),
        }
    }
}

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// Anyone (`/health`).
    Open,
    /// At least [`Role::Read`].
    Read,
    /// At least [`Role::Write`].
    Write,
    /// [`Role::Admin`].
    Admin,
}

impl Access {
    fn role(self) -> Option<Role> {
        match self {
            Access::Open => None,
            Access::Read => Some(Role::Read),
            Access::Write => Some(Role::Write),
            Access::Admin => Some(Role::Admin),
        }
    }
}

/// What `method` on the route `route` (its pattern; `None` when no route
/// matched) needs. Routes not named here need `admin`, so that a new route
/// is closed until it is classified.
pub fn access(method: &Method, route: Option<&str>) -> Access {
    let reads = method == Method::GET || method == Method::HEAD || method == Method::POST;
    match route {
        Some("/health") => Access::Open,
        Some("/") if method == Method::GET || method == Method::HEAD => Access::Read,
        Some("/stats" | "/search" | "/{index}/_search" | "/{index}/_count" | "/_search" | "/{index}/_pit") if reads => {
            Access::Read
        }
        // Scrolls and points in time are a reader's own views.
        Some("/_search/scroll" | "/_search/scroll/{id}" | "/_pit") => Access::Read,
        Some("/{index}") if method == Method::HEAD || method == Method::GET => Access::Read,
        Some(
            "/{index}/_settings"
            | "/_cat/indices"
            | "/_cat/indices/{index}"
            | "/_cat/health"
            | "/_cat/aliases"
            | "/_cluster/health"
            | "/_cluster/health/{index}"
            | "/_alias"
            | "/_alias/{name}"
            | "/{index}/_alias"
            | "/{index}/_aliases",
        ) if method == Method::GET || method == Method::HEAD => Access::Read,
        Some("/_aliases" | "/{index}/_alias/{name}") if method == Method::GET || method == Method::HEAD => Access::Read,
        Some("/{index}/_doc/{id}") if method == Method::GET || method == Method::HEAD => Access::Read,
        Some("/_mget" | "/{index}/_mget") if reads => Access::Read,
        Some("/{index}/_mapping") if method == Method::GET => Access::Read,
        Some(
            "/docs"
            | "/docs/{id}"
            | "/{index}/_doc"
            | "/{index}/_doc/{id}"
            | "/_bulk"
            | "/{index}/_bulk"
            | "/refresh"
            | "/{index}/_refresh"
            | "/{index}/_update/{id}"
            | "/{index}/_delete_by_query"
            | "/{index}/_create/{id}",
        ) => Access::Write,
        // An unknown path: whoever may read learns it is not there.
        None => Access::Read,
        Some(_) => Access::Admin,
    }
}

/// The authentication file (JSON): API keys and users, each with the
/// argon2 hash (PHC string) of its secret and a role.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    #[serde(default)]
    api_keys: Vec<KeyEntry>,
    #[serde(default)]
    users: Vec<UserEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    id: String,
    hash: String,
    role: Role,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserEntry {
    name: String,
    hash: String,
    role: Role,
}

/// An authenticated principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    /// `user NAME` or `api key ID`.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// Credentials that were checked, by the SHA-256 of the `Authorization`
/// header that carried them (at most this many, then forgotten).
const VERIFIED_CACHE: usize = 10_000;

/// API keys and users allowed in, from an authentication file.
pub struct Auth {
    keys: HashMap<String, (String, Role)>,
    users: HashMap<String, (String, Role)>,
    /// Checked against when the name is unknown, so that an unknown name
    /// takes as long to refuse as a wrong secret.
    dummy: String,
    verified: Mutex<HashMap<[u8; 32], Option<Principal>>>,
    /// Argon2 verifications at once (each takes tens of milliseconds of CPU).
    verifying: tokio::sync::Semaphore,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("api_keys", &self.keys.keys().collect::<Vec<_>>())
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// 401: no credentials, malformed ones or wrong ones.
    Unauthenticated(String),
    /// 403: the principal's role is not enough.
    Forbidden(String),
}

impl Auth {
    /// Reads an authentication file (JSON, see [`Auth::from_json`]).
    pub fn load(path: &Path) -> Result<Auth, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        Auth::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses an authentication file:
    /// `{"api_keys": [{"id", "hash", "role"}], "users": [{"name", "hash", "role"}]}`,
    /// hashes being argon2 PHC strings (see [`hash_secret`]), roles `read`,
    /// `write` or `admin`. Unknown fields, plain-text secrets, duplicate
    /// names and an empty file are refused.
    pub fn from_json(text: &str) -> Result<Auth, String> {
        let file: AuthFile = serde_json::from_str(text).map_err(|e| format!("bad authentication file: {e}"))?;
        if file.api_keys.is_empty() && file.users.is_empty() {
            return Err("the authentication file names no API key and no user".into());
        }
        let mut keys = HashMap::new();
        for k in file.api_keys {
            check_name("API key id", &k.id)?;
            check_hash(&k.id, &k.hash)?;
            if keys.insert(k.id.clone(), (k.hash, k.role)).is_some() {
                return Err(format!("API key id `{}` appears twice", k.id));
            }
        }
        let mut users = HashMap::new();
        for u in file.users {
            check_name("user name", &u.name)?;
            check_hash(&u.name, &u.hash)?;
            if users.insert(u.name.clone(), (u.hash, u.role)).is_some() {
                return Err(format!("user `{}` appears twice", u.name));
            }
        }
        let parallel = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Auth {
            keys,
            users,
            dummy: hash_secret("not a secret anyone has").map_err(|e| e.to_string())?,
            verified: Mutex::new(HashMap::new()),
            verifying: tokio::sync::Semaphore::new((parallel / 4).max(1)),
        })
    }

    /// The principal the `Authorization` header names, if its secret is right.
    pub async fn authenticate(&self, header: Option<&HeaderValue>) -> Result<Principal, Refused> {
        let Some(header) = header else {
            return Err(Refused::Unauthenticated("missing authentication credentials".into()));
        };
        let digest: [u8; 32] = Sha256::digest(header.as_bytes()).into();
        let known = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&digest)
            .cloned();
        let found = match known {
            Some(found) => found,
            None => {
                let (kind, name, secret) = parse_authorization(header)?;
                let (table, label) = match kind {
                    Scheme::Basic => (&self.users, "user"),
                    Scheme::Key => (&self.keys, "api key"),
                };
                let (hash, role) = match table.get(&name) {
                    Some((hash, role)) => (hash.clone(), Some(*role)),
                    None => (self.dummy.clone(), None),
                };
                let _permit = self
                    .verifying
                    .acquire()
                    .await
                    .map_err(|_| Refused::Unauthenticated("the server is stopping".into()))?;
                let ok = tokio::task::spawn_blocking(move || verify_secret(&secret, &hash))
                    .await
                    .unwrap_or(false);
                let found = match (ok, role) {
                    (true, Some(role)) => Some(Principal {
                        name: format!("{label} {name}"),
                        role,
                    }),
                    _ => None,
                };
                let mut cache = self.verified.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= VERIFIED_CACHE {
                    cache.clear();
                }
                cache.insert(digest, found.clone());
                found
            }
        };
        found.ok_or_else(|| Refused::Unauthenticated("unable to authenticate with the credentials given".into()))
    }

    /// Checks that a request needing `need` may run with `header`.
    pub async fn authorize(&self, need: Access, header: Option<&HeaderValue>) -> Result<(), Refused> {
        let Some(role) = need.role() else {
            return Ok(());
        };
        let p = self.authenticate(header).await?;
        if p.role < role {
            return Err(Refused::Forbidden(format!(
                "{} has the role [{}]; this request needs [{}]",
                p.name,
                p.role.name(),
                role.name()
            )));
        }
        Ok(())
    }
}

fn check_name(what: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.contains(':') || name.chars().any(char::is_control) {
        return Err(format!(
            "{what} `{name}` must be non-empty, without `:` or control characters"
        ));
    }
    Ok(())
}

fn check_hash(name: &str, hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash).map_err(|e| {
        format!("the hash of `{name}` is not a PHC string ({e}); make one with `tierdex serve --hash-password`")
    })?;
    if !parsed.algorithm.as_str().starts_with("argon2") {
        return Err(format!(
            "the hash of `{name}` uses {}; only argon2 hashes are accepted",
            parsed.algorithm
        ));
    }
    Ok(())
}

enum Scheme {
    Basic,
    Key,
}

/// `Basic base64(user:password)`, `ApiKey base64(id:key)` or
/// `Bearer base64(id:key)`.
fn parse_authorization(header: &HeaderValue) -> Result<(Scheme, String, String), Refused> {
    let bad = |why: &str| Refused::Unauthenticated(format!("malformed Authorization header: {why}"));
    let text = header.to_str().map_err(|_| bad("not ASCII"))?;
    let (scheme, rest) = text
        .trim()
        .split_once(' ')
        .ok_or_else(|| bad("expected `SCHEME CREDENTIALS`"))?;
    let kind = match scheme.to_ascii_lowercase().as_str() {
        "basic" => Scheme::Basic,
        "apikey" | "bearer" => Scheme::Key,
        _ => return Err(bad("the scheme is not Basic, ApiKey or Bearer")),
    };
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .map_err(|_| bad("the credentials are not base64"))?;
    let decoded = String::from_utf8(decoded).map_err(|_| bad("the credentials are not UTF-8"))?;
    let (name, secret) = decoded
        .split_once(':')
        .ok_or_else(|| bad("the credentials are not `name:secret`"))?;
    Ok((kind, name.to_string(), secret.to_string()))
}

fn verify_secret(secret: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(secret.as_bytes(), &h).is_ok())
}

/// `n` random bytes from the operating system.
fn random_bytes(n: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = vec![0; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf)
}

/// The argon2id hash (PHC string, default parameters: 19 MiB, 2 passes) of
/// `secret`, with a random salt: what the authentication file stores.
pub fn hash_secret(secret: &str) -> std::io::Result<String> {
    let salt = SaltString::encode_b64(&random_bytes(16)?).map_err(std::io::Error::other)?;
    Argon2::default()
        .hash_password(secret.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(std::io::Error::other)
}

/// A new API key for `id`: (the secret, the value of the `Authorization`
/// header that presents it, after `ApiKey ` or `Bearer `).
pub fn new_api_key(id: &str) -> std::io::Result<(String, String)> {
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random_bytes(24)?);
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
    Ok((secret, encoded))
}

/// One `--cors-allow-origin` rule, as Elasticsearch's
/// `http.cors.allow-origin`: `*`, an exact origin, or `/regex/` (matching
/// the whole origin).
#[derive(Debug, Clone)]
pub enum OriginRule {
    /// Every origin.
    Any,
    /// This origin (compared without regard to case).
    Exact(String),
    /// Origins the expression matches whole.
    Pattern(regex::Regex),
}

impl std::str::FromStr for OriginRule {
    type Err = String;

    fn from_str(s: &str) -> Result<OriginRule, String> {
        let s = s.trim();
        if s == "*" {
            Ok(OriginRule::Any)
        } else if s.len() >= 2 && s.starts_with('/') && s.ends_with('/') {
            regex::Regex::new(&format!("^(?:{})$", &s[1..s.len() - 1]))
                .map(OriginRule::Pattern)
                .map_err(|e| format!("bad origin pattern {s}: {e}"))
        } else if s.is_empty() {
            Err("an empty origin".into())
        } else {
            Ok(OriginRule::Exact(s.trim_end_matches('/').to_ascii_lowercase()))
        }
    }
}

impl OriginRule {
    fn matches(&self, origin: &str) -> bool {
        match self {
            OriginRule::Any => true,
            OriginRule::Exact(o) => o.eq_ignore_ascii_case(origin),
            OriginRule::Pattern(r) => r.is_match(origin),
        }
    }
}

/// Cross-origin requests, as Elasticsearch's `http.cors.*` settings. With
/// no `allow_origin` rule (the default: CORS disabled) every request that
/// carries an `Origin` header is refused with 403; with rules, requests
/// from a matching origin get the CORS headers and their preflights are
/// answered, and the others are refused.
#[derive(Debug, Clone)]
pub struct Cors {
    /// Origins allowed (`http.cors.allow-origin`); empty: none.
    pub allow_origin: Vec<OriginRule>,
    /// Methods allowed (`http.cors.allow-methods`).
    pub allow_methods: Vec<Method>,
    /// Request headers allowed (`http.cors.allow-headers`).
    pub allow_headers: Vec<HeaderName>,
    /// Whether browsers may send credentials (`http.cors.allow-credentials`).
    pub allow_credentials: bool,
    /// How long browsers may keep a preflight's answer (`http.cors.max-age`).
    pub max_age: Duration,
}

impl Default for Cors {
    /// Elasticsearch's defaults, no origin allowed.
    fn default() -> Cors {
        Cors {
            allow_origin: Vec::new(),
            allow_methods: [
                Method::OPTIONS,
                Method::HEAD,
                Method::GET,
                Method::POST,
                Method::PUT,
                Method::DELETE,
            ]
            .into(),
            allow_headers: [
                "x-requested-with",
                "content-type",
                "content-length",
                "authorization",
                "accept",
                "user-agent",
                "x-elastic-client-meta",
            ]
            .map(HeaderName::from_static)
            .into(),
            allow_credentials: false,
            max_age: Duration::from_secs(1_728_000),
        }
    }
}

impl Cors {
    /// True when some origin is allowed.
    pub fn enabled(&self) -> bool {
        !self.allow_origin.is_empty()
    }

    fn allows(&self, origin: &str) -> bool {
        self.allow_origin.iter().any(|r| r.matches(origin))
    }

    fn allow_origin_value(&self, origin: &HeaderValue) -> HeaderValue {
        let any = self.allow_origin.iter().any(|r| matches!(r, OriginRule::Any));
        if any && !self.allow_credentials {
            HeaderValue::from_static("*")
        } else {
            origin.clone()
        }
    }

    fn decorate(&self, origin: &HeaderValue, resp: &mut Response) {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, self.allow_origin_value(origin));
        h.append(header::VARY, HeaderValue::from_static("origin"));
        if self.allow_credentials {
            h.insert(
                header::ACCESS_CONTROL_ALLOW_CREDENTIALS,
                HeaderValue::from_static("true"),
            );
        }
    }

    fn list<T: AsRef<str>>(items: &[T]) -> HeaderValue {
        let joined = items.iter().map(|i| i.as_ref()).collect::<Vec<_>>().join(", ");
        HeaderValue::from_str(&joined).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

fn forbidden_origin(origin: &str, why: &str) -> Response {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "cross_origin_refused",
        format!("cross-origin request from [{origin}] refused: {why}"),
    )
    .into_response()
}

/// What guards an HTTP service without an [`AppState`] (the cluster
/// broker): its authentication file and its CORS rules, applied by
/// [`guard_auth`] and [`guard_cors`] as a server's are.
#[derive(Default)]
pub struct Guard {
    /// API keys and users (`None`: no authentication).
    pub auth: Option<Arc<Auth>>,
    /// Cross-origin rules (the default refuses every `Origin`).
    pub cors: Cors,
}

/// Middleware: refuses requests from origins CORS does not allow, answers
/// preflights, and adds the CORS headers to allowed cross-origin answers.
pub async fn cors(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    apply_cors(&state.config().cors, req, next).await
}

/// [`cors`] with a [`Guard`]'s rules.
pub async fn guard_cors(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    apply_cors(&guard.cors, req, next).await
}

async fn apply_cors(cors: &Cors, req: Request, next: Next) -> Response {
    let Some(origin) = req.headers().get(header::ORIGIN).cloned() else {
        return next.run(req).await;
    };
    let shown = String::from_utf8_lossy(origin.as_bytes()).into_owned();
    if !cors.enabled() {
        return forbidden_origin(
            &shown,
            "CORS is disabled on this server (allow origins with --cors-allow-origin)",
        );
    }
    if !origin.to_str().is_ok_and(|o| cors.allows(o)) {
        return forbidden_origin(&shown, "the origin is not allowed (--cors-allow-origin)");
    }
    let preflight = req
        .headers()
        .get(header::ACCESS_CONTROL_REQUEST_METHOD)
        .map(|m| Method::from_bytes(m.as_bytes()));
    let method = match (req.method() == Method::OPTIONS, preflight) {
        (true, Some(m)) => m.ok(),
        _ => Some(req.method().clone()),
    };
    if !method.as_ref().is_some_and(|m| cors.allow_methods.contains(m)) {
        return forbidden_origin(&shown, "the method is not allowed (--cors-allow-methods)");
    }
    if req.method() == Method::OPTIONS && req.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD) {
        let mut resp = StatusCode::OK.into_response();
        cors.decorate(&origin, &mut resp);
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_METHODS, Cors::list(&cors.allow_methods));
        h.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, Cors::list(&cors.allow_headers));
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from(cors.max_age.as_secs()),
        );
        return resp;
    }
    let mut resp = next.run(req).await;
    cors.decorate(&origin, &mut resp);
    resp
}

fn route_access(req: &Request) -> Access {
    access(
        req.method(),
        req.extensions().get::<MatchedPath>().map(MatchedPath::as_str),
    )
}

/// Middleware: authentication and roles (when the server has an
/// authentication file). 401 with `WWW-Authenticate` for missing or wrong
/// credentials, 403 for a role that is not enough.
pub async fn authenticate(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    match &state.config().auth {
        Some(auth) => apply_auth(auth, req, next).await,
        None => next.run(req).await,
    }
}

/// [`authenticate`] with a [`Guard`]'s authentication file.
pub async fn guard_auth(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    match &guard.auth {
        Some(auth) => apply_auth(auth, req, next).await,
        None => next.run(req).await,
    }
}

async fn apply_auth(auth: &Auth, req: Request, next: Next) -> Response {
    match auth
        .authorize(route_access(&req), req.headers().get(header::AUTHORIZATION))
        .await
    {
        Ok(()) => next.run(req).await,
        Err(Refused::Unauthenticated(why)) => {
            let mut resp = ApiError::new(
                StatusCode::UNAUTHORIZED,
                "security_exception",
                format!("{why} for REST request [{}]", req.uri().path()),
            )
            .into_response();
            let h = resp.headers_mut();
            for v in [
                "Basic realm=\"tierdex\", charset=\"UTF-8\"",
                "ApiKey",
                "Bearer realm=\"tierdex\"",
            ] {
                h.append(header::WWW_AUTHENTICATE, HeaderValue::from_static(v));
            }
            resp
        }
        Err(Refused::Forbidden(why)) => ApiError::new(StatusCode::FORBIDDEN, "security_exception", why).into_response(),
    }
}

/// True for `application/json` and `application/x-ndjson` (any case, any
/// parameters).
/// JSON or NDJSON, including the Elasticsearch clients' versioned types
/// (`application/vnd.elasticsearch+json; compatible-with=9`).
fn is_json(v: &HeaderValue) -> bool {
    let Ok(s) = v.to_str() else { return false };
    let essence = s.split(';').next().unwrap_or("").trim();
    [
        "application/json",
        "application/x-ndjson",
        "application/vnd.elasticsearch+json",
        "application/vnd.elasticsearch+x-ndjson",
    ]
    .iter()
    .any(|t| essence.eq_ignore_ascii_case(t))
}

fn has_body(req: &Request) -> bool {
    let h = req.headers();
    h.contains_key(header::TRANSFER_ENCODING)
        || h.get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim() != "0")
}

/// Middleware: a request that writes must declare a JSON (or NDJSON)
/// content type, and one without a body must declare none other, so that
/// neither an HTML form nor a no-cors `fetch` can write.
pub async fn json_writes(req: Request, next: Next) -> Response {
    if route_access(&req) >= Access::Write {
        let ct = req.headers().get(header::CONTENT_TYPE);
        let ok = match ct {
            Some(v) => is_json(v),
            None => !has_body(&req),
        };
        if !ok {
            let shown = ct.map_or("none".into(), |v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            return ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "media_type_header_exception",
                format!(
                    "Content-Type header [{shown}] is not supported: writes take application/json (or application/x-ndjson)"
                ),
            )
            .into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(role: &str, secret: &str) -> String {
        let hash = hash_secret(secret).unwrap();
        serde_json::json!({
            "api_keys": [{"id": "ingest", "hash": hash, "role": role}],
            "users": [{"name": "ada", "hash": hash, "role": "read"}],
        })
        .to_string()
    }

    fn header(scheme: &str, name: &str, secret: &str) -> HeaderValue {
        let v = base64::engine::general_purpose::STANDARD.encode(format!("{name}:{secret}"));
        HeaderValue::from_str(&format!("{scheme} {v}")).unwrap()
    }

    #[tokio::test]
    async fn credentials_are_checked_against_hashes_and_roles() {
        let auth = Auth::from_json(&file("write", "s3cret")).unwrap();
        let key = header("ApiKey", "ingest", "s3cret");
        assert_eq!(
            auth.authenticate(Some(&key)).await.unwrap(),
            Principal {
                name: "api key ingest".into(),
                role: Role::Write
            }
        );
        // Cached: the same answer again.
        assert_eq!(auth.authenticate(Some(&key)).await.unwrap().role, Role::Write);
        assert!(auth.authorize(Access::Write, Some(&key)).await.is_ok());
        assert!(matches!(
            auth.authorize(Access::Admin, Some(&key)).await,
            Err(Refused::Forbidden(_))
        ));
        assert!(auth
            .authorize(Access::Read, Some(&header("Bearer", "ingest", "s3cret")))
            .await
            .is_ok());
        assert!(auth
            .authorize(Access::Read, Some(&header("Basic", "ada", "s3cret")))
            .await
            .is_ok());
        for bad in [
            header("ApiKey", "ingest", "wrong"),
            header("ApiKey", "nobody", "s3cret"),
            header("Basic", "ingest", "s3cret"),
            header("Digest", "ada", "s3cret"),
            HeaderValue::from_static("Basic !!!"),
            HeaderValue::from_static("ApiKey"),
        ] {
            for _ in 0..2 {
                assert!(
                    matches!(
                        auth.authorize(Access::Read, Some(&bad)).await,
                        Err(Refused::Unauthenticated(_))
                    ),
                    "{bad:?}"
                );
            }
        }
        assert!(matches!(
            auth.authorize(Access::Read, None).await,
            Err(Refused::Unauthenticated(_))
        ));
        assert!(auth.authorize(Access::Open, None).await.is_ok());
    }

    #[test]
    fn bad_authentication_files_are_refused() {
        let hash = hash_secret("x").unwrap();
        for bad in [
            "{}".to_string(),
            "not json".into(),
            serde_json::json!({"users": [{"name": "a", "password": "plain", "role": "read"}]}).to_string(),
            serde_json::json!({"users": [{"name": "a", "hash": "plain", "role": "read"}]}).to_string(),
            serde_json::json!({"users": [{"name": "a", "hash": hash, "role": "root"}]}).to_string(),
            serde_json::json!({"users": [{"name": "a:b", "hash": hash, "role": "read"}]}).to_string(),
            serde_json::json!({"users": [{"name": "a", "hash": hash, "role": "read"}, {"name": "a", "hash": hash, "role": "admin"}]}).to_string(),
            serde_json::json!({"api_keys": [{"id": "k", "hash": "$pbkdf2-sha256$i=1000$c2FsdA$aGFzaA", "role": "read"}]}).to_string(),
            serde_json::json!({"api_keys": [], "extra": 1}).to_string(),
        ] {
            assert!(Auth::from_json(&bad).is_err(), "{bad}");
        }
        let (secret, encoded) = new_api_key("k1").unwrap();
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), format!("k1:{secret}"));
        assert!(secret.len() >= 32);
    }

    #[test]
    fn routes_need_the_roles_the_issue_names() {
        use Access::*;
        let m = |s: &str| Method::from_bytes(s.as_bytes()).unwrap();
        for (method, route, want) in [
            ("GET", Some("/health"), Open),
            ("GET", Some("/"), Read),
            ("HEAD", Some("/"), Read),
            ("GET", Some("/search"), Read),
            ("POST", Some("/{index}/_search"), Read),
            ("GET", Some("/{index}/_count"), Read),
            ("GET", Some("/stats"), Read),
            ("HEAD", Some("/{index}"), Read),
            ("GET", None, Read),
            ("POST", Some("/docs"), Write),
            ("DELETE", Some("/docs/{id}"), Write),
            ("PUT", Some("/{index}/_doc/{id}"), Write),
            ("POST", Some("/_bulk"), Write),
            ("PUT", Some("/_bulk"), Write),
            ("PUT", Some("/{index}/_bulk"), Write),
            ("POST", Some("/refresh"), Write),
            ("GET", Some("/{index}/_refresh"), Write),
            ("POST", Some("/flush"), Admin),
            ("PUT", Some("/{index}"), Admin),
            ("DELETE", Some("/{index}"), Admin),
            ("GET", Some("/metrics"), Admin),
            ("POST", Some("/_forcemerge"), Admin),
            ("DELETE", Some("/search"), Admin),
        ] {
            assert_eq!(access(&m(method), route), want, "{method} {route:?}");
        }
    }

    #[test]
    fn origin_rules_match_as_elasticsearch_does() {
        let exact: OriginRule = "https://App.example".parse().unwrap();
        assert!(exact.matches("https://app.example"));
        assert!(!exact.matches("https://app.example.evil"));
        let re: OriginRule = "/https?://([a-z]+\\.)?example\\.org(:\\d+)?/".parse().unwrap();
        assert!(re.matches("http://www.example.org:8080"));
        assert!(!re.matches("http://www.example.org.evil"));
        assert!(matches!("*".parse::<OriginRule>().unwrap(), OriginRule::Any));
        assert!("/(/".parse::<OriginRule>().is_err());
    }
}
