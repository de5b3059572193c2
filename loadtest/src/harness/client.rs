//! A small JSON client for the REST API: every call returns the status, headers and parsed body.

use reqwest::Method;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
    pub text: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `body[field]` as a string, or "" when absent.
    pub fn str(&self, field: &str) -> String {
        self.body
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    }
}

#[derive(Clone)]
pub struct Client {
    base: String,
    key: Option<String>,
    http: reqwest::Client,
}

impl Client {
    pub fn new(base: String, key: Option<String>) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap_or_default();
        Client { base, key, http }
    }

    /// The same node, asked with no API key at all.
    pub fn without_key(&self) -> Client {
        Client {
            base: self.base.clone(),
            key: None,
            http: self.http.clone(),
        }
    }

    pub fn with_key(&self, key: &str) -> Client {
        Client {
            base: self.base.clone(),
            key: Some(key.to_string()),
            http: self.http.clone(),
        }
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Reply> {
        let mut req = self.http.request(method, format!("{}{}", self.base, path));
        if let Some(key) = &self.key {
            req = req.header("X-API-Key", key);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        Self::reply(req.send().await?).await
    }

    /// Sends a prepared request (custom headers or raw bodies).
    pub async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<Reply> {
        Self::reply(req.send().await?).await
    }

    pub fn raw(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{}", self.base, path));
        match &self.key {
            Some(key) => req.header("X-API-Key", key),
            None => req,
        }
    }

    async fn reply(resp: reqwest::Response) -> anyhow::Result<Reply> {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await?;
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Ok(Reply {
            status,
            headers,
            body,
            text,
        })
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.request(Method::GET, path, None).await
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.request(Method::POST, path, Some(&body)).await
    }

    pub async fn post_empty(&self, path: &str) -> anyhow::Result<Reply> {
        self.request(Method::POST, path, None).await
    }

    pub async fn put(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.request(Method::PUT, path, Some(&body)).await
    }

    pub async fn patch(&self, path: &str, body: Value) -> anyhow::Result<Reply> {
        self.request(Method::PATCH, path, Some(&body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Reply> {
        self.request(Method::DELETE, path, None).await
    }
}
