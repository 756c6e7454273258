//! `MCP_SERVERS`: a JSON list of `{name, url, headers?, allow?}`, read strictly so that a typo is an error at cold
//! start rather than a server quietly left out.

use std::collections::HashSet;
use std::fmt;

use http::{HeaderName, HeaderValue};
use serde_json::Value;

/// Header names the MCP transport sets itself: rmcp refuses every request that would override them.
const RESERVED_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// One configured MCP server. Its header values are secrets: `Debug` shows their names only.
#[derive(Clone)]
pub struct ServerConfig {
    /// `[A-Za-z0-9_-]{1,64}`: said in thoughts and used as the prefix of tool names two servers share.
    pub name: String,
    /// Its streamable HTTP endpoint (`http://` or `https://`).
    pub url: String,
    /// Sent on every request (e.g. `Authorization`); each value is marked sensitive.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// When set, only the tools of these names are offered.
    pub allow: Option<Vec<String>>,
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("name", &self.name)
            .field("url", &self.url)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| (name.as_str(), "<redacted>"))
                    .collect::<Vec<_>>(),
            )
            .field("allow", &self.allow)
            .finish()
    }
}

impl ServerConfig {
    /// The header values as text, to be kept out of anything this crate says.
    pub(crate) fn secrets(&self) -> Vec<String> {
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
                "MCP_SERVERS must be a JSON list of {\"name\", \"url\", \"headers\"?, \"allow\"?} objects"
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
    if let Some(unknown) = fields
        .keys()
        .find(|k| !matches!(k.as_str(), "name" | "url" | "headers" | "allow"))
    {
        return Err(format!(
            "{at} has the field {unknown:?}; a server has only name, url, headers and allow"
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
    Ok(ServerConfig {
        name,
        url,
        headers,
        allow,
    })
}

/// An absolute `http` or `https` URL with a host.
fn check_url(url: &str) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|_| format!("{url:?} is not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        Some(other) => return Err(format!("{url:?} must be http or https, not {other}")),
        None => return Err(format!("{url:?} is not an absolute http(s) URL")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(format!("{url:?} has no host"));
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
        ] {
            let error = parse(json).expect_err(json);
            assert!(error.contains(says), "{json}: {error}");
        }
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
