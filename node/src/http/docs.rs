//! The API's own documentation: the OpenAPI document at `/api/docs/openapi.json` and the Swagger UI page at
//! `/api/docs/`. The document needs an API key (any role) unless `DOCS_PUBLIC=true`. The page's assets hold
//! no data and are served to anyone (a browser cannot put a header on a navigation); its initializer asks for
//! the key once, keeps it for the tab, and sends it as `X-API-Key` on every request the UI makes, the one
//! for the document included. The UI never calls an outside validator.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::Value;

use super::auth::Caller;
use super::error::{ApiError, ApiResult};
use crate::app::ApiContext;

const DOC_URL: &str = "/api/docs/openapi.json";

pub(crate) fn router(doc: Value) -> Router<ApiContext> {
    // Served as the bytes it serialises to: the document as a `Value` held ~4 MB of map nodes for the
    // life of the process (a third of an idle node's heap), to answer a route that is rarely asked.
    let doc = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
    Router::new()
        .route(
            "/api/docs",
            get(|| async { Redirect::permanent("/api/docs/") }),
        )
        .route("/api/docs/", get(|| asset(String::new())))
        .route(
            DOC_URL,
            get(
                move |caller: Result<Caller, ApiError>, state: State<ApiContext>| {
                    document(caller, state, doc.clone())
                },
            ),
        )
        .route("/api/docs/swagger-initializer.js", get(initializer))
        .route(
            "/api/docs/{*file}",
            get(|Path(file): Path<String>| asset(file)),
        )
}

async fn document(
    caller: Result<Caller, ApiError>,
    State(ctx): State<ApiContext>,
    doc: Bytes,
) -> ApiResult<Response> {
    if !ctx.config.docs_public {
        caller?;
    }
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        doc,
    )
        .into_response())
}

async fn initializer(State(ctx): State<ApiContext>) -> Response {
    let script = INITIALIZER.replace(
        "__ASK_FOR_KEY__",
        if ctx.config.docs_public {
            "false"
        } else {
            "true"
        },
    );
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/javascript; charset=utf-8"),
        )],
        script,
    )
        .into_response()
}

/// A file of the vendored Swagger UI bundle.
async fn asset(file: String) -> Response {
    let config = Arc::new(utoipa_swagger_ui::Config::new([DOC_URL]).validator_url("none"));
    match utoipa_swagger_ui::serve(&file, config) {
        Ok(Some(found)) => {
            let mut response = (
                [(header::CONTENT_TYPE, found.content_type)],
                found.bytes.into_owned(),
            )
                .into_response();
            if found.gzpipped {
                response
                    .headers_mut()
                    .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
            }
            response
        }
        Ok(None) => ApiError::not_found(format!("Cannot GET /api/docs/{file}")).into_response(),
        Err(cause) => ApiError::internal(cause).into_response(),
    }
}

/// Replaces the bundle's initializer. `__ASK_FOR_KEY__` is `true` unless DOCS_PUBLIC=true; with a public
/// document the key is still asked for when the user clicks Authorize, as Swagger UI always does.
const INITIALIZER: &str = r##"window.onload = function () {
  var STORE = "wagate.apiKey";
  var askForKey = __ASK_FOR_KEY__;
  var key = window.sessionStorage.getItem(STORE) || "";
  if (!key && askForKey) {
    key = (window.prompt("API key for this wagate node (sent as the X-API-Key header):") || "").trim();
    if (key) { window.sessionStorage.setItem(STORE, key); }
  }
  window.ui = SwaggerUIBundle({
    url: "/api/docs/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    validatorUrl: null,
    persistAuthorization: true,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
    plugins: [SwaggerUIBundle.plugins.DownloadUrl],
    layout: "StandaloneLayout",
    requestInterceptor: function (request) {
      var stored = window.sessionStorage.getItem(STORE);
      var headers = request.headers || {};
      var present = Object.keys(headers).some(function (h) { return h.toLowerCase() === "x-api-key"; });
      if (stored && !present) { headers["X-API-Key"] = stored; }
      request.headers = headers;
      return request;
    },
    responseInterceptor: function (response) {
      if (response.status === 401 && String(response.url).indexOf("/api/docs/openapi.json") !== -1) {
        window.sessionStorage.removeItem(STORE);
      }
      return response;
    },
    onComplete: function () {
      if (key) { window.ui.preauthorizeApiKey("apiKey", key); }
    }
  });
};
"##;

#[cfg(test)]
mod tests {
    #[test]
    fn the_initializer_sends_the_key_and_never_calls_a_validator() {
        let script = super::INITIALIZER;
        assert!(script.contains("validatorUrl: null"));
        assert!(script.contains("headers[\"X-API-Key\"] = stored"));
        assert!(script.contains("url: \"/api/docs/openapi.json\""));
    }

    #[test]
    fn the_bundle_is_vendored() {
        let config = std::sync::Arc::new(utoipa_swagger_ui::Config::new([super::DOC_URL]));
        let index = utoipa_swagger_ui::serve("", config).ok().flatten();
        assert!(
            index.is_some_and(
                |f| String::from_utf8_lossy(&f.bytes).contains("swagger-initializer.js")
            )
        );
    }
}
