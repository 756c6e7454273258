//! `MCP_SERVERS`: a JSON list of `{name, url, headers?, allow?, forward_user?}`, read strictly so that a typo is an
//! error at cold start rather than a server quietly left out.

use std::collections::HashSet;
use std::fmt;

use http::{HeaderName, HeaderValue};
use serde_json::Value;

/// The header that carries the caller's owner id to a server whose entry sets `forward_user`.
pub const USER_HEADER: &str = "x-chat-user";

/// Header names the MCP transport sets itself: rmcp refuses every request that would override them.
const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// One configured MCP server. Its header values are secrets: `Debug` shows their names only. Its URL may hold
/// secrets too (user-info, a key in the query): `Debug` shows it as [`ServerConfig::shown_url`].
#[derive(Clone)]
pub struct ServerConfig {
    /// `[A-Za-z0-9_-]{1,64}`: said in thoughts and used as the prefix of tool names two servers share.
    pub name: String,
    /// Its streamable HTTP endpoint (`http://` or `https://`).
    pub url: String,
    /// Sent on every request (e.g. `Authorization`); each value is marked sensitive.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// When set, the tools of these names are offered (whatever they do); when not, only the tools the server
    /// marks read-only (`readOnlyHint: true`).
    pub allow: Option<Vec<String>>,
    /// Whether every request carries the caller's owner id in [`USER_HEADER`], for a server that keeps state per
    /// user.
    pub forward_user: bool,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("url", &self.shown_url())
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| (name.as_str(), "<redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("allow", &self.allow)
            .field("forward_user", &self.forward_user)
            .finish()
    }
}

impl ServerConfig {
    /// The URL as this crate shows it: `scheme://host:port/path`, without user-info or query (either may hold a
    /// secret).
    pub fn shown_url(&self) -> String {
        shown_url(&self.url)
    }

    /// The header values as text, and the URL's user-info and query, to be kept out of anything this crate says.
    pub(crate) fn secrets(&self) -> Vec<String> {
        let url = self.url.parse::<http::Uri>().ok();
        let user_info = url
            .as_ref()
            .and_then(|uri| uri.authority())
            .and_then(|authority| authority.as_str().rsplit_once('@'))
            .map(|(user_info, _)| user_info.to_string());
        let query = url.as_ref().and_then(|uri| uri.query()).map(str::to_string);
        let in_url = user_info
            .into_iter()
            .chain(query)
            .filter(|secret| !secret.is_empty());
        self.headers
            .iter()
            .filter_map(|(_, value)| value.to_str().ok())
            .filter(|value| !value.is_empty())
            .flat_map(|value| {
                // The token of `Bearer TOKEN` on its own too, should something quote it without its scheme.
                let token = value
                    .split_once(' ')
                    .map(|(_, token)| token.trim())
                    .filter(|token| !token.is_empty())
                    .map(str::to_string);
                std::iter::once(value.to_string()).chain(token)
            })
            .chain(in_url)
            .collect()
    }
}

/// Whether `name` is a server name this crate takes.
fn is_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Parses `MCP_SERVERS`. Empty (or `null`) is no servers. The error says what is wrong and where, never a header
/// value.
pub fn parse(json: &str) -> Result<Vec<ServerConfig>, String> {
    if json.trim().is_empty() {
        return Ok(Vec::new());
    }
    let value: Value =
        serde_json::from_str(json).map_err(|e| format!("MCP_SERVERS is not JSON: {e}"))?;
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => {
            return Err(
                "MCP_SERVERS must be a JSON list of {\"name\", \"url\", \"headers\"?, \"allow\"?, \"forward_user\"?} objects"
                    .into(),
            );
        }
    };
    let mut names = HashSet::new();
    let mut servers = Vec::with_capacity(items.len());
    for (index, item) in items.into_iter().enumerate() {
        let server = parse_server(index, item)?;
        if !names.insert(server.name.clone()) {
            return Err(format!(
                "MCP_SERVERS names the server {:?} twice: each name must be unique",
                server.name
            ));
        }
        servers.push(server);
    }
    Ok(servers)
}

fn parse_server(index: usize, item: Value) -> Result<ServerConfig, String> {
    let at = format!("MCP_SERVERS[{index}]");
    let Value::Object(fields) = item else {
        return Err(format!("{at} must be an object with \"name\" and \"url\""));
    };
    if let Some(unknown) = fields.keys().find(|k| {
        !matches!(
            k.as_str(),
            "name" | "url" | "headers" | "allow" | "forward_user"
        )
    }) {
        return Err(format!(
            "{at} has the field {unknown:?}; a server has only name, url, headers, allow and forward_user"
        ));
    }
    let name = match fields.get("name") {
        Some(Value::String(name)) => name.clone(),
        Some(_) => return Err(format!("{at}.name must be a string")),
        None => return Err(format!("{at} has no name")),
    };
    if !is_name(&name) {
        return Err(format!(
            "{at}.name {name:?} must be 1 to 64 of the characters A-Z, a-z, 0-9, _ and -"
        ));
    }
    let at = format!("MCP server {name:?}");
    let url = match fields.get("url") {
        Some(Value::String(url)) => url.trim().to_string(),
        Some(_) => return Err(format!("{at}: url must be a string")),
        None => return Err(format!("{at} has no url")),
    };
    check_url(&url).map_err(|why| format!("{at}: url {why}"))?;
    let headers = match fields.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(headers)) => {
            let mut parsed = Vec::with_capacity(headers.len());
            for (header, value) in headers {
                let header_name = HeaderName::from_bytes(header.as_bytes())
                    .map_err(|_| format!("{at}: {header:?} is not a header name"))?;
                if RESERVED_HEADERS.contains(&header_name.as_str()) {
                    return Err(format!(
                        "{at}: the header {header:?} is set by the MCP transport and cannot be configured"
                    ));
                }
                // The value is a secret: the errors name its header only.
                let Value::String(value) = value else {
                    return Err(format!(
                        "{at}: the value of the header {header:?} must be a string"
                    ));
                };
                let mut header_value = HeaderValue::from_str(value).map_err(|_| {
                    format!("{at}: the value of the header {header:?} is not a valid header value")
                })?;
                header_value.set_sensitive(true);
                parsed.push((header_name, header_value));
            }
            parsed
        }
        Some(_) => {
            return Err(format!(
                "{at}: headers must be an object of header names to string values"
            ));
        }
    };
    let allow = match fields.get("allow") {
        None | Some(Value::Null) => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .map(|n| match n {
                    Value::String(n) => Ok(n.clone()),
                    _ => Err(format!("{at}: allow must be a list of tool names")),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err(format!("{at}: allow must be a list of tool names")),
    };
    let forward_user = match fields.get("forward_user") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(forward)) => *forward,
        Some(_) => return Err(format!("{at}: forward_user must be true or false")),
    };
    if forward_user && headers.iter().any(|(name, _)| name == USER_HEADER) {
        return Err(format!(
            "{at}: the header \"X-Chat-User\" is set by forward_user and cannot be configured with it"
        ));
    }
    Ok(ServerConfig {
        name,
        url,
        headers,
        allow,
        forward_user,
    })
}

/// `url` as `scheme://host:port/path` (the parts it has): no user-info, no query, no fragment. A URL that does
/// not parse is not shown at all.
pub(crate) fn shown_url(url: &str) -> String {
    let Ok(uri) = url.parse::<http::Uri>() else {
        return "<not a URL>".into();
    };
    let mut shown = String::new();
    if let Some(scheme) = uri.scheme_str() {
        shown.push_str(scheme);
        shown.push_str("://");
    }
    if let Some(host) = uri.host() {
        shown.push_str(host);
    }
    if let Some(port) = uri.port_u16() {
        shown.push_str(&format!(":{port}"));
    }
    shown.push_str(uri.path());
    shown
}

/// An absolute `http` or `https` URL with a host. The errors show the URL without its user-info or query.
fn check_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|_| "is not a URL".to_string())?;
    let shown = shown_url(url);
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(format!("{shown:?} must be http or https, not {other}")),
        None => return Err(format!("{shown:?} is not an absolute http(s) URL")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{shown:?} has no host"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_or_null_is_no_servers() {
        assert!(parse("").unwrap().is_empty());
        assert!(parse("  ").unwrap().is_empty());
        assert!(parse("null").unwrap().is_empty());
        assert!(parse("[]").unwrap().is_empty());
    }

    #[test]
    fn a_full_entry_is_read() {
        let servers = parse(
            r#"[{"name":"docs-1","url":"https://mcp.example.com/mcp","headers":{"Authorization":"Bearer s3cret"},"allow":["search"]}]"#,
        )
        .unwrap();
        assert_eq!(servers.len(), 1);
        let server = &servers[0];
        assert_eq!(server.name, "docs-1");
        assert_eq!(server.url, "https://mcp.example.com/mcp");
        assert_eq!(server.headers[0].0, http::header::AUTHORIZATION);
        assert!(server.headers[0].1.is_sensitive());
        assert_eq!(server.allow.as_deref(), Some(&["search".to_string()][..]));
        assert!(!server.forward_user);
        assert_eq!(
            server.secrets(),
            vec!["Bearer s3cret".to_string(), "s3cret".to_string()]
        );
        let debug = format!("{server:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("authorization"), "{debug}");
    }

    #[test]
    fn each_mistake_is_named() {
        for (json, says) in [
            ("{}", "must be a JSON list"),
            ("[1]", "MCP_SERVERS[0] must be an object"),
            (r#"[{"url":"http://a"}]"#, "MCP_SERVERS[0] has no name"),
            (r#"[{"name":"a"}]"#, "\"a\" has no url"),
            (
                r#"[{"name":"a b","url":"http://a"}]"#,
                "A-Z, a-z, 0-9, _ and -",
            ),
            (
                r#"[{"name":"","url":"http://a"}]"#,
                "A-Z, a-z, 0-9, _ and -",
            ),
            (
                r#"[{"name":"a","url":"ftp://a/x"}]"#,
                "must be http or https",
            ),
            (
                r#"[{"name":"a","url":"/mcp"}]"#,
                "not an absolute http(s) URL",
            ),
            (r#"[{"name":"a","url":"not a url"}]"#, "is not a URL"),
            (
                r#"[{"name":"a","url":"http://a"},{"name":"a","url":"http://b"}]"#,
                "\"a\" twice",
            ),
            (
                r#"[{"name":"a","url":"http://a","allowed":["x"]}]"#,
                "the field \"allowed\"",
            ),
            (
                r#"[{"name":"a","url":"http://a","allow":"x"}]"#,
                "allow must be a list",
            ),
            (
                r#"[{"name":"a","url":"http://a","headers":["x"]}]"#,
                "headers must be an object",
            ),
            (
                r#"[{"name":"a","url":"http://a","headers":{"Accept":"x"}}]"#,
                "set by the MCP transport",
            ),
            (
                r#"[{"name":"a","url":"http://a","forward_user":"yes"}]"#,
                "forward_user must be true or false",
            ),
            (
                r#"[{"name":"a","url":"http://a","forward_user":true,"headers":{"X-Chat-User":"x"}}]"#,
                "set by forward_user",
            ),
        ] {
            let error = parse(json).expect_err(json);
            assert!(error.contains(says), "{json}: {error}");
        }
    }

    #[test]
    fn forward_user_is_read() {
        let servers = parse(
            r#"[{"name":"a","url":"http://a","forward_user":true},{"name":"b","url":"http://b","forward_user":false}]"#,
        )
        .unwrap();
        assert!(servers[0].forward_user);
        assert!(!servers[1].forward_user);
    }

    #[test]
    fn a_url_is_shown_without_user_info_or_query() {
        let servers = parse(
            r#"[{"name":"a","url":"https://me:pa55@mcp.example.com:8443/v1/mcp?key=k3y#top"}]"#,
        )
        .unwrap();
        let server = &servers[0];
        assert_eq!(server.shown_url(), "https://mcp.example.com:8443/v1/mcp");
        let debug = format!("{server:?}");
        assert!(!debug.contains("pa55") && !debug.contains("k3y"), "{debug}");
        assert_eq!(
            server.secrets(),
            vec!["me:pa55".to_string(), "key=k3y".to_string()]
        );
        assert_eq!(shown_url("http://[::1]/mcp"), "http://[::1]/mcp");
        let error = parse(r#"[{"name":"a","url":"ftp://me:pa55@h/x?key=k3y"}]"#).unwrap_err();
        assert!(!error.contains("pa55") && !error.contains("k3y"), "{error}");
        let error = parse(r#"[{"name":"a","url":"http://me:pa55@/x y"}]"#).unwrap_err();
        assert!(!error.contains("pa55"), "{error}");
    }

    #[test]
    fn a_bad_header_value_is_named_by_its_header_not_its_value() {
        let error = parse(r#"[{"name":"a","url":"http://a","headers":{"X-Key":"s3cret\nline"}}]"#)
            .unwrap_err();
        assert!(error.contains("\"X-Key\""), "{error}");
        assert!(!error.contains("s3cret"), "{error}");
        let error = parse(r#"[{"name":"a","url":"http://a","headers":{"X-Key":7}}]"#).unwrap_err();
        assert!(error.contains("must be a string"), "{error}");
    }
}
